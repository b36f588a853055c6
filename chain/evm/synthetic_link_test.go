package evm_test

import (
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
)

// The package's tests read the synthetic chain of chain/evmsynth (see
// synthetic_hook_test.go), which an in-package test cannot import.
func init() {
	evm.NewSynthetic = func(c evm.SyntheticConfig) evm.SyntheticChain {
		return evmsynth.NewSynthetic(evmsynth.SyntheticConfig{Seed: c.Seed, TxPerBlock: c.TxPerBlock, LogsPerBlock: c.LogsPerBlock})
	}
	if !evm.SyntheticConstantsAgree(evmsynth.GenesisTime, evmsynth.BlockTime, evmsynth.BlobGas) {
		panic("evm tests: synthetic_hook_test.go's constants are not evmsynth's")
	}
}
