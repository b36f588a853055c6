package export

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// gatedIndexTables are two tables with three deferred indexes whose builds
// each stop at an advisory lock (key 4242) until the test releases it, so
// that a test can see how many builds run at once.
func gatedIndexTables(t *testing.T, e *env) {
	t.Helper()
	if _, err := e.conn.Exec(e.ctx, `CREATE FUNCTION public.gated(text) RETURNS text IMMUTABLE LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_advisory_lock_shared(4242); PERFORM pg_advisory_unlock_shared(4242); RETURN $1; END $$`); err != nil {
		t.Fatal(err)
	}
	cols := []chain.Column{{Name: "height", Type: "bigint"}, {Name: "note", Type: "text"}}
	tables := []chain.Table{
		{Name: "notes", HeightColumn: "height", PrimaryKey: []string{"height"}, Columns: cols,
			Indexes: []chain.Index{{Name: "notes_a_idx", Columns: "((public.gated(note)))"}, {Name: "notes_b_idx", Columns: "((public.gated(note || 'b')))"}}},
		{Name: "memos", HeightColumn: "height", PrimaryKey: []string{"height"}, Columns: cols,
			Indexes: []chain.Index{{Name: "memos_a_idx", Columns: "((public.gated(note)))"}}},
	}
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, true, nil); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []string{"notes", "memos"} {
		if _, err := e.conn.Exec(e.ctx, `INSERT INTO "chain x".`+tb+` SELECT h, 'n' || h FROM generate_series(1, 20) h`); err != nil {
			t.Fatal(err)
		}
	}
	if err := DeferIndexes(e.ctx, e.conn, "chain x", tables, quietLog); err != nil {
		t.Fatal(err)
	}
}

// startBuild runs BuildIndexes with builder and opts in the background;
// built waits for it to return and returns what it returned.
func startBuild(e *env, builder *pgx.Conn, opts BuildOptions) (built func() (int, error)) {
	var n int
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, err = BuildIndexes(e.ctx, builder, "chain x", opts)
	}()
	return func() (int, error) {
		<-done
		return n, err
	}
}

// gatedEnv is a new environment whose tables build their indexes through
// the gate (gatedIndexTables), held closed (holdGate).
func gatedEnv(t *testing.T) (e *env, waitFor func(n int) int, release func()) {
	t.Helper()
	e = newEnv(t)
	gatedIndexTables(t, e)
	waitFor, release = holdGate(t, e)
	return e, waitFor, release
}

// holdGate takes the gate's lock on a connection of its own and returns a
// function that waits until n index builds are blocked at it (or fails the
// test after a bound), and one that releases it.
func holdGate(t *testing.T, e *env) (waitFor func(n int) int, release func()) {
	t.Helper()
	gate, err := pgx.Connect(e.ctx, e.conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Close(context.Background()) })
	if _, err := gate.Exec(e.ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
		t.Fatal(err)
	}
	waitFor = func(n int) int {
		deadline := time.Now().Add(30 * time.Second)
		var blocked int
		for time.Now().Before(deadline) {
			if err := gate.QueryRow(e.ctx, `SELECT count(*) FROM pg_stat_activity
	WHERE datname = current_database() AND query LIKE 'CREATE INDEX%' AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&blocked); err != nil {
				t.Error(err)
				return blocked
			}
			if blocked >= n {
				return blocked
			}
			time.Sleep(10 * time.Millisecond) // polling the server's activity view; nothing to wait on
		}
		return blocked
	}
	release = func() {
		if _, err := gate.Exec(e.ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
			t.Error(err)
		}
	}
	return waitFor, release
}

func checkBuilt(t *testing.T, e *env, want int) {
	t.Helper()
	var valid, pending int
	if err := e.conn.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
	JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'chain x' AND c.relname LIKE '%_idx' AND i.indisvalid),
	(SELECT count(*) FROM "chain x".blockhaul_deferred_indexes)`).Scan(&valid, &pending); err != nil {
		t.Fatal(err)
	}
	if valid != want || pending != 0 {
		t.Fatalf("%d valid indexes (want %d), %d pending (want 0)", valid, want, pending)
	}
}

// With Workers 3, the three deferred indexes build at once; with 1, one
// at a time.
func TestIndexBuildsRunInParallel(t *testing.T) {
	for _, workers := range []int{1, 3} {
		e, waitFor, release := gatedEnv(t)
		builder, err := pgx.Connect(e.ctx, e.conn.Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		defer builder.Close(context.Background())
		built := startBuild(e, builder, BuildOptions{Workers: workers, Dial: dialer(e.conn.Config().ConnString()), Logger: quietLog})
		blocked := waitFor(workers)
		if workers == 1 {
			// Nothing else could start: check that nothing did.
			var building int
			if err := e.conn.QueryRow(e.ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'CREATE INDEX%'`).Scan(&building); err != nil {
				t.Fatal(err)
			}
			if building != 1 {
				t.Errorf("workers 1: %d builds at once", building)
			}
		}
		release()
		if n, err := built(); err != nil || n != 3 {
			t.Fatalf("workers %d: built %d, %v; want 3", workers, n, err)
		}
		if blocked != workers {
			t.Fatalf("workers %d: %d builds ran at once", workers, blocked)
		}
		checkBuilt(t, e, 3)
	}
}

// Two processes finishing at once (each building in parallel) build each
// index once between them, and neither fails.
func TestConcurrentParallelBuildsBuildEachIndexOnce(t *testing.T) {
	e, waitFor, release := gatedEnv(t)
	var wg sync.WaitGroup
	built := make([]int, 2)
	errs := make([]error, 2)
	for i := range 2 {
		conn, err := pgx.Connect(e.ctx, e.conn.Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		wg.Add(1)
		go func() {
			defer wg.Done()
			built[i], errs[i] = BuildIndexes(e.ctx, conn, "chain x", BuildOptions{Workers: 2, Dial: dialer(e.conn.Config().ConnString()), Logger: quietLog})
		}()
	}
	// Both start with the same two indexes (largest table first): two
	// builds block at the gate, the other two workers wait for the index
	// locks those hold.
	if got := waitFor(2); got != 2 {
		t.Fatalf("%d builds at the gate, want 2", got)
	}
	release()
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("concurrent builds failed: %v, %v", errs[0], errs[1])
	}
	if built[0]+built[1] != 3 {
		t.Fatalf("built %d + %d indexes, want 3 in all", built[0], built[1])
	}
	checkBuilt(t, e, 3)
}

// A build under way holds the schema's DDL lock shared: a process that
// creates the schema or drops its indexes waits for it.
func TestIndexBuildHoldsOffSchemaDDL(t *testing.T) {
	e, waitFor, release := gatedEnv(t)
	done := make(chan error, 1)
	go func() {
		_, err := BuildIndexes(e.ctx, e.conn, "chain x", BuildOptions{Workers: 1, Logger: quietLog})
		done <- err
	}()
	if waitFor(1) != 1 {
		t.Fatal("the build did not reach the gate")
	}
	other, err := pgx.Connect(e.ctx, e.conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	var got bool
	err = pgx.BeginFunc(e.ctx, other, func(tx pgx.Tx) error {
		return tx.QueryRow(e.ctx, "SELECT pg_try_advisory_xact_lock(hashtext('blockhaul:' || $1))", "chain x").Scan(&got)
	})
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil || got {
		t.Fatalf("the schema's DDL lock was free during a build (%v, %v)", got, err)
	}
	checkBuilt(t, e, 3)
}

// A deferred index build outlasting the session's statement_timeout is not
// cancelled by it: the build waits at the gate until it has run well past
// the timeout, then completes.
func TestIndexBuildOutlastsTheStatementTimeout(t *testing.T) {
	e, waitFor, release := gatedEnv(t)
	cfg, err := pgx.ParseConfig(e.conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["statement_timeout"] = "200ms"
	builder, err := pgx.ConnectConfig(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close(context.Background())
	built := startBuild(e, builder, BuildOptions{Workers: 1, Logger: quietLog})
	if blocked := waitFor(1); blocked != 1 {
		release()
		_, err := built()
		t.Fatalf("%d builds reached the gate, want 1 (err %v)", blocked, err)
	}
	// Wait, on the server's clock, until the blocked build has run for
	// twice the timeout (or has been cancelled, which the build's error
	// then shows).
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var past bool
		if err := e.conn.QueryRow(e.ctx, `SELECT COALESCE(bool_or(now() - query_start > interval '400ms'), true) FROM pg_stat_activity
	WHERE datname = current_database() AND query LIKE 'CREATE INDEX%'`).Scan(&past); err != nil {
			t.Fatal(err)
		}
		if past {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the server's activity view; nothing to wait on
	}
	release()
	if n, err := built(); err != nil || n != 3 {
		t.Fatalf("built %d, %v; want 3 built despite statement_timeout 200ms", n, err)
	}
	checkBuilt(t, e, 3)
}

// With Analyze, each table is analyzed by the build workers once its own
// deferred indexes are built, not before (nothing analyzes while every
// build waits at the gate), and every table listed is analyzed once.
func TestBuildsAnalyzeEachTableAfterItsIndexes(t *testing.T) {
	e := newEnv(t)
	gatedIndexTables(t, e)
	waitFor, release := holdGate(t, e)
	var mu sync.Mutex
	analyzed := map[string]int{}
	builder, err := pgx.Connect(e.ctx, e.conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close(context.Background())
	var n int
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, err = BuildIndexes(e.ctx, builder, "chain x", BuildOptions{Workers: 3, Dial: dialer(e.conn.Config().ConnString()), Logger: quietLog,
			Analyze: []string{"notes", "memos"},
			OnAnalyze: func(table string, _ time.Duration, err error) {
				if err != nil {
					t.Errorf("analyze %s: %v", table, err)
				}
				mu.Lock()
				analyzed[table]++
				mu.Unlock()
			}})
	}()
	blocked := waitFor(3)
	var running, stats int
	if err := e.conn.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'ANALYZE%'),
	(SELECT count(*) FROM pg_stats WHERE schemaname = 'chain x')`).Scan(&running, &stats); err != nil {
		t.Fatal(err)
	}
	release()
	<-done
	if blocked != 3 || running != 0 || stats != 0 {
		t.Fatalf("while the 3 builds waited (%d at the gate): %d ANALYZE running, %d column statistics; want none", blocked, running, stats)
	}
	if err != nil || n != 3 {
		t.Fatalf("built %d, %v; want 3", n, err)
	}
	checkBuilt(t, e, 3)
	if analyzed["notes"] != 1 || analyzed["memos"] != 1 || len(analyzed) != 2 {
		t.Fatalf("analyzed %v, want notes and memos once each", analyzed)
	}
	var tables []string
	rows, err := e.conn.Query(e.ctx, `SELECT DISTINCT tablename::text FROM pg_stats WHERE schemaname = 'chain x' AND tablename NOT LIKE '%_idx' ORDER BY 1`)
	if err == nil {
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(tables) != 2 || tables[0] != "memos" || tables[1] != "notes" {
		t.Fatalf("tables with statistics: %v, %v; want memos and notes", tables, err)
	}
}

// MaintenanceWorkMem is each build's maintenance_work_mem, for that build
// only: the index's function sees it, and the session keeps its own.
func TestIndexBuildSetsMaintenanceWorkMem(t *testing.T) {
	e := newEnv(t)
	if _, err := e.conn.Exec(e.ctx, `CREATE FUNCTION public.noisy(text) RETURNS text IMMUTABLE LANGUAGE plpgsql AS
$$ BEGIN RAISE NOTICE 'mwm %', current_setting('maintenance_work_mem'); RETURN $1; END $$`); err != nil {
		t.Fatal(err)
	}
	tables := []chain.Table{{Name: "notes", HeightColumn: "height", PrimaryKey: []string{"height"},
		Columns: []chain.Column{{Name: "height", Type: "bigint"}, {Name: "note", Type: "text"}},
		Indexes: []chain.Index{{Name: "notes_a_idx", Columns: "((public.noisy(note)))"}}}}
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.Exec(e.ctx, `INSERT INTO "chain x".notes VALUES (1, 'n')`); err != nil {
		t.Fatal(err)
	}
	if err := DeferIndexes(e.ctx, e.conn, "chain x", tables, quietLog); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(e.conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	builder, err := pgx.ConnectConfig(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close(context.Background())
	var before, after string
	if err := builder.QueryRow(e.ctx, "SHOW maintenance_work_mem").Scan(&before); err != nil {
		t.Fatal(err)
	}
	if n, err := BuildIndexes(e.ctx, builder, "chain x", BuildOptions{Workers: 1, MaintenanceWorkMem: 200 << 20, Logger: quietLog}); err != nil || n != 1 {
		t.Fatalf("built %d, %v; want 1", n, err)
	}
	if err := builder.QueryRow(e.ctx, "SHOW maintenance_work_mem").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if len(notices) == 0 || !slices.Contains(notices, "mwm 200MB") || after != before {
		t.Fatalf("the build saw %q (want mwm 200MB); the session's setting %s before, %s after", notices, before, after)
	}
	checkBuilt(t, e, 1)
}

// The GIN index starts first, then the key; the key's constraint is
// attached only once the table's other builds have ended: while the GIN
// build runs, the key's worker builds the next index instead of waiting
// for the table's lock (and queueing that build behind it).
func TestKeyAttachWaitsForNoBuild(t *testing.T) {
	e := newEnv(t)
	if _, err := e.conn.Exec(e.ctx, `CREATE FUNCTION public.gated(text) RETURNS text IMMUTABLE LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_advisory_lock_shared(4242); PERFORM pg_advisory_unlock_shared(4242); RETURN $1; END $$`); err != nil {
		t.Fatal(err)
	}
	tables := []chain.Table{{Name: "notes", HeightColumn: "height", PrimaryKey: []string{"height"},
		Columns: []chain.Column{{Name: "height", Type: "bigint"}, {Name: "note", Type: "text"}},
		Indexes: []chain.Index{{Name: "notes_a_idx", Columns: "((public.gated(note)))"}, {Name: "notes_gin_idx", Columns: "USING gin ((ARRAY[public.gated(note)]))"}}}}
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, true, nil); err != nil {
		t.Fatal(err)
	}
	if err := DeferIndexes(e.ctx, e.conn, "chain x", tables, quietLog); err != nil {
		t.Fatal(err)
	}
	if token, err := DeferKeys(e.ctx, e.conn, "chain x", tables, "a", quietLog); err != nil || token == "" {
		t.Fatalf("keys not deferred: %q, %v", token, err)
	}
	if _, err := e.conn.Exec(e.ctx, `INSERT INTO "chain x".notes SELECT h, 'n' || h FROM generate_series(1, 20) h`); err != nil {
		t.Fatal(err)
	}
	if order, err := PendingIndexes(e.ctx, e.conn, "chain x"); err != nil || strings.Join(order, ",") != "notes_gin_idx,notes_pkey,notes_a_idx" {
		t.Fatalf("build order %v, %v; want the GIN index, the key, the other index", order, err)
	}
	waitFor, release := holdGate(t, e)
	builder, err := pgx.Connect(e.ctx, e.conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close(context.Background())
	built := startBuild(e, builder, BuildOptions{Workers: 2, Dial: dialer(e.conn.Config().ConnString()), Logger: quietLog})
	blocked := waitFor(2)
	var attaching int64
	if err := e.conn.QueryRow(e.ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'ALTER TABLE%'`).Scan(&attaching); err != nil {
		t.Fatal(err)
	}
	keys, _ := e.keysOf()
	release()
	if n, err := built(); err != nil || n != 3 {
		t.Fatalf("built %d, %v; want 3", n, err)
	}
	if blocked != 2 || attaching != 0 || keys != "" {
		t.Fatalf("while the GIN build ran: %d builds at the gate (want 2: the GIN and the other index), %d attaches (want 0), keys attached %q (want none)", blocked, attaching, keys)
	}
	if keys, deferred := e.keysOf(); keys != "notes_pkey" || deferred != "" {
		t.Fatalf("after the builds: keys %q, deferred %q; want notes_pkey attached", keys, deferred)
	}
	checkBuilt(t, e, 2)
}

// A run stopped between a key's two steps leaves it pending with its
// index built; the next attaches that index.
func TestKeyIndexBuiltThenAttachedByTheNextRun(t *testing.T) {
	e := newEnv(t)
	keylessItems(t, e, `(7, 0, 'x'), (8, 0, 'z')`)
	if _, built, attach, err := buildDeferred(e.ctx, e.conn, "chain x", "items_pkey", buildKeyIndex, 0, 0); err != nil || built || !attach {
		t.Fatalf("the key's index step: built %v, attach %v, %v; want its attach to come", built, attach, err)
	}
	if keys, deferred := e.keysOf(); keys != "" || deferred != "blocks_pkey,items_pkey" {
		t.Fatalf("between the steps: keys %q, deferred %q; want both still deferred", keys, deferred)
	}
	if n := e.count(`SELECT count(*) FROM pg_indexes WHERE schemaname = 'chain x' AND indexname = 'items_pkey'`); n != 1 {
		t.Fatalf("items_pkey's index: %d, want 1 built", n)
	}
	if n, err := BuildKeys(e.ctx, e.conn, "chain x", BuildOptions{Logger: quietLog}); err != nil || n != 2 {
		t.Fatalf("built %d keys, %v; want 2", n, err)
	}
	if keys, deferred := e.keysOf(); keys != "blocks_pkey,items_pkey" || deferred != "" {
		t.Fatalf("after the next run: keys %q, deferred %q", keys, deferred)
	}
}
