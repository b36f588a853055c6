package evmsynth

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
)

// TestReorgingSynthetic: at any tip the chain links from genesis to the
// tip, each block verifies, and reaching a multiple of Every replaces the
// Depth blocks below it and nothing else.
func TestReorgingSynthetic(t *testing.T) {
	var tip atomic.Uint64
	c := NewReorgingSynthetic(SyntheticConfig{Seed: 5, TxPerBlock: 5, LogsPerBlock: 10, Tip: tip.Load}, synthreorg.Reorgs{Every: 10, Depth: 3})
	hashesAt := func(at uint64) [][]byte {
		tip.Store(at)
		bs, err := c.Fetch(context.Background(), 0, at)
		if err != nil {
			t.Fatal(err)
		}
		out := make([][]byte, len(bs))
		for i, b := range bs {
			if b.Height != uint64(i) {
				t.Fatalf("tip %d: block %d at %d", at, b.Height, i)
			}
			if i > 0 && !bytes.Equal(b.ParentHash, bs[i-1].Hash) {
				t.Fatalf("tip %d: block %d does not link to block %d", at, b.Height, i-1)
			}
			if h, err := evm.VerifyBlock(b.Raw); err != nil || !bytes.Equal(h, b.Hash) {
				t.Fatalf("tip %d: block %d does not verify: %v", at, b.Height, err)
			}
			out[i] = b.Hash
		}
		return out
	}
	before, after := hashesAt(29), hashesAt(30) // the third reorg: 27..29 replaced
	for h := 0; h <= 29; h++ {
		same := bytes.Equal(before[h], after[h])
		if replaced := h >= 27; same == replaced {
			t.Errorf("block %d: same hash before and after the reorg at tip 30: %v, want %v", h, same, !replaced)
		}
	}
	plain := NewSynthetic(SyntheticConfig{Seed: 5, TxPerBlock: 5, LogsPerBlock: 10})
	if bytes.Equal(plain.Block(1).Hash, after[1]) {
		t.Error("the reorganising chain shares block 1 with the chain without reorgs")
	}
}
