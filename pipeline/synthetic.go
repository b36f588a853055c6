package pipeline

import (
	"fmt"
	"time"

	"github.com/blockhaul/blockhaul/chain/synthreorg"
)

// MaxSyntheticBlockTime bounds --synthetic-block-time.
const MaxSyntheticBlockTime = time.Hour

// MaxSyntheticHeight is the synthetic chain's highest height. Its blocks
// link by real hashes, so the first block asked at height h costs
// rendering every block below it once (about 0.1 ms a block on one core):
// at most minutes here, where 10^14 would be years. A job that would fetch
// above it is refused before it starts.
const MaxSyntheticHeight = 10_000_000

// fetchesSynthetic reports whether the job fetches from the synthetic chain
// (it names no other source).
func (c *Config) fetchesSynthetic() bool {
	switch c.Command {
	case CmdRun, CmdFetch, CmdFollow:
	default:
		return false
	}
	return c.Source == nil && len(c.RPC) == 0 && c.NodeHome == "" && c.Archive == ""
}

// syntheticTipFunc is the synthetic chain's tip as time goes: fixed (see
// syntheticTip) without --synthetic-block-time; with it, the chain starts
// at --synthetic-tip (else at --from) and grows by one block each
// --synthetic-block-time from the moment the job starts, on cfg.Clock.
func syntheticTipFunc(cfg *Job) func() uint64 {
	if cfg.SyntheticBlockTime <= 0 {
		t := syntheticTip(cfg)
		return func() uint64 { return t }
	}
	now := cfg.Clock
	if now == nil {
		now = time.Now
	}
	start, base, every := now(), cfg.SyntheticTip, cfg.SyntheticBlockTime
	if base == 0 {
		base = cfg.From
	}
	return func() uint64 {
		d := now().Sub(start)
		if d < 0 {
			d = 0
		}
		return base + uint64(d/every)
	}
}

// validateSynthetic checks the flags of a growing, reorganising synthetic
// chain.
func (c *Config) validateSynthetic() []*FieldError {
	var fs []*FieldError
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	if c.fetchesSynthetic() {
		if c.From > MaxSyntheticHeight {
			bad("from", "the synthetic chain ends at height %d (reaching a height renders every block below it once), got %d", MaxSyntheticHeight, c.From)
		}
		if c.ToSet && c.To > MaxSyntheticHeight {
			bad("to", "the synthetic chain ends at height %d (reaching a height renders every block below it once), got %d", MaxSyntheticHeight, c.To)
		}
		if c.SyntheticTip > MaxSyntheticHeight {
			bad("synthetic-tip", "want at most %d, the synthetic chain's highest height, got %d", MaxSyntheticHeight, c.SyntheticTip)
		}
	}
	if c.SyntheticBlockTime < 0 || c.SyntheticBlockTime > MaxSyntheticBlockTime {
		bad("synthetic-block-time", "want 0 (a fixed tip) to %s, got %s", MaxSyntheticBlockTime, c.SyntheticBlockTime)
	}
	if c.SyntheticReorgEvery == 0 {
		return fs
	}
	if c.SyntheticReorgDepth < 1 || c.SyntheticReorgDepth > synthreorg.MaxDepth {
		bad("synthetic-reorg-depth", "want 1 to %d, got %d", synthreorg.MaxDepth, c.SyntheticReorgDepth)
	} else if c.SyntheticReorgEvery < c.SyntheticReorgDepth+2 {
		bad("synthetic-reorg-every", "want at least --synthetic-reorg-depth plus 2 (%d), got %d", c.SyntheticReorgDepth+2, c.SyntheticReorgEvery)
	}
	return fs
}
