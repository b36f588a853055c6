package cometbftsynth

import (
	"context"
	"testing"

	"github.com/blockhaul/blockhaul/chain/cometbft/trust"
)

// The synthetic chain proves itself from its genesis: its commits are
// signed by the set its headers name, through joins, leaves, power changes
// and consensus-parameter changes.
func TestSyntheticProvesFromGenesis(t *testing.T) {
	for _, nv := range []int{4, 7} {
		s := NewSynthetic(SyntheticConfig{Seed: 5, Validators: nv})
		st, err := trust.FromGenesis(s.Genesis())
		if err != nil {
			t.Fatal(err)
		}
		const to = 2 * ParamsEvery
		blocks, err := s.Fetch(context.Background(), 1, to+1)
		if err != nil {
			t.Fatal(err)
		}
		recs := make([][]byte, len(blocks))
		for i, b := range blocks {
			recs[i] = b.Raw
		}
		c := trust.New(st, trust.Every)
		if err := c.Prove(recs[:to], recs[to]); err != nil {
			t.Fatalf("%d validators: %v", nv, err)
		}
		if h, root := c.Proven(); h != to || root.Kind != "genesis" {
			t.Fatalf("%d validators: proven to %d from %s", nv, h, root)
		}
		// The set and the parameters did change.
		changes := 0
		for h := uint64(2); h <= to; h++ {
			if s.setOf(h).hash != s.setOf(h-1).hash {
				changes++
			}
		}
		want := 0 // updates at u change the set of u+2
		for u := uint64(1); u+2 <= to; u++ {
			if u%ValidatorUpdatesEvery == 0 || u >= RotateAt && (u-RotateAt)%RotateEvery == 0 {
				want++
			}
		}
		if changes != want || want < 20 {
			t.Errorf("%d validators: the set changed %d times, want %d", nv, changes, want)
		}
		if consensusHash(ParamsEvery+1) == consensusHash(ParamsEvery) {
			t.Error("the consensus parameters did not change")
		}
		if c.Commits != to {
			t.Errorf("%d commits checked, want %d", c.Commits, to)
		}
	}
}
