package loader

import (
	"iter"

	"github.com/blockhaul/blockhaul/staging"
)

// spans yields the spans of a fetch: each gap (a missing range, in height
// order) cut into consecutive spans of at most n heights. It makes one span
// at a time, as the fetch hands them to workers, so planning a range costs
// the same whatever its length: a synthetic chain's 2^35 heights are not a
// slice of two billion spans.
func spans(gaps []staging.Range, n uint64) iter.Seq[staging.Range] {
	return func(yield func(staging.Range) bool) {
		for _, g := range gaps {
			for from := g.From; ; from += n {
				to := from + n - 1
				if to > g.To || to < from { // past the gap, or wrapped past 2^64-1
					to = g.To
				}
				if !yield(staging.Range{From: from, To: to}) {
					return
				}
				if to == g.To {
					break
				}
			}
		}
	}
}

// spanCount is the number of spans spans(gaps, n) yields.
func spanCount(gaps []staging.Range, n uint64) uint64 {
	var c uint64
	for _, g := range gaps {
		c += (g.To-g.From)/n + 1
	}
	return c
}
