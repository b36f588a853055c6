package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

// ageSchema turns a cometbft schema filled by this blockhaul into one an
// older blockhaul filled: the columns added since the first release
// dropped, a table added since dropped, no versions recorded.
func ageSchema(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ALTER TABLE cometbft.transactions DROP COLUMN block_time;
ALTER TABLE cometbft.events DROP COLUMN block_time, DROP COLUMN tx_hash;
DROP TABLE cometbft.commit_signatures;
DROP TABLE cometbft.blockhaul_schema_versions`); err != nil {
		t.Fatal(err)
	}
}

func queryInt(t *testing.T, dsn, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func tablesNamed(all []chain.Table, names ...string) []chain.Table {
	var out []chain.Table
	for _, t := range all {
		for _, n := range names {
			if t.Name == n {
				out = append(out, t)
			}
		}
	}
	return out
}

// TestReplayBesideFollow: a database an older blockhaul filled (the head
// stream at 300) is brought up to date by the follow that resumes on it,
// while a replay of events, transactions and commit_signatures rewrites
// heights 1-300 in place from staging: at the end every table equals a
// fresh export of 1-600 (the replayed ones column by column, whatever order
// their columns were added in), the head stream's checkpoint is the
// follow's own, the replay touched no other table and no stream row, and
// its own row says complete.
func TestReplayBesideFollow(t *testing.T) {
	ctx := context.Background()
	all := familyTablesOf(t, "cometbft")
	replayed := []string{"transactions", "events", "commit_signatures"}

	ref := pgtest.NewDatabase(t)
	mustRunWith(t, testConfig(CmdRun, ref, filepath.Join(t.TempDir(), "ref"), nil, 1, 600), newCounting(600))
	want := columnPrints(t, ref, "cometbft", all)

	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	mustRunWith(t, testConfig(CmdFollow, dsn, stg, nil, 1, 300), newCounting(300))
	ageSchema(t, dsn)
	blocksBefore := columnPrints(t, dsn, "cometbft", tablesNamed(all, "blocks"))["blocks"]

	// The follow resumes on the old database (and upgrades it); once it
	// has started fetching 301-600 it waits for the replay's first chunk,
	// so that both write at once.
	following := make(chan struct{})
	replayStarted := make(chan struct{})
	var once, once2 sync.Once
	src := newCounting(600)
	src.onFetch = func(from uint64) {
		once.Do(func() {
			close(following)
			select {
			case <-replayStarted:
			case <-time.After(2 * time.Minute):
			}
		})
	}
	var followErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A staging store is open in one process at a time: the follow
		// stages into its own, the replay reads the one the history was
		// exported from.
		_, followErr = runWith(t, testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "head"), nil, 1, 600), src)
	}()
	select {
	case <-following:
	case <-done:
		t.Fatalf("follow ended before fetching: %v", followErr)
	}

	store := stagingtest.Open(t, stg, staging.Options{ReadOnly: true})
	defer store.Close()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	cfg := DefaultConfig()
	full, err := bareJob(cfg).decoder()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := export.Select(full, replayed)
	if err != nil {
		t.Fatal(err)
	}
	res, err := export.Replay(ctx, export.Fixed(conn), store, dec, export.ReplayConfig{Schema: "cometbft", BatchBlocks: 40,
		OnBatch: func(export.BatchStats) { once2.Do(func() { close(replayStarted) }) }})
	once2.Do(func() { close(replayStarted) })
	if err != nil || !res.Complete {
		t.Fatalf("replay: %v (complete %v)", err, res.Complete)
	}
	<-done
	if followErr != nil {
		t.Fatalf("follow beside the replay: %v", followErr)
	}
	if res.Start != 1 || res.Last.Height != 300 || res.Blocks != 300 {
		t.Errorf("replayed from %d to %d, %d blocks; want 1-300, 300 blocks (the heights covered when it started)", res.Start, res.Last.Height, res.Blocks)
	}

	got := columnPrints(t, dsn, "cometbft", all)
	for _, tb := range all {
		if got[tb.Name] != want[tb.Name] {
			t.Errorf("%s: %s, want %s (a fresh export's)", tb.Name, got[tb.Name], want[tb.Name])
		}
	}
	// The parity gate agrees: checksum digests the decoder's columns, so
	// an upgraded, replayed table digests as a fresh one.
	for _, tb := range all {
		if got, want := tableDigest(t, dsn, tb), tableDigest(t, ref, tb); got != want {
			t.Errorf("checksum of %s: %s, want %s (the fresh export's)", tb.Name, got, want)
		}
	}
	if got := columnPrints(t, dsn, "cometbft", tablesNamed(all, "blocks"))["blocks"]; got == blocksBefore {
		t.Errorf("blocks did not grow beside the replay: the follow wrote nothing")
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM cometbft.blocks WHERE height <= 300 AND xmin::text::bigint >= (SELECT min(xmin::text::bigint) FROM cometbft.events WHERE height <= 300)`); n != 0 {
		t.Errorf("%d blocks rows of the replayed heights were rewritten; the replay writes only its tables", n)
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM cometbft.blockhaul_checkpoints WHERE stream = 'head' AND height = 600`); n != 1 {
		t.Errorf("the head checkpoint is not the follow's 600")
	}
	if n := queryInt(t, dsn, `SELECT (SELECT count(*) FROM cometbft.blockhaul_checkpoints) + (SELECT count(*) FROM cometbft.blockhaul_backfills)`); n != 1 {
		t.Errorf("%d stream rows, want the head's alone", n)
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM cometbft.blockhaul_replays WHERE alias = 'replay/transactions,events,commit_signatures' AND status = 'complete' AND range_start = 1 AND range_end = 300 AND last_height = 300`); n != 1 {
		t.Errorf("the replay's row is not complete over 1-300")
	}
}

// TestReplayResumesAfterACrash: a replay (through export --replay) stopped
// at each crash point of its third chunk leaves its chunks whole — the rows
// of every height either all old or all new, none lost or doubled — and its
// progress row at the last committed chunk; run again, it resumes there
// and ends equal to a fresh export. The head stream's checkpoint never
// moves.
func TestReplayResumesAfterACrash(t *testing.T) {
	all := familyTablesOf(t, "cometbft")
	events := tablesNamed(all, "events")
	ref := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	mustRunWith(t, testConfig(CmdRun, ref, stg, nil, 1, 300), newCounting(300))
	want := columnPrints(t, ref, "cometbft", events)["events"]
	eventsTotal := queryInt(t, ref, `SELECT count(*) FROM cometbft.events`)

	for _, c := range []struct {
		point     crashpoint.Point
		committed int64 // heights whose chunk committed before the crash
	}{
		{crashpoint.AfterCopy, 100},
		{crashpoint.BeforeCommit, 100},
		{crashpoint.AfterCommit, 150},
	} {
		t.Run(string(c.point), func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			mustRunWith(t, testConfig(CmdFollow, dsn, stg, nil, 1, 300), newCounting(300))
			ageSchema(t, dsn)
			replay := func() (Summary, error) {
				cfg := testConfig(CmdExport, dsn, stg, nil, 1, 0)
				cfg.Replay, cfg.BatchBlocks = []string{"events"}, 50
				return Run(context.Background(), cfg, io.Discard, quiet)
			}
			hits := 0
			boom := errors.New("crash")
			restore := crashpoint.Set(func(_ context.Context, p crashpoint.Point) error {
				if p == c.point {
					if hits++; hits == 3 {
						return boom
					}
				}
				return nil
			})
			_, err := replay()
			restore()
			if !errors.Is(err, boom) {
				t.Fatalf("replay with a crash at the 3rd %s: %v", c.point, err)
			}
			if n := queryInt(t, dsn, `SELECT last_height FROM cometbft.blockhaul_replays WHERE status = 'in_progress'`); n != c.committed {
				t.Errorf("replay row at %d after the crash, want %d", n, c.committed)
			}
			if n := queryInt(t, dsn, `SELECT count(*) FROM cometbft.events`); n != eventsTotal {
				t.Errorf("%d events after the crash, want %d: rows lost or doubled", n, eventsTotal)
			}
			// Replayed heights have their tx_hash back; the rest are still
			// the old rows (NULL), and no height is half one, half the other.
			if n := queryInt(t, dsn, `SELECT count(*) FROM (SELECT height FROM cometbft.events GROUP BY height
	HAVING bool_or(tx_hash IS NULL AND tx_index IS NOT NULL) AND bool_or(tx_hash IS NOT NULL)) x`); n != 0 {
				t.Errorf("%d heights with both replayed and old events", n)
			}
			if n := queryInt(t, dsn, `SELECT coalesce(max(height), 0) FROM cometbft.events WHERE block_time IS NOT NULL`); n != c.committed {
				t.Errorf("events replayed up to %d, want %d", n, c.committed)
			}
			sum, err := replay()
			if err != nil || !sum.Complete {
				t.Fatalf("resumed replay: %v (complete %v)", err, sum.Complete)
			}
			if sum.Export.Start != uint64(c.committed)+1 {
				t.Errorf("resumed at %d, want %d", sum.Export.Start, c.committed+1)
			}
			if got := columnPrints(t, dsn, "cometbft", events)["events"]; got != want {
				t.Errorf("events after the resume: %s, want %s (a fresh export's)", got, want)
			}
			if n := queryInt(t, dsn, `SELECT count(*) FROM cometbft.blockhaul_checkpoints WHERE stream = 'head' AND height = 300`); n != 1 {
				t.Errorf("the head checkpoint moved")
			}
		})
	}
}

// TestReplayRefusesWhatIsNotThere: a range outside the heights the
// checkpoints cover, a database with none, and heights not staged (another
// staging directory) are refused with exit 2 before anything is written.
func TestReplayRefusesWhatIsNotThere(t *testing.T) {
	stg := filepath.Join(t.TempDir(), "s")
	dsn := pgtest.NewDatabase(t)
	mustRunWith(t, testConfig(CmdRun, dsn, stg, nil, 101, 200), newCounting(300))
	empty := pgtest.NewDatabase(t)
	for _, c := range []struct {
		name     string
		dsn, stg string
		from, to uint64
		fromSet  bool
		want     string
	}{
		{"below the covered heights", dsn, stg, 50, 150, true, "heights 50-100 of 50-150 are not in PostgreSQL"},
		{"nothing exported", empty, stg, 0, 0, false, "holds no exported heights"},
		{"not staged", dsn, filepath.Join(t.TempDir(), "other"), 0, 0, false, "heights 101-200 are exported but not staged"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(CmdExport, c.dsn, c.stg, nil, max(c.from, 1), c.to)
			cfg.FromSet = c.fromSet
			cfg.Replay = []string{"events"}
			_, err := Run(context.Background(), cfg, io.Discard, quiet)
			var re *export.ReplayRangeError
			if !errors.As(err, &re) || ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v (exit %d), want a replay range error saying %q, exit 2", err, ExitCode(err), c.want)
			}
		})
	}
	if n := queryInt(t, dsn, `SELECT count(*) FROM cometbft.blockhaul_replays`); n != 0 {
		t.Errorf("%d replay rows after the refusals", n)
	}
}

// tableDigest is checksum's digest of one table.
func tableDigest(t *testing.T, dsn string, tb chain.Table) string {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	d, err := archive.Checksum(ctx, conn, archive.ChecksumConfig{Schema: "cometbft", Tables: []chain.Table{tb}})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d rows %s", d.Tables[0].Rows, d.Tables[0].Sum)
}
