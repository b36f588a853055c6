package cometbftsynth

import (
	"bytes"
	"fmt"
	"testing"
)

// TestSyntheticHashesDependOnEveryParameter: two synthetic chains whose
// parameters differ in anything share no block hash at any height, so that
// a store filled with one is told apart from the other at its first block;
// the defaults spelt out are the default chain.
func TestSyntheticHashesDependOnEveryParameter(t *testing.T) {
	const top = 300 // past the first 200-block stretch of density
	chains := []SyntheticConfig{
		{Seed: 1},
		{Seed: 2},
		{Seed: 1, TxPerBlock: 10},
		{Seed: 1, TxPerBlock: 4.6},
		{Seed: 1, Steady: true},
		{Seed: 1, Validators: 5},
		{Seed: 1, ChainID: "other"},
		{Seed: 1, Steady: true, TxPerBlock: 10},
	}
	seen := map[string]string{}
	for _, c := range chains {
		s := NewSynthetic(c)
		for h := uint64(1); h <= top; h++ {
			key := string(s.BlockHash(h))
			name := fmt.Sprintf("%+v at %d", c, h)
			if other, dup := seen[key]; dup {
				t.Fatalf("%s has the hash of %s", name, other)
			}
			seen[key] = name
		}
	}
	def := NewSynthetic(SyntheticConfig{Seed: 1})
	spelt := NewSynthetic(SyntheticConfig{Seed: 1, TxPerBlock: DefaultTxPerBlock, Validators: DefaultValidators})
	for h := uint64(1); h <= top; h++ {
		if a, b := def.Block(h), spelt.Block(h); !bytes.Equal(a.Hash, b.Hash) || !bytes.Equal(a.Raw, b.Raw) {
			t.Fatalf("block %d: the defaults spelt out are another chain", h)
		}
	}
}
