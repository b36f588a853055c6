package pipeline

import (
	"context"
	"io"
	"strings"
	"testing"
)

// The synthetic chain has a tip a run reaches: without --to a range ends at
// DefaultSyntheticTip; --to extends the chain to it; --synthetic-tip wins
// and a --to above it is refused like a range past a real chain's tip.
func TestSyntheticChainTip(t *testing.T) {
	fetch := func(from, to uint64, toSet bool, tip uint64) (Summary, error) {
		cfg := DefaultConfig()
		cfg.Command, cfg.Staging, cfg.Progress = CmdFetch, t.TempDir(), 0
		cfg.From, cfg.To, cfg.ToSet, cfg.SyntheticTip = from, to, toSet, tip
		return Run(context.Background(), cfg, io.Discard, quiet)
	}
	sum, err := fetch(DefaultSyntheticTip-4, 0, false, 0)
	if err != nil || !sum.Complete || sum.To != DefaultSyntheticTip || sum.Fetch.Blocks != 5 {
		t.Fatalf("fetch without --to: to %d, %d blocks, complete %v, err %v; want to %d, 5 blocks", sum.To, sum.Fetch.Blocks, sum.Complete, err, DefaultSyntheticTip)
	}
	sum, err = fetch(3*DefaultSyntheticTip, 3*DefaultSyntheticTip+2, true, 0)
	if err != nil || !sum.Complete || sum.Fetch.Blocks != 3 {
		t.Fatalf("fetch with --to past the default tip: %d blocks, complete %v, err %v", sum.Fetch.Blocks, sum.Complete, err)
	}
	sum, err = fetch(1, 0, false, 7)
	if err != nil || sum.To != 7 || sum.Fetch.Blocks != 7 {
		t.Fatalf("fetch with --synthetic-tip 7: to %d, %d blocks, err %v", sum.To, sum.Fetch.Blocks, err)
	}
	_, err = fetch(1, 60, true, 50)
	if err == nil || !strings.Contains(err.Error(), "above the chain tip 50") {
		t.Fatalf("--to 60 with --synthetic-tip 50: %v, want a refusal naming the tip", err)
	}
	if c := (Config{ToSet: true, To: 100, Confirmations: 5}); syntheticTip(bareJob(c)) != 105 {
		t.Fatalf("follow --to 100 --confirmations 5: tip %d, want 105 (--to must be confirmable)", syntheticTip(bareJob(c)))
	}
}
