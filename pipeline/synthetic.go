package pipeline

import (
	"fmt"
	"time"

	"github.com/blockhaul/blockhaul/chain/synthreorg"
)

// MaxSyntheticBlockTime bounds --synthetic-block-time.
const MaxSyntheticBlockTime = time.Hour

// syntheticTipFunc is the synthetic chain's tip as time goes: fixed (see
// syntheticTip) without --synthetic-block-time; with it, the chain starts
// at --synthetic-tip (else at --from) and grows by one block each
// --synthetic-block-time from the moment the job starts, on cfg.Clock.
func syntheticTipFunc(cfg *Config) func() uint64 {
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
