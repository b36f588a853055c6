package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// streamRows reads the head's checkpoint row and every backfill row.
func streamRows(t *testing.T, dsn string) (head string, backfills []string) {
	t.Helper()
	ctx := context.Background()
	conn := pgConn(t, dsn)
	if err := conn.QueryRow(ctx, `SELECT coalesce((SELECT format('start %s height %s', start_height, height)
	FROM cometbft.blockhaul_checkpoints WHERE stream = 'head'), 'none')`).Scan(&head); err != nil {
		t.Fatal(err)
	}
	backfills = pgtest.Strings(t, conn, `SELECT format('%s %s-%s last %s %s', alias, range_start, range_end, last_height, status)
	FROM cometbft.blockhaul_backfills ORDER BY alias`)
	return head, backfills
}

// everyHeightOnce fails unless cometbft.blocks holds each height of
// [1, to] exactly once.
func everyHeightOnce(t *testing.T, dsn string, to int64) {
	t.Helper()
	ctx := context.Background()
	conn := pgConn(t, dsn)
	var n, distinct, lo, hi int64
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT height), coalesce(min(height), 0), coalesce(max(height), 0) FROM cometbft.blocks`).Scan(&n, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if n != to || distinct != to || lo != 1 || hi != to {
		t.Fatalf("blocks: %d rows, %d heights, %d-%d; want every height of 1-%d once", n, distinct, lo, hi, to)
	}
}

// follow --backfill-from runs the head stream and a backfill of the heights
// below where the head started in one process over one staging store: the
// head keeps its checkpoint (start and height its own), the backfill has
// its own row, complete; a range already exported by another backfill is
// merged, not duplicated; the tables are those of one plain load.
func TestFollowWithBackfillInOneProcess(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	// Tip 700, +25 a poll, no fork; the head starts at 401 and stops at
	// 900 (--to): it waits for the chain beside the backfill.
	fc := newForkChain(700, 25, ^uint64(0), 0)
	// Another backfill already loaded 351-420, across where the head
	// starts: the overlap the two streams share with it is merged.
	early := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "early"), nil, 351, 420)
	early.Source, early.Alias = tipView{fc}, "early"
	if _, err := Run(context.Background(), early, io.Discard, quiet); err != nil {
		t.Fatalf("earlier backfill: %v", err)
	}

	cfg := testConfig(CmdFollow, dsn, stg, fc, 401, 900)
	cfg.BackfillFrom, cfg.BackfillFromSet = 1, true
	var out bytes.Buffer
	sum, err := Run(context.Background(), cfg, &out, quiet)
	if err != nil {
		t.Fatalf("follow with backfill: %v\n%s", err, out.String())
	}
	if !sum.Complete || sum.Backfill == nil || !sum.Backfill.Complete {
		t.Fatalf("complete %v, backfill %+v", sum.Complete, sum.Backfill)
	}
	if !strings.Contains(out.String(), "backfill range-1-400 (1-400): 400 blocks exported, complete") {
		t.Fatalf("summary does not report the backfill:\n%s", out.String())
	}
	head, bfs := streamRows(t, dsn)
	if head != "start 401 height 900" {
		t.Fatalf("head checkpoint %q, want start 401 height 900", head)
	}
	if want := []string{"early 351-420 last 420 complete", "range-1-400 1-400 last 400 complete"}; fmt.Sprint(bfs) != fmt.Sprint(want) {
		t.Fatalf("backfill rows %q, want %q", bfs, want)
	}
	if sum.Backfill.Export.Conflicts == 0 && sum.Export.Conflicts == 0 {
		t.Fatal("no batch met the earlier backfill's rows: the overlap did not happen")
	}
	everyHeightOnce(t, dsn, 900)
	if got, want := fingerprint(t, dsn), plainLoad(t, 900); got != want {
		t.Fatalf("contents differ from one plain load:\n%s\nwant\n%s", got, want)
	}

	// Run again with the same flags: the backfill is a no-op, the head
	// complete at once.
	fc2 := newForkChain(1000, 0, ^uint64(0), 0)
	cfg.Source = fc2
	if sum, err := Run(context.Background(), cfg, io.Discard, quiet); err != nil || !sum.Complete || !sum.Backfill.Complete || sum.Backfill.Export.Blocks != 0 {
		t.Fatalf("second run: %v, complete %v, backfill %+v", err, sum.Complete, sum.Backfill)
	}
}

// A backfill that has nothing below the head to fill is refused, naming
// the flag, before anything runs; --backfill-from belongs to follow.
func TestBackfillFromRefusals(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	fc := newForkChain(700, 0, ^uint64(0), 0)
	cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "s"), fc, 401, 500)
	cfg.BackfillFrom, cfg.BackfillFromSet = 401, true
	_, err := Run(context.Background(), cfg, io.Discard, quiet)
	if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "--backfill-from") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("backfill from the head's start: %v (exit %d), want exit 2 naming --backfill-from", err, ExitCode(err))
	}
	if head, _ := streamRows(t, dsn); head != "none" {
		t.Fatalf("a refused job moved the head: %s", head)
	}
	cfg.Command = CmdRun
	cfg.BackfillFrom = 1
	if _, err := Run(context.Background(), cfg, io.Discard, quiet); ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "--backfill-from") {
		t.Fatalf("run --backfill-from: %v, want exit 2 naming the flag", err)
	}
}

// followWithBackfill configures a follow of heights 601-1100 of a
// 1,200-block chain with a backfill of the heights below them, into a
// database of its own.
func followWithBackfill(t *testing.T) (dsn string, cfg Config) {
	dsn = pgtest.NewDatabase(t)
	cfg = testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "s"), newForkChain(1200, 0, ^uint64(0), 0), 601, 1100)
	cfg.BackfillFrom, cfg.BackfillFromSet = 1, true
	return dsn, cfg
}

// A job killed part way (here: failed right after a batch commit, before
// its staging mirror, as a SIGKILL leaves it) resumes both streams each
// from its own cursor: the same tables as one plain load, the head's
// checkpoint its own, the backfill's row complete. The crash point counts
// the commits of both streams; every third one up to the sixth failure
// ends the job.
func TestFollowWithBackfillResumesAfterKill(t *testing.T) {
	dsn, cfg := followWithBackfill(t)
	kills, restore := killAfterCommits(3, 6)
	defer restore()
	runs := 0
	for ; runs < 20; runs++ {
		sum, err := Run(context.Background(), cfg, io.Discard, quiet)
		if err == nil {
			if !sum.Complete || !sum.Backfill.Complete {
				t.Fatalf("run %d ended without error but incomplete: head %v backfill %+v", runs, sum.Complete, sum.Backfill)
			}
			break
		}
		if !errors.Is(err, errKilled) {
			t.Fatalf("run %d: %v", runs, err)
		}
		// Never a checkpoint ahead of its rows.
		head, bfs := streamRows(t, dsn)
		checkCheckpointsBehindRows(t, dsn)
		t.Logf("killed (run %d): head %s; backfills %q", runs, head, bfs)
	}
	restore()
	if kills.Load() != 6 || runs != 6 {
		t.Fatalf("%d kills over %d runs, want 6 kills, each followed by a resume", kills.Load(), runs)
	}
	head, bfs := streamRows(t, dsn)
	if head != "start 601 height 1100" || fmt.Sprint(bfs) != "[range-1-600 1-600 last 600 complete]" {
		t.Fatalf("after the resumes: head %q, backfills %q", head, bfs)
	}
	everyHeightOnce(t, dsn, 1100)
	if got, want := fingerprint(t, dsn), plainLoad(t, 1100); got != want {
		t.Fatalf("contents differ from one plain load:\n%s\nwant\n%s", got, want)
	}
}

// checkCheckpointsBehindRows fails when a stream's cursor names a height
// whose block row is not in PostgreSQL.
func checkCheckpointsBehindRows(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn := pgConn(t, dsn)
	var missing int
	if err := conn.QueryRow(ctx, `SELECT
	(SELECT count(*) FROM cometbft.blockhaul_checkpoints c WHERE c.height IS NOT NULL AND NOT EXISTS (SELECT 1 FROM cometbft.blocks b WHERE b.height = c.height)) +
	(SELECT count(*) FROM cometbft.blockhaul_backfills f WHERE f.last_height IS NOT NULL AND NOT EXISTS (SELECT 1 FROM cometbft.blocks b WHERE b.height = f.last_height))`).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if missing > 0 {
		t.Fatalf("%d cursors name a height whose rows are not in PostgreSQL", missing)
	}
}

// plainLoad loads [1, to] of the unforked chain of newForkChain with one
// run into a fresh database and returns its fingerprint.
func plainLoad(t *testing.T, to uint64) string {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "ref"), nil, 1, to)
	cfg.Source = tipView{newForkChain(to+1000, 0, ^uint64(0), 0)}
	if _, err := Run(context.Background(), cfg, io.Discard, quiet); err != nil {
		t.Fatalf("reference run: %v", err)
	}
	return fingerprint(t, dsn)
}

// follow --backfill-from splits its backfill into export streams as run
// does a range (here auto, 3 on "4 CPUs"), each sub-range its own row and
// cursor: killed after every third commit of any stream, six times, each
// run resumes every stream where it stopped with the 3 sub-ranges the first
// run recorded; the backfill's own row is complete only once every part's
// is; the head's checkpoint is its own throughout; the tables end as one
// plain load's.
func TestFollowBackfillOverExportStreamsResumesAfterKill(t *testing.T) {
	dsn, cfg := followWithBackfill(t)
	cfg.ExportStreams = 0
	if err := cfg.Indexes.Set("minimal"); err != nil { // no BRIN index: auto splits by the CPUs
		t.Fatal(err)
	}
	withCPUs(t, 4)
	kills, restore := killAfterCommits(3, 6)
	defer restore()
	runs := 0
	var out bytes.Buffer
	for ; runs < 20; runs++ {
		out.Reset()
		sum, err := Run(context.Background(), cfg, &out, quiet)
		if err == nil {
			if !sum.Complete || !sum.Backfill.Complete || sum.Backfill.Streams != 3 {
				t.Fatalf("run %d ended without error but: head complete %v, backfill %+v", runs, sum.Complete, sum.Backfill)
			}
			break
		}
		if !errors.Is(err, errKilled) {
			t.Fatalf("run %d: %v", runs, err)
		}
		checkCheckpointsBehindRows(t, dsn)
		head, bfs := streamRows(t, dsn)
		if strings.HasPrefix(head, "start") && !strings.HasPrefix(head, "start 601 ") {
			t.Fatalf("killed (run %d): the head's checkpoint %q is not the head's own", runs, head)
		}
		parts, whole := 0, false
		for _, b := range bfs {
			switch {
			case strings.HasPrefix(b, "range-1-600/part-") && strings.HasSuffix(b, " complete"):
				parts++
			case strings.HasPrefix(b, "range-1-600/part-") && !strings.Contains(b, "-of-3 "):
				t.Fatalf("killed (run %d): a sub-range of another split: %q", runs, bfs)
			case b == "range-1-600 1-600 last 600 complete":
				whole = true
			}
		}
		if whole && parts != 3 {
			t.Fatalf("killed (run %d): the backfill's row is complete with %d of 3 parts: %q", runs, parts, bfs)
		}
		t.Logf("killed (run %d): head %s; backfills %q", runs, head, bfs)
	}
	restore()
	if kills.Load() != 6 || runs != 6 {
		t.Fatalf("%d kills over %d runs, want 6 kills, each followed by a resume", kills.Load(), runs)
	}
	head, bfs := streamRows(t, dsn)
	want := []string{
		"range-1-600 1-600 last 600 complete",
		"range-1-600/part-1-of-3 1-200 last 200 complete",
		"range-1-600/part-2-of-3 201-400 last 400 complete",
		"range-1-600/part-3-of-3 401-600 last 600 complete",
	}
	if head != "start 601 height 1100" || fmt.Sprint(bfs) != fmt.Sprint(want) {
		t.Fatalf("after the resumes: head %q, backfills %q; want start 601 height 1100, %q", head, bfs, want)
	}
	if !strings.Contains(out.String(), "backfill range-1-600 (1-600): ") || !strings.Contains(out.String(), "over 3 export streams (resuming") {
		t.Errorf("the summary does not give the backfill's streams:\n%s", out.String())
	}
	everyHeightOnce(t, dsn, 1100)
	if got, want := fingerprint(t, dsn), plainLoad(t, 1100); got != want {
		t.Fatalf("contents differ from one plain load:\n%s\nwant\n%s", got, want)
	}
}
