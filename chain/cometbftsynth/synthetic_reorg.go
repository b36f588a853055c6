package cometbftsynth

import (
	"errors"
	"strconv"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
	"github.com/blockhaul/blockhaul/internal/hashchain"
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
	// The reorganisations are parameters of the chain like any other: they
	// go into its seed (hashchain.Seed), so that not even the blocks below
	// the first fork are those of the chain without reorgs.
	if cfg.ChainID == "" {
		cfg.ChainID = "blockhaul-synthetic-" + strconv.FormatInt(cfg.Seed, 10)
	}
	cfg.Seed = int64(hashchain.Seed("cometbft-reorgs", cfg.Seed, []uint64{r.Every, r.Depth}, []uint64{0, 0}))
	tip := cfg.Tip
	if tip == nil {
		tip = func() uint64 { return DefaultTip }
	}
	return synthreorg.New(synthreorg.Config{
		Reorgs: r, Family: chain.FamilyCometBFT, ChainID: cfg.ChainID, First: 1, Tip: tip,
		Branch: func(k, at uint64, parent [32]byte) synthreorg.Branch {
			if k == 0 {
				return NewSynthetic(cfg)
			}
			bcfg := cfg
			bcfg.Seed = int64(hashchain.Seed("cometbft-reorg", cfg.Seed, []uint64{k}, []uint64{0}))
			bcfg.Fork = &SyntheticFork{At: at, Parent: parent[:]}
			return NewSynthetic(bcfg)
		},
	})
}
