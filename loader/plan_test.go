package loader

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/staging"
	"reflect"
)

// cancellingSource cancels its fetch at the first span asked of it: what a
// test of planning needs, without fetching the range.
type cancellingSource struct {
	*fakeSource
	cancel context.CancelFunc
	once   sync.Once
}

func (c *cancellingSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	c.once.Do(c.cancel)
	return nil, context.Canceled
}

// The memory a fetch allocates before and while it hands out its first
// spans does not depend on the length of the range: a 2^35-height range (a
// synthetic chain without --to) plans in what a 2^20-height one does. The
// bound is the writer's staging batch buffer (10 MiB, when the writer starts
// before the cancel) and change; planning every span up front allocates
// ~100 MB for 2^20 one-height spans, and for 2^35 more than the machine has.
func TestFetchPlanningMemoryDoesNotGrowWithRange(t *testing.T) {
	const bound = 16 << 20
	for _, n := range []uint64{1 << 20, 1 << 35} {
		store := openStore(t)
		ctx, cancel := context.WithCancel(context.Background())
		src := &cancellingSource{fakeSource: newFake(), cancel: cancel}
		cfg := fast
		cfg.Span = 1
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Fetch(ctx, src, store, 1, n, cfg, nil)
		runtime.ReadMemStats(&after)
		cancel()
		if err == nil {
			t.Fatalf("range of %d heights: a cancelled fetch succeeded", n)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > bound {
			t.Fatalf("range of %d heights: fetch allocated %d bytes before its first span, want at most %d", n, got, bound)
		} else {
			t.Logf("range of %d heights: %d bytes allocated", n, got)
		}
	}
}

func TestSpans(t *testing.T) {
	const top = ^uint64(0)
	tests := []struct {
		name string
		gaps []staging.Range
		n    uint64
		want []staging.Range
	}{
		{"one gap, last span short", []staging.Range{{From: 1, To: 10}}, 4, []staging.Range{{From: 1, To: 4}, {From: 5, To: 8}, {From: 9, To: 10}}},
		{"span fits the gap exactly", []staging.Range{{From: 5, To: 8}}, 4, []staging.Range{{From: 5, To: 8}}},
		{"spans never cross a staged stretch", []staging.Range{{From: 1, To: 5}, {From: 7, To: 7}, {From: 9, To: 12}}, 4,
			[]staging.Range{{From: 1, To: 4}, {From: 5, To: 5}, {From: 7, To: 7}, {From: 9, To: 12}}},
		{"one-height spans", []staging.Range{{From: 3, To: 5}}, 1, []staging.Range{{From: 3, To: 3}, {From: 4, To: 4}, {From: 5, To: 5}}},
		{"height 0", []staging.Range{{From: 0, To: 2}}, 2, []staging.Range{{From: 0, To: 1}, {From: 2, To: 2}}},
		{"the top of uint64 does not wrap", []staging.Range{{From: top - 2, To: top}}, 2, []staging.Range{{From: top - 2, To: top - 1}, {From: top, To: top}}},
		{"a span wider than what is left below 2^64", []staging.Range{{From: top - 1, To: top}}, 16, []staging.Range{{From: top - 1, To: top}}},
		{"nothing missing", nil, 3, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []staging.Range
			for r := range spans(tc.gaps, tc.n) {
				got = append(got, r)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("spans(%v, %d) = %v, want %v", tc.gaps, tc.n, got, tc.want)
			}
			if c := spanCount(tc.gaps, tc.n); c != uint64(len(got)) {
				t.Fatalf("spanCount = %d, spans yields %d", c, len(got))
			}
			checkSpans(t, tc.gaps, tc.n, got)
		})
	}
}

// checkSpans asserts that spans cover exactly the gaps, in height order,
// without overlap, each of 1..n heights inside one gap.
func checkSpans(t *testing.T, gaps []staging.Range, n uint64, got []staging.Range) {
	t.Helper()
	gi := 0
	for i, r := range got {
		if r.To < r.From || r.To-r.From >= n {
			t.Fatalf("span %v: %d heights, want 1..%d", r, r.To-r.From+1, n)
		}
		if i > 0 && r.From <= got[i-1].To {
			t.Fatalf("span %v overlaps or precedes %v", r, got[i-1])
		}
		for gi < len(gaps) && r.From > gaps[gi].To {
			gi++
		}
		if gi == len(gaps) || r.From < gaps[gi].From || r.To > gaps[gi].To {
			t.Fatalf("span %v is not inside one gap of %v", r, gaps)
		}
		if r.From != gaps[gi].From && (i == 0 || got[i-1].To+1 != r.From) {
			t.Fatalf("heights before span %v in gap %v are not planned", r, gaps[gi])
		}
	}
	var want uint64
	for _, g := range gaps {
		want += g.Len()
	}
	var have uint64
	for _, r := range got {
		have += r.Len()
	}
	if have != want {
		t.Fatalf("spans cover %d heights, the gaps %d", have, want)
	}
}

// Stopping early stops the planner; handing out spans of a 2^35-height
// range allocates nothing per span.
func TestSpansAreLazy(t *testing.T) {
	gaps := []staging.Range{{From: 1, To: 1 << 35}}
	var n int
	for r := range spans(gaps, 16) {
		if n++; n == 3 {
			if r != (staging.Range{From: 33, To: 48}) {
				t.Fatalf("third span %v", r)
			}
			break
		}
	}
	if n != 3 {
		t.Fatalf("the planner yielded %d spans after being stopped at 3", n)
	}
	allocs := testing.AllocsPerRun(5, func() {
		k := 0
		for range spans(gaps, 16) {
			if k++; k == 10000 {
				break
			}
		}
	})
	if allocs > 4 {
		t.Fatalf("planning 10000 spans of a 2^35 range made %.0f allocations, want a constant few", allocs)
	}
	p := NewProgress(1, 1<<35)
	p.plan(gaps)
	allocs = testing.AllocsPerRun(5, func() {
		p.plan(gaps)
		k := uint64(0)
		for r := range spans(gaps, 16) {
			p.committed([]staging.Range{r})
			if k++; k == 1000 {
				break
			}
		}
	})
	// committed allocates its change channel each time; nothing more.
	if allocs > 1000+16 {
		t.Fatalf("committing 1000 spans in order made %.0f allocations", allocs)
	}
	if last, ok, _ := waitNow(p, 1); !ok || last != 16000 {
		t.Fatalf("prefix after 1000 spans = %d %v, want 16000", last, ok)
	}
}

// Spans committed out of order (as parallel workers commit them) move the
// prefix only across what is contiguous, skip staged stretches between gaps,
// and leave nothing held once the prefix catches up.
func TestProgressOutOfOrderAcrossGaps(t *testing.T) {
	gaps := []staging.Range{{From: 1, To: 8}, {From: 12, To: 19}, {From: 25, To: 30}}
	p := NewProgress(1, 30)
	p.plan(gaps)
	var all []staging.Range
	for r := range spans(gaps, 3) {
		all = append(all, r)
	}
	// all: 1-3 4-6 7-8 12-14 15-17 18-19 25-27 28-30
	steps := []struct {
		commit int
		want   uint64
		ok     bool
	}{
		{1, 0, false}, {3, 0, false}, {0, 6, true}, {2, 14, true}, {7, 14, true}, {5, 14, true}, {4, 24, true}, {6, 30, true},
	}
	for _, s := range steps {
		p.committed([]staging.Range{all[s.commit]})
		last, ok, _ := waitNow(p, 30)
		if ok != s.ok || (ok && last != s.want) {
			t.Fatalf("after committing %v: prefix %d %v, want %d %v", all[s.commit], last, ok, s.want, s.ok)
		}
	}
	if len(p.ahead) != 0 || p.Staged() != 22 {
		t.Fatalf("held %v, staged %d; want nothing held and 22 staged", p.ahead, p.Staged())
	}
}
