package cometbftsynth

import (
	"errors"
	"strconv"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
)

// SyntheticReorgs makes a synthetic chain reorganise as its tip grows (see
// chain/synthreorg): each time the tip reaches a multiple of Every, the
// Depth blocks below it are replaced by those of a new branch.
type SyntheticReorgs = synthreorg.Reorgs

// MaxReorgDepth bounds SyntheticReorgs.Depth.
const MaxReorgDepth = synthreorg.MaxDepth

// NewReorgingSynthetic returns the chain of cfg reorganising as r says;
// its branches are synthetic chains of their own seeds, each forking off
// the one before (SyntheticConfig.Fork). It panics if cfg or r does not
// validate: configurations from users are validated before.
func NewReorgingSynthetic(cfg SyntheticConfig, r SyntheticReorgs) *synthreorg.Chain {
	if err := errors.Join(cfg.Validate(), r.Validate()); err != nil {
		panic(err)
	}
	if cfg.Fork != nil {
		panic("cometbft: a reorganising synthetic chain cannot be a fork itself")
	}
	if cfg.ChainID == "" {
		cfg.ChainID = "blockhaul-synthetic-" + strconv.FormatInt(cfg.Seed, 10)
	}
	tip := cfg.Tip
	if tip == nil {
		tip = func() uint64 { return DefaultTip }
	}
	rc := synthreorg.Config{Reorgs: r, Family: chain.FamilyCometBFT, ChainID: cfg.ChainID, First: 1, Tip: tip}
	return synthreorg.Seeded(rc, "cometbft", cfg.Seed, func(seed int64, fork *SyntheticFork) synthreorg.Branch {
		bcfg := cfg
		bcfg.Seed, bcfg.Fork = seed, fork
		return NewSynthetic(bcfg)
	})
}
