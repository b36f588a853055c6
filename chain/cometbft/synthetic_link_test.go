package cometbft_test

import (
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
)

// The package's tests read the synthetic chain of chain/cometbftsynth (see
// synthetic_hook_test.go), which an in-package test cannot import.
func init() {
	cometbft.NewSynthetic = func(c cometbft.SyntheticConfig) cometbft.SyntheticChain {
		return cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: c.Seed, TxPerBlock: c.TxPerBlock, Validators: c.Validators})
	}
	if !cometbft.SyntheticConstantsAgree(cometbftsynth.DefaultTip, cometbftsynth.DefaultValidators, cometbftsynth.ValidatorUpdatesEvery) {
		panic("cometbft tests: synthetic_hook_test.go's constants are not cometbftsynth's")
	}
}
