package cometbft

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// This package's tests read records of the synthetic chain
// (chain/cometbftsynth), which imports this package:
// synthetic_link_test.go, of package cometbft_test, links it in (sets
// NewSynthetic, checks the constants below) before the tests run.

// SyntheticConfig is the part of cometbftsynth.SyntheticConfig these tests
// set.
type SyntheticConfig struct {
	Seed       int64
	TxPerBlock float64
	Validators int
}

// SyntheticChain is what these tests ask of a synthetic chain.
type SyntheticChain interface {
	AppendRecord(dst []byte, h uint64) []byte
	AppendUnchained(dst []byte, h uint64, parent [32]byte) []byte
	BlockHash(h uint64) []byte
	ExpectedCounts(h uint64) (txs, events int)
	UpdatedValidator(h uint64) [20]byte
}

// NewSynthetic returns the synthetic chain of cfg
// (cometbftsynth.NewSynthetic).
var NewSynthetic func(cfg SyntheticConfig) SyntheticChain

// The synthetic chain's constants, as cometbftsynth declares them
// (DefaultTip, DefaultValidators, ValidatorUpdatesEvery):
// synthetic_link_test.go checks that they agree.
const (
	DefaultTip            = uint64(1) << 35
	DefaultValidators     = 4
	validatorUpdatesEvery = 100
)

// SyntheticConstantsAgree reports whether the constants above are
// cometbftsynth's.
func SyntheticConstantsAgree(tip uint64, validators int, updatesEvery uint64) bool {
	return tip == DefaultTip && validators == DefaultValidators && updatesEvery == validatorUpdatesEvery
}

// pbBytes and pbString append protobuf field num holding v.
func pbBytes(b []byte, num int, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, protowire.Number(num), protowire.BytesType), v)
}

func pbString(b []byte, num int, v string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, protowire.Number(num), protowire.BytesType), v)
}
