package evm

import "github.com/blockhaul/blockhaul/chain"

// This package's tests read records of the synthetic chain
// (chain/evmsynth), which imports this package: synthetic_link_test.go, of
// package evm_test, links it in (sets NewSynthetic) before the tests run.

// SyntheticConfig is the part of evmsynth.SyntheticConfig these tests set.
type SyntheticConfig struct {
	Seed                     int64
	TxPerBlock, LogsPerBlock float64
}

// SyntheticChain is what these tests ask of a synthetic chain.
type SyntheticChain interface {
	Block(h uint64) chain.Block
	Record(h uint64) []byte
	ExpectedCounts(h uint64) (txs, logs int)
}

// NewSynthetic returns the synthetic chain of cfg (evmsynth.NewSynthetic).
var NewSynthetic func(cfg SyntheticConfig) SyntheticChain

// The synthetic chain's clock and blob gas, as evmsynth declares them
// (GenesisTime, BlockTime, BlobGas): synthetic_link_test.go checks that
// they agree.
const (
	genesisTime = 1_700_000_000
	blockTime   = 12
	blobGas     = 1 << 17
)

// SyntheticConstantsAgree reports whether the constants above are
// evmsynth's.
func SyntheticConstantsAgree(genesis, block, blob int64) bool {
	return genesis == genesisTime && block == blockTime && blob == blobGas
}
