package evmsynth

import (
	"errors"
	"strconv"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
	"github.com/blockhaul/blockhaul/internal/hashchain"
)

// NewReorgingSynthetic returns the chain of cfg reorganising as r says
// (see chain/synthreorg); its branches are synthetic chains of their
// own seeds, each forking off the one before (SyntheticConfig.Fork). It
// panics if cfg or r does not validate: configurations from users are
// validated before.
func NewReorgingSynthetic(cfg SyntheticConfig, r synthreorg.Reorgs) *synthreorg.Chain {
	if err := errors.Join(cfg.Validate(), r.Validate()); err != nil {
		panic(err)
	}
	if cfg.Fork != nil {
		panic("evm: a reorganising synthetic chain cannot be a fork itself")
	}
	cfg.ensureDefaults()
	// The reorganisations are parameters of the chain like any other: they
	// go into its seed (hashchain.Seed), so that not even the blocks below
	// the first fork are those of the chain without reorgs.
	cfg.Seed = int64(hashchain.Seed("evm-reorgs", cfg.Seed, []uint64{r.Every, r.Depth}, []uint64{0, 0}))
	tip := cfg.Tip
	if tip == nil {
		tip = func() uint64 { return DefaultSyntheticTip }
	}
	return synthreorg.New(synthreorg.Config{
		Reorgs: r, Family: chain.FamilyEVM, ChainID: strconv.FormatUint(cfg.ChainID, 10), First: 0, Tip: tip,
		Branch: func(k, at uint64, parent [32]byte) synthreorg.Branch {
			if k == 0 {
				return NewSynthetic(cfg)
			}
			bcfg := cfg
			bcfg.Seed = int64(hashchain.Seed("evm-reorg", cfg.Seed, []uint64{k}, []uint64{0}))
			bcfg.Fork = &SyntheticFork{At: at, Parent: parent[:]}
			return NewSynthetic(bcfg)
		},
	})
}
