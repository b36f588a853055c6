package pipeline

import (
	"fmt"
	"io"
	"sort"

	"github.com/blockhaul/blockhaul/staging"
)

func printSummary(w io.Writer, s *Summary, store *staging.Store) {
	fmt.Fprintf(w, "\nblockhaul %s: heights %d-%d", s.Command, s.From, s.To)
	if s.Complete {
		fmt.Fprintln(w, ", complete")
	} else {
		fmt.Fprintln(w, ", NOT complete")
	}
	f := s.Fetch
	if f.Blocks > 0 {
		ratio := 0.0
		if f.StoredBytes > 0 {
			ratio = float64(f.RawBytes) / float64(f.StoredBytes)
		}
		fmt.Fprintf(w, "  fetch:   %d blocks staged in %.1fs (%.0f blocks/s), %.1f MB raw -> %.1f MB staged (ratio %.2f), %d retries\n",
			f.Blocks, f.Duration.Seconds(), rate(f.Blocks, f.Duration.Seconds()),
			float64(f.RawBytes)/1e6, float64(f.StoredBytes)/1e6, ratio, f.Retries)
	}
	e := s.Export
	if e.Blocks > 0 || e.Batches > 0 {
		var total uint64
		names := make([]string, 0, len(e.Rows))
		for n, r := range e.Rows {
			names = append(names, n)
			total += r
		}
		sort.Strings(names)
		sec := e.Duration.Seconds()
		fmt.Fprintf(w, "  export:  %d blocks, %d rows in %.1fs (%.0f blocks/s, %.0f rows/s), %d batches, %d merged after conflicts\n",
			e.Blocks, total, sec, rate(e.Blocks, sec), rate(total, sec), e.Batches, e.Conflicts)
		for _, n := range names {
			fmt.Fprintf(w, "           %-14s %d rows\n", n, e.Rows[n])
		}
	}
	if e.Last.Valid {
		fmt.Fprintf(w, "  checkpoint: height %d\n", e.Last.Height)
	}
	if store != nil {
		fmt.Fprintf(w, "  staging: %s, %.1f MB on disk\n", store.Dir(), float64(store.DiskUsage())/1e6)
	}
	fmt.Fprintf(w, "  total:   %.1fs\n", s.Duration.Seconds())
}

func rate(n uint64, sec float64) float64 {
	if sec <= 0 {
		return 0
	}
	return float64(n) / sec
}
