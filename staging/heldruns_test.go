package staging

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
)

// status opened a store read-only and walked its whole index three times:
// Open's count, Staged and Missing (0.65 s a million heights each, about a
// minute at 28.8M). A read-only store keeps the runs Open's count walked
// and answers Staged and Missing from them, with no walk of its own, the
// same ranges a walk gives; past maxHeldRuns it walks as before.
func TestReadOnlyStoreAnswersFromOpensWalk(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	if err := s.Bind(chain.FamilyCometBFT, "test-1"); err != nil {
		t.Fatal(err)
	}
	var heights []uint64
	for h := uint64(3); h <= 400; h++ {
		if h%37 != 0 && (h < 100 || h > 140) {
			heights = append(heights, h)
		}
	}
	put(t, s, heights...)
	// What a walk answers, from the store open for writing.
	rng := rand.New(rand.NewPCG(1, 2))
	type query struct{ from, to uint64 }
	queries := []query{{0, ^uint64(0)}, {3, 400}, {0, 2}, {401, 500}, {100, 140}, {37, 37}, {38, 38}, {50, 10}, {30, 10}, {390, ^uint64(0)}}
	for range 40 {
		a, b := rng.Uint64N(420), rng.Uint64N(420)
		queries = append(queries, query{min(a, b), max(a, b)})
	}
	type answer struct{ staged, missing []Range }
	ask := func(s *Store, q query) answer {
		st, err := s.Staged(q.from, q.to)
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.Missing(q.from, q.to)
		if err != nil {
			t.Fatal(err)
		}
		return answer{st, m}
	}
	want := map[query]answer{}
	for _, q := range queries {
		want[q] = ask(s, q)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for _, limit := range []int{maxHeldRuns, 5} {
		func() {
			defer func(old int) { maxHeldRuns = old }(maxHeldRuns)
			maxHeldRuns = limit
			ro := openDirWith(t, dir, Options{ReadOnly: true})
			defer ro.Close()
			opened := ro.indexWalks.Load()
			for _, q := range queries {
				if got, w := ask(ro, q), want[q]; !reflect.DeepEqual(got, w) {
					t.Errorf("runs kept up to %d, %d-%d: staged %v missing %v, a walk gives %v and %v", limit, q.from, q.to, got.staged, got.missing, w.staged, w.missing)
				}
			}
			walks := ro.indexWalks.Load() - opened
			if limit == 5 && walks != int64(2*len(queries)-2) { // Missing 50-10 and 30-10 need none
				t.Errorf("more runs than kept (%d): %d walks for %d queries, want each to walk", limit, walks, 2*len(queries))
			}
			if limit != 5 && (opened != 1 || walks != 0) {
				t.Errorf("read-only store: Open walked its index %d times and %d queries %d more, want once and none", opened, 2*len(queries), walks)
			}
		}()
	}
}
