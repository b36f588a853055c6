package evmsynth

import (
	"bytes"
	"fmt"
	"testing"
)

// TestSyntheticHashesDependOnEveryParameter: two synthetic chains whose
// parameters differ in anything share no block hash at any height, genesis
// included, so that a store filled with one is told apart from the other
// at its first block; the defaults spelt out are the default chain.
func TestSyntheticHashesDependOnEveryParameter(t *testing.T) {
	const top = 40
	chains := []SyntheticConfig{
		{Seed: 1},
		{Seed: 2},
		{Seed: 1, TxPerBlock: 10},
		{Seed: 1, TxPerBlock: 10.5},
		{Seed: 1, LogsPerBlock: 3},
		{Seed: 1, ChainID: 5},
		{Seed: 1, ChainID: 5, TxPerBlock: 10},
	}
	seen := map[string]string{}
	for _, c := range chains {
		s := NewSynthetic(c)
		for h := uint64(0); h <= top; h++ {
			key := string(s.Block(h).Hash)
			name := fmt.Sprintf("%+v at %d", c, h)
			if other, dup := seen[key]; dup {
				t.Fatalf("%s has the hash of %s", name, other)
			}
			seen[key] = name
		}
	}
	def := NewSynthetic(SyntheticConfig{Seed: 1})
	spelt := NewSynthetic(SyntheticConfig{Seed: 1, ChainID: DefaultSyntheticChainID, TxPerBlock: DefaultSyntheticTxPerBlock, LogsPerBlock: DefaultSyntheticLogsPerBlock})
	for h := uint64(0); h <= top; h++ {
		if a, b := def.Block(h), spelt.Block(h); !bytes.Equal(a.Hash, b.Hash) || !bytes.Equal(a.Raw, b.Raw) {
			t.Fatalf("block %d: the defaults spelt out are another chain", h)
		}
	}
}
