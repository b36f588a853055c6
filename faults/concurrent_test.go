package faults

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConcurrentStarts starts several backfills at the same moment on an
// empty database, disjoint and overlapping, each on its own staging
// directory: every one must complete, and the tables must end identical to
// one run of the whole range (no row lost or doubled, every index there).
func TestConcurrentStarts(t *testing.T) {
	const to = 3000
	rounds := 1
	if campaign {
		rounds = 3
	}
	ref := newJob(t)
	mustRun(t, "reference run", ref.args("run", 1, to)...)
	want := digest(t, ref.dsn, "cometbft")
	ranges := [][2]uint64{{1, 1500}, {1501, 3000}, {1, 3000}, {1001, 2500}}
	var bad []string
	merged := 0
	for r := 0; r < rounds; r++ {
		dsn := newJob(t).dsn
		var ps []*proc
		for _, rg := range ranges {
			j := job{dsn: dsn, staging: filepath.Join(t.TempDir(), "staging"), batch: 100}
			ps = append(ps, startProc(t, nil, j.args("run", rg[0], rg[1])...))
		}
		for i, p := range ps {
			code := p.wait(t, 5*time.Minute)
			out := p.out.String()
			if code != 0 {
				bad = append(bad, fmt.Sprintf("round %d: backfill %d-%d: exit %d: %s", r, ranges[i][0], ranges[i][1], code, errorLine(out)))
			}
			var n int
			for _, l := range strings.Split(out, "\n") {
				if k := strings.Index(l, " merged after conflicts"); k >= 0 {
					f := strings.Fields(l[:k])
					fmt.Sscan(f[len(f)-1], &n)
				}
			}
			merged += n
		}
		if d := diffDigests(digest(t, dsn, "cometbft"), want, dataTables); len(d) > 0 {
			bad = append(bad, fmt.Sprintf("round %d: tables differ from one run of 1-%d: %s", r, to, strings.Join(d, "; ")))
		}
	}
	report(t, "concurrent starts: %d rounds × %d backfills at once (disjoint and overlapping) on an empty database: %d failures, %d batches merged after conflicts, tables %s",
		rounds, len(ranges), len(bad), merged, map[bool]string{true: "identical", false: "differ"}[len(bad) == 0])
	for _, b := range bad {
		t.Error(b)
	}
}
