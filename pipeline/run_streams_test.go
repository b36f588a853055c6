package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// run --export-streams 3 fetches and exports a bounded range as three
// sub-ranges at once, each its own backfill row: killed part way (a failure
// right after a commit, before its mirror, as a SIGKILL leaves it) it
// resumes every sub-range from its own cursor, and ends with the tables of
// a one-stream run, every part's row and the backfill's own complete.
func TestRunWithExportStreamsResumesToOneStreamTables(t *testing.T) {
	const to = 900
	one := pgtest.NewDatabase(t)
	cfg1 := testConfig(CmdRun, one, filepath.Join(t.TempDir(), "one"), nil, 1, to)
	cfg1.Source = newCounting(5000)
	if _, err := Run(context.Background(), cfg1, io.Discard, quiet); err != nil {
		t.Fatalf("one-stream run: %v", err)
	}

	three := pgtest.NewDatabase(t)
	cfg := testConfig(CmdRun, three, filepath.Join(t.TempDir(), "three"), nil, 1, to)
	cfg.ExportStreams = 3
	kills, restore := killAfterCommits(4, 4)
	defer restore()
	var sum Summary
	runs := 0
	for ; runs < 10; runs++ {
		cfg.Source = newCounting(5000)
		var err error
		sum, err = Run(context.Background(), cfg, io.Discard, quiet)
		if err == nil {
			break
		}
		if !errors.Is(err, errKilled) {
			t.Fatalf("run %d: %v", runs, err)
		}
		checkCheckpointsBehindRows(t, three)
		_, bfs := streamRows(t, three)
		t.Logf("killed (run %d): %q", runs, bfs)
	}
	restore()
	if kills.Load() != 4 || runs != 4 || !sum.Complete {
		t.Fatalf("%d kills over %d runs, complete %v: want 4 kills, each followed by a resume, then complete", kills.Load(), runs, sum.Complete)
	}
	_, bfs := streamRows(t, three)
	want := []string{
		"range-1-900 1-900 last 900 complete",
		"range-1-900/part-1-of-3 1-300 last 300 complete",
		"range-1-900/part-2-of-3 301-600 last 600 complete",
		"range-1-900/part-3-of-3 601-900 last 900 complete",
	}
	if fmt.Sprint(bfs) != fmt.Sprint(want) {
		t.Fatalf("backfill rows %q, want %q", bfs, want)
	}
	everyHeightOnce(t, three, to)
	if a, b := fingerprint(t, one), fingerprint(t, three); a != b {
		t.Fatalf("3 streams:\n%s\none stream:\n%s", b, a)
	}
}
