package evmsynth

import (
	"errors"
	"strconv"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
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
	tip := cfg.Tip
	if tip == nil {
		tip = func() uint64 { return DefaultSyntheticTip }
	}
	rc := synthreorg.Config{Reorgs: r, Family: chain.FamilyEVM, ChainID: strconv.FormatUint(cfg.ChainID, 10), First: 0, Tip: tip}
	return synthreorg.Seeded(rc, "evm", cfg.Seed, func(seed int64, fork *SyntheticFork) synthreorg.Branch {
		bcfg := cfg
		bcfg.Seed, bcfg.Fork = seed, fork
		return NewSynthetic(bcfg)
	})
}
