package export

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/jackc/pgx/v5"
)

var quietLog = slog.New(slog.DiscardHandler)

// slowIndexTables is one table whose secondary index takes about a second
// to build: its expression sleeps for each row.
func slowIndexTables(t *testing.T, e *env) []chain.Table {
	t.Helper()
	if _, err := e.conn.Exec(e.ctx, `CREATE FUNCTION public.slow_note(text) RETURNS text IMMUTABLE LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_sleep(0.02); RETURN $1; END $$`); err != nil {
		t.Fatal(err)
	}
	tables := []chain.Table{{Name: "notes", HeightColumn: "height", PrimaryKey: []string{"height"},
		Columns: []chain.Column{{Name: "height", Type: "bigint"}, {Name: "note", Type: "text"}},
		Indexes: []chain.Index{{Name: "notes_slow_idx", Columns: "((public.slow_note(note)))"}}}}
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.Exec(e.ctx, `INSERT INTO "chain x".notes SELECT h, 'n' || h FROM generate_series(1, 50) h`); err != nil {
		t.Fatal(err)
	}
	if err := DeferIndexes(e.ctx, e.conn, "chain x", tables, quietLog); err != nil {
		t.Fatal(err)
	}
	return tables
}

// connectKillable connects so that dropping the connection's socket acts
// like a SIGKILL of its process: pgx, when its socket fails, sends the server
// a cancel request on a new connection, which a killed process would not;
// here every dial after the first fails.
func connectKillable(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dial := cfg.DialFunc
	var dialed atomic.Bool
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dialed.Swap(true) {
			return nil, errors.New("this process is dead")
		}
		return dial(ctx, network, addr)
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// A process killed while PostgreSQL builds a deferred index leaves the
// server building it. The next run must succeed at its first attempt, with
// the index present and valid and nothing left pending (issue 9 item 7: it
// failed once with a duplicate key in pg_class_relname_nsp_index).
func TestIndexBuildResumesAfterKillMidBuild(t *testing.T) {
	e := newEnv(t)
	slowIndexTables(t, e)
	victim := connectKillable(t, e.conn.Config().ConnString())
	pid := victim.PgConn().PID()

	// At the crash point, wait until the server is building the index for
	// the victim's backend, then drop the victim's socket as a SIGKILL
	// would: the backend is not told and keeps building.
	var killed atomic.Bool
	restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
		if p != crashpoint.MidIndexBuild || killed.Load() {
			return nil
		}
		go func() {
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				var building bool
				if err := e.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_progress_create_index WHERE pid = $1 AND phase LIKE 'building index%')`, pid).Scan(&building); err != nil {
					t.Error(err)
					break
				}
				if building {
					break
				}
				time.Sleep(5 * time.Millisecond) // polling the server's progress view; nothing to wait on
			}
			killed.Store(true)
			victim.PgConn().Conn().Close()
		}()
		return nil
	})
	defer restore()
	if _, err := RestoreIndexes(e.ctx, victim, "chain x", quietLog); err == nil || !killed.Load() {
		t.Fatalf("the killed build returned %v (killed %v), want an error", err, killed.Load())
	}
	restore()
	var orphan bool
	if err := e.conn.QueryRow(e.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active')`, pid).Scan(&orphan); err != nil {
		t.Fatal(err)
	}
	if !orphan {
		t.Fatal("the killed client's backend is no longer building: the test does not reproduce the crash")
	}

	resume, err := pgx.Connect(e.ctx, e.conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer resume.Close(context.Background())
	n, err := RestoreIndexes(e.ctx, resume, "chain x", quietLog)
	if err != nil {
		t.Fatalf("first resume after a kill mid index build: %v", err)
	}
	var valid, pending int64
	if err := e.conn.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'notes_slow_idx' AND i.indisvalid),
	(SELECT count(*) FROM "chain x".blockhaul_deferred_indexes)`).Scan(&valid, &pending); err != nil {
		t.Fatal(err)
	}
	if valid != 1 || pending != 0 {
		t.Fatalf("after the resume: %d valid notes_slow_idx (want 1), %d pending (want 0), %d built", valid, pending, n)
	}
}

// An index left INVALID (an interrupted CREATE INDEX CONCURRENTLY) is
// dropped and built again rather than kept by IF NOT EXISTS.
func TestIndexBuildReplacesInvalidLeftover(t *testing.T) {
	e := newEnv(t)
	tables := []chain.Table{{Name: "notes", HeightColumn: "height", PrimaryKey: []string{"height"},
		Columns: []chain.Column{{Name: "height", Type: "bigint"}, {Name: "note", Type: "text"}},
		Indexes: []chain.Index{{Name: "notes_note_idx", Columns: "(note)", Unique: true}}}}
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, true, nil); err != nil {
		t.Fatal(err)
	}
	if err := DeferIndexes(e.ctx, e.conn, "chain x", tables, quietLog); err != nil {
		t.Fatal(err)
	}
	// A unique index built concurrently over duplicate notes fails and
	// stays behind, INVALID.
	if _, err := e.conn.Exec(e.ctx, `INSERT INTO "chain x".notes VALUES (1, 'a'), (2, 'a')`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.Exec(e.ctx, `CREATE UNIQUE INDEX CONCURRENTLY notes_note_idx ON "chain x".notes (note)`); err == nil {
		t.Fatal("the concurrent build over duplicates succeeded")
	}
	if _, err := e.conn.Exec(e.ctx, `DELETE FROM "chain x".notes WHERE height = 2`); err != nil {
		t.Fatal(err)
	}
	if _, err := RestoreIndexes(e.ctx, e.conn, "chain x", quietLog); err != nil {
		t.Fatal(err)
	}
	var valid bool
	if err := e.conn.QueryRow(e.ctx, `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'notes_note_idx'`).Scan(&valid); err != nil {
		t.Fatal(err)
	}
	if !valid {
		t.Fatal("notes_note_idx is still INVALID after the build")
	}
}

// A build cut short names the indexes still pending.
func TestIndexBuildFailureNamesPending(t *testing.T) {
	e := newEnv(t)
	tables := testDecoder{}.Tables()
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, true, nil); err != nil {
		t.Fatal(err)
	}
	if err := DeferIndexes(e.ctx, e.conn, "chain x", tables, quietLog); err != nil {
		t.Fatal(err)
	}
	restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
		if p == crashpoint.MidIndexBuild {
			return context.Canceled
		}
		return nil
	})
	defer restore()
	_, err := RestoreIndexes(e.ctx, e.conn, "chain x", quietLog)
	var pe *IndexesPendingError
	if !errors.As(err, &pe) || len(pe.Pending) != 1 || pe.Pending[0] != "items_note" || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want an IndexesPendingError naming items_note", err)
	}
}

// PendingIndexes starts with the largest table, and a table partitioned by
// hand is as large as its partitions, not the 0 bytes of its parent.
func TestPendingIndexesLargestFirstCountingPartitions(t *testing.T) {
	e := newEnv(t)
	tables := []chain.Table{
		{Name: "big", HeightColumn: "height", PrimaryKey: []string{"height"},
			Columns: []chain.Column{{Name: "height", Type: "bigint"}, {Name: "note", Type: "text"}},
			Indexes: []chain.Index{{Name: "big_note_idx", Columns: "(note)"}}},
		{Name: "small", HeightColumn: "height", PrimaryKey: []string{"height"},
			Columns: []chain.Column{{Name: "height", Type: "bigint"}, {Name: "note", Type: "text"}},
			Indexes: []chain.Index{{Name: "small_note_idx", Columns: "(note)"}}},
	}
	for _, q := range []string{
		`CREATE SCHEMA p`,
		`CREATE TABLE p.big (height bigint NOT NULL, note text, PRIMARY KEY (height)) PARTITION BY RANGE (height)`,
		`CREATE TABLE p.big_0 PARTITION OF p.big FOR VALUES FROM (0) TO (100000)`,
		`CREATE TABLE p.big_1 PARTITION OF p.big FOR VALUES FROM (100000) TO (200000)`,
		`CREATE TABLE p.small (height bigint PRIMARY KEY, note text)`,
	} {
		if _, err := e.conn.Exec(e.ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := EnsureSchema(e.ctx, e.conn, "p", tables, true, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO p.big SELECT h, repeat('b', 50) FROM generate_series(1, 150000) h`,
		`INSERT INTO p.small SELECT h, 's' FROM generate_series(1, 1000) h`,
	} {
		if _, err := e.conn.Exec(e.ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := DeferIndexes(e.ctx, e.conn, "p", tables, quietLog); err != nil {
		t.Fatal(err)
	}
	names, err := PendingIndexes(e.ctx, e.conn, "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0] != "big_note_idx" || names[1] != "small_note_idx" {
		t.Fatalf("pending indexes in the order %v; want big_note_idx (the partitioned table of 150,000 rows) first", names)
	}
}
