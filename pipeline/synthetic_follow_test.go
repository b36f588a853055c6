package pipeline

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// tickClock is the synthetic chain's own tick: every reading is one block
// time after the last, so each look at the tip finds one more block,
// whatever the wall clock does.
func tickClock(blockTime time.Duration) func() time.Time {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var n atomic.Int64
	return func() time.Time { return t0.Add(time.Duration(n.Add(1)-1) * blockTime) }
}

func TestSyntheticTipFunc(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SyntheticBlockTime = 2 * time.Second
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg.Clock = func() time.Time { return now }
	cfg.From = 50
	tip := syntheticTipFunc(bareJob(cfg)) // starts at --from
	for _, step := range []struct {
		d    time.Duration
		want uint64
	}{{0, 50}, {1999 * time.Millisecond, 50}, {time.Millisecond, 51}, {20 * time.Second, 61}} {
		now = now.Add(step.d)
		if got := tip(); got != step.want {
			t.Fatalf("after %s more: tip %d, want %d", step.d, got, step.want)
		}
	}
	cfg.SyntheticTip = 1000 // starts at --synthetic-tip
	if got := syntheticTipFunc(bareJob(cfg))(); got != 1000 {
		t.Fatalf("tip %d, want 1000", got)
	}
	cfg.SyntheticBlockTime = 0 // a fixed tip, as before
	if got := syntheticTipFunc(bareJob(cfg))(); got != 1000 {
		t.Fatalf("fixed tip %d, want 1000", got)
	}
}

// TestFollowSyntheticBlockTimeAndReorgs: follow on a synthetic chain that
// grows one block a tick and reorganises every 40 blocks, 3 deep, repairs
// each reorg it exported across and ends with the rows of the chain as it
// finally is — those of a plain run of that chain at a fixed tip.
func TestFollowSyntheticBlockTimeAndReorgs(t *testing.T) {
	const to = 300 // reorgs at tips 120 … 280 replace exported heights; the next, at 320, none below 300
	dsn := pgtest.NewDatabase(t)
	cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "follow"), nil, 1, to)
	if reorgs := followGrowingChain(t, cfg, 100, 40); reorgs < 3 || reorgs > 5 {
		t.Errorf("follow repaired %d reorgs; the chain had 5 while it followed", reorgs)
	}
	got := fingerprint(t, dsn)

	ref := pgtest.NewDatabase(t)
	rcfg := testConfig(CmdRun, ref, filepath.Join(t.TempDir(), "ref"), nil, 1, to)
	rcfg.SyntheticTip = to // the chain at tip 300: the reorg at 280 done, the one at 320 to come
	rcfg.SyntheticReorgEvery, rcfg.SyntheticReorgDepth = 40, 3
	if _, err := Run(context.Background(), rcfg, io.Discard, quiet); err != nil {
		t.Fatalf("reference run: %v", err)
	}
	if want := fingerprint(t, ref); got != want {
		t.Fatalf("after follow:\n%s\nthe chain's rows:\n%s", got, want)
	}
}

// followGrowingChain follows cfg's synthetic chain from tip as it grows a
// block a tick and reorganises every `every` blocks, 3 deep, and returns
// the reorgs follow repaired.
func followGrowingChain(t *testing.T, cfg Config, tip, every uint64) uint64 {
	t.Helper()
	cfg.SyntheticTip = tip
	cfg.SyntheticBlockTime = time.Second
	cfg.Clock = tickClock(cfg.SyntheticBlockTime)
	cfg.SyntheticReorgEvery, cfg.SyntheticReorgDepth = every, 3
	cfg.PollInterval = time.Millisecond
	sum, err := Run(context.Background(), cfg, io.Discard, quiet)
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	t.Logf("%d reorgs repaired", sum.Reorgs)
	return sum.Reorgs
}

// The same on the EVM synthetic chain (from genesis).
func TestFollowSyntheticReorgsEVM(t *testing.T) {
	const to = 120 // reorgs at tips 60 … 120 replace exported heights; the next, at 140, none below 120
	evmTables := map[string]string{"blocks": "number", "transactions": "block_number, transaction_index", "logs": "block_number, log_index"}
	dsn := pgtest.NewDatabase(t)
	cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "follow"), nil, 0, to)
	cfg.Chain, cfg.SyntheticTxs = "evm", 10
	if reorgs := followGrowingChain(t, cfg, 50, 20); reorgs < 2 || reorgs > 4 {
		// Of the chain's 4, one that comes before follow exported the
		// heights it replaces replaces nothing exported.
		t.Errorf("follow repaired %d reorgs, want 2 to the chain's 4", reorgs)
	}
	ref := pgtest.NewDatabase(t)
	rcfg := testConfig(CmdRun, ref, filepath.Join(t.TempDir(), "ref"), nil, 0, to)
	rcfg.Chain, rcfg.SyntheticTxs = "evm", 10
	rcfg.SyntheticTip = to
	rcfg.SyntheticReorgEvery, rcfg.SyntheticReorgDepth = 20, 3
	if _, err := Run(context.Background(), rcfg, io.Discard, quiet); err != nil {
		t.Fatalf("reference run: %v", err)
	}
	got, want := pgtest.Fingerprint(t, dsn, "evm", evmTables), pgtest.Fingerprint(t, ref, "evm", evmTables)
	for table := range evmTables {
		if got[table] != want[table] {
			t.Errorf("after follow, %s: %s; the chain's: %s", table, got[table], want[table])
		}
	}
}

func TestSyntheticFlagsValidated(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		flag string
	}{
		{func(c *Config) { c.SyntheticBlockTime = -time.Second }, "synthetic-block-time"},
		{func(c *Config) { c.SyntheticReorgEvery = 4; c.SyntheticReorgDepth = 3 }, "synthetic-reorg-every"},
		{func(c *Config) { c.SyntheticReorgEvery = 40; c.SyntheticReorgDepth = 0 }, "synthetic-reorg-depth"},
		{func(c *Config) { c.SyntheticReorgEvery = 40; c.SyntheticReorgDepth = 39; c.Chain = "evm" }, "synthetic-reorg-every"},
	} {
		cfg := DefaultConfig()
		cfg.Command, cfg.PG = CmdFollow, "postgres://127.0.0.1:1/x"
		tc.mod(&cfg)
		cfg.EnsureDefaults()
		err := cfg.Validate()
		ce, ok := err.(*ConfigError)
		if !ok || len(ce.Fields) != 1 || ce.Fields[0].Flag != tc.flag {
			t.Errorf("want one problem of --%s, got %v", tc.flag, err)
		}
	}
}

// The synthetic chain's cost of reaching a height grows with the height:
// a job that would fetch above its highest is refused before it starts
// (exit 2, naming the flags), where it once looped for minutes ignoring
// SIGTERM. A range of another source is not the synthetic chain's.
func TestSyntheticHeightBounded(t *testing.T) {
	for _, cmd := range []string{CmdFetch, CmdRun, CmdFollow} {
		cfg := DefaultConfig()
		cfg.Command, cfg.PG, cfg.Staging = cmd, "postgres://127.0.0.1:1/x", t.TempDir()
		cfg.From, cfg.To, cfg.ToSet = 99999999999990, 99999999999999, true
		cfg.EnsureDefaults()
		err := cfg.Validate()
		ce, ok := err.(*ConfigError)
		if !ok || ExitCode(err) != ExitConfig {
			t.Fatalf("%s at 10^14: want a configuration error, got %v", cmd, err)
		}
		flags := map[string]bool{}
		for _, f := range ce.Fields {
			flags[f.Flag] = true
		}
		if !flags["from"] || !flags["to"] || !strings.Contains(err.Error(), "10000000") {
			t.Errorf("%s at 10^14: want --from and --to refused naming the highest height, got %v", cmd, err)
		}
		cfg.RPC = []string{"http://127.0.0.1:1"}
		if err := cfg.Validate(); err != nil && strings.Contains(err.Error(), "synthetic") {
			t.Errorf("%s with --rpc: the synthetic chain's bound applied: %v", cmd, err)
		}
	}
	cfg := DefaultConfig()
	cfg.Command, cfg.Staging = CmdFetch, t.TempDir()
	cfg.From, cfg.To, cfg.ToSet = MaxSyntheticHeight-10, MaxSyntheticHeight, true
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		t.Errorf("fetch up to the synthetic chain's highest height refused: %v", err)
	}
}
