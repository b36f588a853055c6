package export

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// keysOf lists the primary keys of "chain x"'s tables, and the keys
// recorded as deferred.
func (e *env) keysOf() (built, deferred string) {
	e.t.Helper()
	if err := e.conn.QueryRow(e.ctx, `SELECT coalesce(string_agg(conname, ',' ORDER BY conname), '') FROM pg_constraint c
	JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'chain x' AND contype = 'p' AND conname NOT LIKE 'blockhaul%'`).Scan(&built); err != nil {
		e.t.Fatal(err)
	}
	if err := e.conn.QueryRow(e.ctx, `SELECT coalesce(string_agg(index_name, ',' ORDER BY index_name), '') FROM "chain x".blockhaul_deferred_indexes WHERE primary_key`).Scan(&deferred); err != nil {
		e.t.Fatal(err)
	}
	return built, deferred
}

// The keys are dropped over empty tables only, for one fill; a table
// without its deferred key passes the shape check; another alias finding
// rows does not take them over, the same alias does (a resume), and
// BuildKeys puts them back as they were.
func TestDeferKeysOverEmptyTablesOnly(t *testing.T) {
	e := newEnv(t)
	tables := testDecoder{}.Tables()
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, true, nil); err != nil {
		t.Fatal(err)
	}
	token, err := DeferKeys(e.ctx, e.conn, "chain x", tables, "a", quietLog)
	if err != nil || token == "" {
		t.Fatalf("empty tables: token %q, %v", token, err)
	}
	if built, deferred := e.keysOf(); built != "" || deferred != "blocks_pkey,items_pkey" {
		t.Fatalf("keys built %q, deferred %q", built, deferred)
	}
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, true, nil); err != nil {
		t.Fatalf("a table whose key is deferred fails the shape check: %v", err)
	}
	if _, err := e.conn.Exec(e.ctx, `INSERT INTO "chain x".blocks VALUES (1, '\x01')`); err != nil {
		t.Fatal(err)
	}
	if other, err := DeferKeys(e.ctx, e.conn, "chain x", tables, "b", quietLog); err != nil || other != "" {
		t.Fatalf("another alias over rows: token %q, %v; want none", other, err)
	}
	if deferred, err := KeysDeferred(e.ctx, e.conn, "chain x", ""); err != nil || !deferred {
		t.Fatalf("a writer without the token sees keys deferred %v (%v), want true", deferred, err)
	}
	again, err := DeferKeys(e.ctx, e.conn, "chain x", tables, "a", quietLog)
	if err != nil || again == "" || again == token {
		t.Fatalf("the same alias resuming: token %q (first %q), %v; want a new one", again, token, err)
	}
	if deferred, err := KeysDeferred(e.ctx, e.conn, "chain x", token); err != nil || !deferred {
		t.Fatalf("the first fill's token after the resume took the keys: deferred %v (%v), want true", deferred, err)
	}
	n, err := BuildKeys(e.ctx, e.conn, "chain x", BuildOptions{Logger: quietLog})
	if err != nil || n != 2 {
		t.Fatalf("built %d keys, %v; want 2", n, err)
	}
	if built, deferred := e.keysOf(); built != "blocks_pkey,items_pkey" || deferred != "" {
		t.Fatalf("keys built %q, deferred %q", built, deferred)
	}
	if pending, err := PendingIndexes(e.ctx, e.conn, "chain x"); err != nil || len(pending) != 0 {
		t.Fatalf("pending %v, %v", pending, err)
	}
	// BuildKeys leaves the secondary indexes deferred.
	if err := DeferIndexes(e.ctx, e.conn, "chain x", tables, quietLog); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildKeys(e.ctx, e.conn, "chain x", BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if pending, err := PendingIndexes(e.ctx, e.conn, "chain x"); err != nil || strings.Join(pending, ",") != "items_note" {
		t.Fatalf("pending %v, %v; want items_note", pending, err)
	}
}

// A key build that meets two rows with one key fails naming the key and
// its table, keeps every row, and leaves the key recorded as deferred.
func TestKeyBuildOverDuplicatesFailsByName(t *testing.T) {
	e := newEnv(t)
	keylessItems(t, e, `(7, 0, 'x'), (7, 0, 'y'), (8, 0, 'z')`)
	_, err := RestoreIndexes(e.ctx, e.conn, "chain x", quietLog)
	var dup *DuplicateKeyError
	if !errors.As(err, &dup) || dup.Key != "items_pkey" || dup.Table != "items" || !strings.Contains(err.Error(), "(7, 0)") {
		t.Fatalf("got %v, want a DuplicateKeyError naming items_pkey of items and the key (7, 0)", err)
	}
	var pe *IndexesPendingError
	if !errors.As(err, &pe) || !strings.Contains(strings.Join(pe.Pending, ","), "items_pkey") {
		t.Fatalf("pending %v: want items_pkey among them", err)
	}
	if n := e.count(`SELECT count(*) FROM "chain x".items`); n != 3 {
		t.Fatalf("%d rows left, want the 3 written", n)
	}
	if _, deferred := e.keysOf(); !strings.Contains(deferred, "items_pkey") {
		t.Fatalf("deferred keys %q: items_pkey's record is lost", deferred)
	}
}

// A writer that started before a fill dropped the keys (it found them in
// place) meets them deferred at its first batch: it builds them and
// commits its batch with them in place, and the fill's own batches then
// merge with its rows. No height twice.
//
// It builds them with its IndexMemory, as the deferred builds after a fill:
// an event trigger records the maintenance_work_mem each DDL command of the
// builds ran with.
func TestWriterBesideKeylessFillBuildsKeys(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 40, func(uint64) string { return "n=2" })
	if _, err := e.conn.Exec(e.ctx, `CREATE TABLE public.ddl_mem (mem text, query text);
CREATE FUNCTION public.note_ddl_mem() RETURNS event_trigger LANGUAGE plpgsql AS
$$ BEGIN INSERT INTO public.ddl_mem VALUES (current_setting('maintenance_work_mem'), current_query()); END $$;
CREATE EVENT TRIGGER note_ddl_mem ON ddl_command_end EXECUTE FUNCTION public.note_ddl_mem()`); err != nil {
		t.Fatal(err)
	}
	other := e.secondConn()
	var token string
	cfg := Config{Schema: "chain x", BatchBlocks: 10, IndexMemory: 48 << 20, Stream: Stream{Alias: "b", From: 1, To: 40},
		OnStart: func(Stream, uint64) {
			if token != "" {
				return
			}
			// The fill drops the keys once this writer has looked.
			var err error
			if token, err = DeferKeys(e.ctx, other, "chain x", testDecoder{}.Tables(), "a", quietLog); err != nil || token == "" {
				t.Errorf("DeferKeys: token %q, %v", token, err)
			}
		}}
	if _, err := Run(e.ctx, Fixed(e.conn), e.store, testDecoder{}, cfg); err != nil {
		t.Fatal(err)
	}
	if built, deferred := e.keysOf(); built != "blocks_pkey,items_pkey" || deferred != "" {
		t.Fatalf("keys built %q, deferred %q; want both built", built, deferred)
	}
	var builds, at48 int
	if err := e.conn.QueryRow(e.ctx, `SELECT count(*), count(*) FILTER (WHERE mem = '48MB') FROM public.ddl_mem WHERE query LIKE '%UNIQUE INDEX%pkey%' OR query LIKE '%PRIMARY KEY USING INDEX%'`).Scan(&builds, &at48); err != nil {
		t.Fatal(err)
	}
	if builds < 4 || at48 != builds {
		t.Fatalf("%d statements of the key builds, %d of them with maintenance_work_mem 48MB; want both keys, all at the writer's IndexMemory", builds, at48)
	}
	if _, err := e.conn.Exec(e.ctx, `DROP EVENT TRIGGER note_ddl_mem`); err != nil {
		t.Fatal(err)
	}
	// The fill, with its token, over the same heights: its batches merge.
	res, err := Run(e.ctx, Fixed(other), e.store, testDecoder{}, Config{Schema: "chain x", BatchBlocks: 10, KeylessFill: token,
		Stream: Stream{Alias: "a", From: 1, To: 40}})
	if err != nil || res.Conflicts == 0 {
		t.Fatalf("the fill after the keys were built: %d batches merged, %v; want merges", res.Conflicts, err)
	}
	if n := e.count(`SELECT count(*) FROM "chain x".items`); n != 80 {
		t.Fatalf("%d item rows, want 80", n)
	}
	if n := e.count(`SELECT count(*) FROM "chain x".blocks`); n != 40 {
		t.Fatalf("%d block rows, want 40", n)
	}
}

// A batch in flight holds the fill off: DeferKeys waits for it, sees its
// rows, and leaves the keys in place.
func TestDeferKeysWaitsForABatchInFlight(t *testing.T) {
	e := newEnv(t)
	tables := testDecoder{}.Tables()
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, false, nil); err != nil {
		t.Fatal(err)
	}
	tx, err := e.conn.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(e.ctx, `INSERT INTO "chain x".blocks VALUES (1, '\x01')`); err != nil {
		t.Fatal(err)
	}
	other := e.secondConn()
	done := make(chan string, 1)
	go func() {
		token, err := DeferKeys(e.ctx, other, "chain x", tables, "a", quietLog)
		if err != nil {
			t.Error(err)
		}
		done <- token
	}()
	// The fill waits on the batch's table lock, as pg_locks shows.
	waitFor(t, e, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND mode = 'AccessExclusiveLock' AND relation = '"chain x".blocks'::regclass)`)
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if token := <-done; token != "" {
		t.Fatalf("keys deferred over a committed row (token %q)", token)
	}
	if built, deferred := e.keysOf(); built != "blocks_pkey,items_pkey" || deferred != "" {
		t.Fatalf("keys built %q, deferred %q; want both in place", built, deferred)
	}
}

// waitFor polls the server until query (one boolean) is true: what it
// waits on is the server's state, which nothing announces.
func waitFor(t *testing.T, e *env, query string) {
	t.Helper()
	for {
		var ok bool
		if err := e.conn.QueryRow(e.ctx, query).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling the server's lock table
	}
}

// A deferred key is built as its unique index (beside the table's other
// builds) then attached; a definition of another shape runs as it is.
func TestKeyStatements(t *testing.T) {
	got := keyStatements(`ALTER TABLE "s"."events" ADD CONSTRAINT "events_pkey" PRIMARY KEY (height, event_index)`, `"s"`, "events", "events_pkey")
	want := []string{
		`CREATE UNIQUE INDEX IF NOT EXISTS "events_pkey" ON "s"."events" (height, event_index)`,
		`ALTER TABLE "s"."events" ADD CONSTRAINT "events_pkey" PRIMARY KEY USING INDEX "events_pkey"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := keyStatements("ALTER TABLE x ADD UNIQUE (a)", `"s"`, "x", "k"); len(got) != 1 || got[0] != "ALTER TABLE x ADD UNIQUE (a)" {
		t.Fatalf("another shape: %q", got)
	}
}

// keylessItems creates testDecoder's tables with their keys deferred (by
// the fill of alias "a") and writes rows (VALUES of items) into them.
func keylessItems(t *testing.T, e *env, rows string) {
	t.Helper()
	tables := testDecoder{}.Tables()
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := DeferKeys(e.ctx, e.conn, "chain x", tables, "a", quietLog); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.Exec(e.ctx, `INSERT INTO "chain x".items VALUES `+rows); err != nil {
		t.Fatal(err)
	}
}

// A batch in flight reads the deferred keys after its COPY (as every batch
// does before it commits) while a fill waits for its tables: the two wait
// in one order and neither deadlocks. The fill once took the bookkeeping
// table exclusively (ALTER TABLE … ADD COLUMN IF NOT EXISTS) before the
// chain's tables, so the batch's read waited on the fill that waited on
// the batch: PostgreSQL aborted one (40P01, `defer keys: lock tables`).
func TestDeferKeysBesideABatchReadingDeferredKeys(t *testing.T) {
	e := newEnv(t)
	tables := testDecoder{}.Tables()
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.Exec(e.ctx, "SET deadlock_timeout = '100ms'"); err != nil {
		t.Fatal(err)
	}
	tx, err := e.conn.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(e.ctx)
	if _, err := tx.Exec(e.ctx, `INSERT INTO "chain x".blocks VALUES (1, '\x01')`); err != nil {
		t.Fatal(err)
	}
	other := e.secondConn()
	done := make(chan error, 1)
	go func() {
		token, err := DeferKeys(e.ctx, other, "chain x", tables, "a", quietLog)
		if err == nil && token != "" {
			err = errors.New("keys deferred over a committed row")
		}
		done <- err
	}()
	waitFor(t, e, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND mode = 'AccessExclusiveLock' AND relation = '"chain x".blocks'::regclass)`)
	if _, err := keysDeferredByOther(e.ctx, tx, "chain x", ""); err != nil {
		t.Fatalf("the batch reading the deferred keys beside a waiting fill: %v", err)
	}
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the fill: %v", err)
	}
}
