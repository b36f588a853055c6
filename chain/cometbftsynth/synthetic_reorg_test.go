package cometbftsynth

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
)

// TestReorgingSynthetic: at any tip the chain links from block 1 to the
// tip, each block verifies, and reaching a multiple of Every replaces the
// Depth blocks below it and nothing else.
func TestReorgingSynthetic(t *testing.T) {
	var tip atomic.Uint64
	r := SyntheticReorgs{Every: 20, Depth: 3}
	c := NewReorgingSynthetic(SyntheticConfig{Seed: 5, Tip: tip.Load}, r)
	ctx := context.Background()
	chainAt := func(t *testing.T, at uint64) []chainBlock {
		tip.Store(at)
		bs, err := c.Fetch(ctx, 1, at)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]chainBlock, len(bs))
		for i, b := range bs {
			if b.Height != uint64(i+1) {
				t.Fatalf("tip %d: block %d at %d", at, b.Height, i+1)
			}
			if i > 0 && !bytes.Equal(b.ParentHash, bs[i-1].Hash) {
				t.Fatalf("tip %d: block %d does not link to block %d", at, b.Height, i)
			}
			if h, err := cometbft.VerifyBlock(b.Raw); err != nil || !bytes.Equal(h, b.Hash) {
				t.Fatalf("tip %d: block %d does not verify: %v", at, b.Height, err)
			}
			out[i] = chainBlock{b.Hash, b.Raw}
		}
		return out
	}
	before := chainAt(t, 59)
	after := chainAt(t, 60) // the third reorg: 57..59 replaced, 60 new
	for h := 1; h <= 59; h++ {
		same := bytes.Equal(before[h-1].hash, after[h-1].hash)
		if replaced := h >= 57; same == replaced {
			t.Errorf("block %d: same hash before and after the reorg at tip 60: %v, want %v", h, same, !replaced)
		}
	}
	if n := c.Reorgs(60); n != 3 {
		t.Errorf("%d reorgs at tip 60, want 3", n)
	}
	// A far tip in one go, then history again: branches evicted are made
	// again from their fork parents, the same blocks.
	far := chainAt(t, 400)
	if n := c.Kept(); n > synthreorg.LiveBranches {
		t.Errorf("%d branches kept, want at most %d", n, synthreorg.LiveBranches)
	}
	fresh := NewReorgingSynthetic(SyntheticConfig{Seed: 5, Tip: tip.Load}, r)
	for _, h := range []uint64{1, 57, 100, 397, 400} {
		if b := fresh.Block(h); !bytes.Equal(b.Hash, far[h-1].hash) {
			t.Errorf("block %d at tip 400 differs between two chains of one config", h)
		}
	}
	for _, bad := range []SyntheticReorgs{{Every: 4, Depth: 3}, {Every: 10, Depth: 0}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validates", bad)
		}
	}
}

type chainBlock struct{ hash, raw []byte }
