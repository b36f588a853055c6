package export

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain/chaintest"
	"github.com/blockhaul/blockhaul/staging/stagingtest"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/cockroachdb/pebble/v2"
	"github.com/jackc/pgx/v5"
)

// testDecoder turns a raw record "n=K" into one block row and K item rows.
// A record "bad" fails to decode; "nul" yields text PostgreSQL rejects.
type testDecoder struct{}

func (testDecoder) Family() chain.Family { return chain.FamilyCometBFT }
func (testDecoder) Tables() []chain.Table {
	return []chain.Table{
		{Name: "blocks", HeightColumn: "height", PrimaryKey: []string{"height"},
			Columns: []chain.Column{{Name: "height", Type: "bigint"}, {Name: "hash", Type: "bytea"}}},
		{Name: "items", HeightColumn: "height", PrimaryKey: []string{"height", "idx"},
			Columns: []chain.Column{{Name: "height", Type: "bigint"}, {Name: "idx", Type: "int"}, {Name: "note", Type: "text"}},
			Indexes: []chain.Index{{Name: "items_note", Columns: "(note)"}}},
	}
}
func (testDecoder) Decode(h uint64, raw []byte, rows *chain.Rows) error {
	s := string(raw)
	if s == "bad" {
		return errors.New("unreadable record")
	}
	note := "ok"
	if s == "nul" {
		note = "a\x00b"
		s = "n=1"
	}
	var n int
	if _, err := fmt.Sscanf(s, "n=%d", &n); err != nil {
		return err
	}
	r := rows.Row(0)
	r[0], r[1] = int64(h), hashOf(h)
	for i := range n {
		r := rows.Row(1)
		r[0], r[1], r[2] = int64(h), int32(i), note
	}
	return nil
}

type env struct {
	t     *testing.T
	store *staging.Store
	conn  *pgx.Conn
	ctx   context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	store := stagingtest.Open(t, t.TempDir(), staging.Options{})
	t.Cleanup(func() { store.Close() })
	if err := store.Bind(chain.FamilyCometBFT, "test"); err != nil {
		t.Fatal(err)
	}
	conn := pgtest.Connect(t)
	return &env{t: t, store: store, conn: conn, ctx: ctx}
}

// stage writes heights [from, to] with raw(h) as record.
func (e *env) stage(from, to uint64, raw func(h uint64) string) {
	e.t.Helper()
	b := e.store.NewBatch()
	defer b.Close()
	for h := from; h <= to; h++ {
		if err := b.Put(chain.Block{Height: h, Hash: hashOf(h), ParentHash: hashOf(h - 1), Raw: []byte(raw(h))}); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		e.t.Fatal(err)
	}
}

func items(h uint64) string { return fmt.Sprintf("n=%d", h%4) }

func (e *env) run(alias string, from, to uint64, batch int) (Result, error) {
	return Run(e.ctx, Fixed(e.conn), e.store, testDecoder{}, Config{Schema: "chain x", BatchBlocks: batch,
		Stream: Stream{Alias: alias, From: from, To: to}})
}

func (e *env) count(sql string) int64 {
	e.t.Helper()
	var n int64
	if err := e.conn.QueryRow(e.ctx, sql).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (e *env) backfillHeight(alias string) (int64, string) {
	var h *int64
	var st string
	err := e.conn.QueryRow(e.ctx, `SELECT last_height, status FROM "chain x".blockhaul_backfills WHERE alias = $1`, alias).Scan(&h, &st)
	if err != nil {
		e.t.Fatal(err)
	}
	if h == nil {
		return -1, st
	}
	return *h, st
}

func TestExportRangeThenNoOp(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 1000, items)
	res, err := e.run("a", 1, 1000, 64)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for h := uint64(1); h <= 1000; h++ {
		want += int64(h % 4)
	}
	if !res.Complete || res.Blocks != 1000 || res.Rows["items"] != uint64(want) {
		t.Fatalf("result %+v, want complete 1000 blocks %d items", res, want)
	}
	if n := e.count(`SELECT count(*) FROM "chain x".blocks`); n != 1000 {
		t.Fatalf("blocks = %d", n)
	}
	if n := e.count(`SELECT count(*) FROM "chain x".items`); n != want {
		t.Fatalf("items = %d, want %d", n, want)
	}
	if h, st := e.backfillHeight("a"); h != 1000 || st != "complete" {
		t.Fatalf("backfill at %d %s", h, st)
	}
	// The head stream's checkpoint is untouched by a backfill.
	if n := e.count(`SELECT count(*) FROM "chain x".blockhaul_checkpoints`); n != 0 {
		t.Fatalf("backfill wrote %d head checkpoint rows", n)
	}
	again, err := e.run("a", 1, 1000, 64)
	if err != nil || !again.Complete || again.Blocks != 0 {
		t.Fatalf("rerun: %+v %v, want complete no-op", again, err)
	}
	if n := e.count(`SELECT count(*) FROM "chain x".blocks`); n != 1000 {
		t.Fatalf("rerun changed blocks to %d", n)
	}
	cp, ok, err := e.store.Mirror(mustTarget(t, e, "a", 1, 1000))
	if err != nil || !ok || cp.Height != 1000 {
		t.Fatalf("mirror %+v %v %v", cp, ok, err)
	}
}

func mustTarget(t *testing.T, e *env, alias string, from, to uint64) string {
	name, err := TargetName(e.ctx, e.conn, "chain x", Stream{Alias: alias, From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func TestExportResumesAfterLastCommitted(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 300, items)
	res, err := e.run("r", 1, 600, 50)
	var gap *GapError
	if !errors.As(err, &gap) || gap.Height != 301 {
		t.Fatalf("err = %v, want gap at 301", err)
	}
	if res.Last.Height != 300 || res.Complete {
		t.Fatalf("result %+v", res)
	}
	if h, st := e.backfillHeight("r"); h != 300 || st != "in_progress" {
		t.Fatalf("backfill at %d %s", h, st)
	}
	e.stage(301, 600, items)
	res, err = e.run("r", 1, 600, 50)
	if err != nil || !res.Complete || res.Start != 301 || res.Blocks != 300 {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if n := e.count(`SELECT count(DISTINCT height) FROM "chain x".blocks`); n != 600 {
		t.Fatalf("distinct heights %d", n)
	}
}

func TestExportRefusesContinuityBreak(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 100, items)
	// Block 73 from another fork: its parent is not block 72.
	b := e.store.NewBatch()
	defer b.Close()
	e.store.Delete(73, 73)
	if err := b.Put(chain.Block{Height: 73, Hash: hashOf(73), ParentHash: hashOf(9999), Raw: []byte("n=1")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	res, err := e.run("c", 1, 100, 10)
	var ce *ContinuityError
	if !errors.As(err, &ce) || ce.Height != 73 {
		t.Fatalf("err = %v, want continuity break at 73", err)
	}
	if res.Last.Height != 70 {
		t.Fatalf("last committed %d, want 70 (the batch holding 73 is not committed)", res.Last.Height)
	}
	if n := e.count(`SELECT max(height) FROM "chain x".blocks`); n != 70 {
		t.Fatalf("rows up to %d, want 70", n)
	}
}

func TestExportChecksContinuityAcrossRuns(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 50, items)
	if _, err := e.run("x", 1, 50, 20); err != nil {
		t.Fatal(err)
	}
	// Staging replaced by another fork from 41 on; PostgreSQL holds 1-50 of
	// the first. A second alias continuing at 51 must notice.
	e.store.Delete(41, 60)
	b := e.store.NewBatch()
	defer b.Close()
	for h := uint64(51); h <= 60; h++ {
		if err := b.Put(chain.Block{Height: h, Hash: hashOf(h + 1000), ParentHash: hashOf(h + 999), Raw: []byte("n=1")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	// Head has no checkpoint and staging lacks 50, but PostgreSQL holds
	// block 50 of the first fork: the head stream must continue it, and
	// refuses a block 51 that does not.
	_, err := Run(e.ctx, Fixed(e.conn), e.store, testDecoder{}, Config{Schema: "chain x", Stream: Stream{Head: true, From: 51, To: 60}, BatchBlocks: 5,
		Available: func(context.Context, uint64) (uint64, bool, error) { return 60, true, nil }})
	var ce *ContinuityError
	if !errors.As(err, &ce) || ce.Height != 51 || !bytes.Equal(ce.PrevHash, hashOf(50)) || !bytes.Equal(ce.ParentHash, hashOf(1050)) ||
		!strings.Contains(err.Error(), fmt.Sprintf("%X", hashOf(50))) || !strings.Contains(err.Error(), fmt.Sprintf("%X", hashOf(1050))) || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("head from 51 beside rows of another fork: %v, want a continuity break at 51 naming both hashes", err)
	}
	if n := e.count(`SELECT count(*) FROM "chain x".blocks WHERE height > 50`); n != 0 {
		t.Fatalf("%d rows above 50 were exported on the wrong fork", n)
	}
	// With block 50 gone from PostgreSQL too there is nothing to compare.
	if _, err := e.conn.Exec(e.ctx, `DELETE FROM "chain x".blocks WHERE height = 50`); err != nil {
		t.Fatal(err)
	}
	if _, err = Run(e.ctx, Fixed(e.conn), e.store, testDecoder{}, Config{Schema: "chain x", Stream: Stream{Head: true, From: 51, To: 60}, BatchBlocks: 5,
		Available: func(context.Context, uint64) (uint64, bool, error) { return 60, true, nil }}); err != nil {
		t.Fatalf("head from 51 with nothing below it: %v", err)
	}
	// Now give it a checkpoint at 50 with the first fork's hash.
	if _, err := e.conn.Exec(e.ctx, `UPDATE "chain x".blockhaul_checkpoints SET height = 50, hash = $1`, hashOf(50)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.Exec(e.ctx, `DELETE FROM "chain x".blocks WHERE height > 50`); err != nil {
		t.Fatal(err)
	}
	_, err = Run(e.ctx, Fixed(e.conn), e.store, testDecoder{}, Config{Schema: "chain x", Stream: Stream{Head: true, From: 51, To: 60}, BatchBlocks: 5,
		Available: func(context.Context, uint64) (uint64, bool, error) { return 60, true, nil }})
	if !errors.As(err, &ce) || ce.Height != 51 || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("err = %v, want continuity break at 51 against the checkpoint", err)
	}
}

func TestExportErrorMidCopyLeavesNoPartialBatch(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 40, func(h uint64) string {
		if h == 27 {
			return "nul" // text with a NUL byte: PostgreSQL rejects it mid-COPY
		}
		return items(h)
	})
	res, err := e.run("m", 1, 40, 10)
	if err == nil {
		t.Fatal("export of a batch PostgreSQL rejects succeeded")
	}
	if res.Last.Height != 20 {
		t.Fatalf("last committed %d, want 20", res.Last.Height)
	}
	if n := e.count(`SELECT coalesce(max(height), 0) FROM "chain x".items`); n > 20 {
		t.Fatalf("items of the failed batch were kept (max height %d)", n)
	}
	if n := e.count(`SELECT count(*) FROM "chain x".blocks WHERE height > 20`); n != 0 {
		t.Fatalf("%d blocks of the failed batch were kept", n)
	}
	if h, _ := e.backfillHeight("m"); h != 20 {
		t.Fatalf("checkpoint %d is ahead of its rows", h)
	}
}

func TestExportDecodeErrorNamesHeight(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 10, func(h uint64) string {
		if h == 6 {
			return "bad"
		}
		return items(h)
	})
	_, err := e.run("d", 1, 10, 3)
	var de *DecodeError
	if !errors.As(err, &de) || de.Height != 6 {
		t.Fatalf("err = %v, want decode error at 6", err)
	}
	if h, _ := e.backfillHeight("d"); h != 3 {
		t.Fatalf("checkpoint at %d, want 3", h)
	}
}

func TestOverlappingStreamsMergeWithoutDuplicates(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 200, items)
	if _, err := e.run("first", 1, 120, 25); err != nil {
		t.Fatal(err)
	}
	res, err := e.run("second", 80, 200, 25)
	if err != nil {
		t.Fatal(err)
	}
	if res.Conflicts == 0 {
		t.Fatal("overlapping export reported no conflict")
	}
	if n := e.count(`SELECT count(*) FROM "chain x".blocks`); n != 200 {
		t.Fatalf("blocks = %d, want 200 (no duplicates, no gaps)", n)
	}
	if n := e.count(`SELECT count(*) FROM (SELECT height, idx FROM "chain x".items GROUP BY 1, 2 HAVING count(*) > 1) d`); n != 0 {
		t.Fatalf("%d duplicate items", n)
	}
	if h, st := e.backfillHeight("second"); h != 200 || st != "complete" {
		t.Fatalf("second at %d %s", h, st)
	}
}

func TestCursorNeverMovesBack(t *testing.T) {
	e := newEnv(t)
	if err := EnsureSchema(e.ctx, e.conn, "chain x", testDecoder{}.Tables(), false, nil); err != nil {
		t.Fatal(err)
	}
	head := Stream{Head: true}
	bf := Stream{Alias: "b", From: 1, To: 100}
	if _, err := LoadCursor(e.ctx, e.conn, "chain x", bf); err != nil {
		t.Fatal(err)
	}
	for _, h := range []uint64{50, 30, 70, 10} {
		for _, s := range []Stream{head, bf} {
			tx, err := e.conn.Begin(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := saveCursor(e.ctx, tx, "chain x", s, 1, h, hashOf(h)); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range []Stream{head, bf} {
		c, err := LoadCursor(e.ctx, e.conn, "chain x", s)
		if err != nil {
			t.Fatal(err)
		}
		if c.Height != 70 || string(c.Hash) != string(hashOf(70)) {
			t.Fatalf("%s cursor at %d, want 70 with its hash", s.Name(), c.Height)
		}
	}
	_, err := LoadCursor(e.ctx, e.conn, "chain x", Stream{Alias: "b", From: 1, To: 99})
	var ae *AliasRangeError
	if !errors.As(err, &ae) {
		t.Fatalf("alias reused with another range: %v", err)
	}
}

func TestCorruptRecordIsDroppedAndNamed(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 20, items)
	// Corrupt block 15 on disk through the store's own API: overwrite it
	// with a value whose header names another height.
	e.store = corruptHeight(t, e.store, 15)
	_, err := e.run("k", 1, 20, 5)
	var ce *staging.CorruptRecordError
	if !errors.As(err, &ce) || ce.Height != 15 {
		t.Fatalf("err = %v, want corrupt record at 15", err)
	}
	if m, _ := e.store.Missing(1, 20); len(m) != 1 || m[0].From != 15 || m[0].To != 15 {
		t.Fatalf("corrupt record kept in staging: missing %v", m)
	}
}

// A height another reader removed as unreadable a moment before (another
// export stream, reading the rest of a damaged file) is reported as that
// damage, status 4, not as a height never fetched (before: "height 15 is
// not staged", exit 1, when the other stream's read came first).
func TestHeightRemovedByAnotherReaderIsDamage(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 20, items)
	e.store = corruptHeight(t, e.store, 15)
	it, err := e.store.Scan(15, 15) // the other stream's read
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
	}
	it.Close()
	if m, _ := e.store.Missing(1, 20); len(m) != 1 || m[0] != (staging.Range{From: 15, To: 15}) {
		t.Fatalf("the other reader did not remove 15: missing %v", m)
	}
	_, err = e.run("k", 1, 20, 5)
	var cs *staging.CorruptStoreError
	var gap *GapError
	if !errors.As(err, &cs) || errors.As(err, &gap) || !strings.Contains(err.Error(), "height 15 was removed from staging as unreadable") {
		t.Fatalf("err = %v, want the damage that removed 15, not a gap", err)
	}
}

// corruptHeight flips the last byte of the staged value at h by reopening
// the store's directory with Pebble directly (key 'b' + big-endian height).
func corruptHeight(t *testing.T, s *staging.Store, h uint64) *staging.Store {
	t.Helper()
	dir := s.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := make([]byte, 9)
	k[0] = 'b'
	binary.BigEndian.PutUint64(k[1:], h)
	v, closer, err := db.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	c := append([]byte(nil), v...)
	closer.Close()
	c[len(c)-1] ^= 0xff
	if err := db.Set(k, c, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := stagingtest.Open(t, dir, staging.Options{})
	t.Cleanup(func() { reopened.Close() })
	return reopened
}

func indexNames(t *testing.T, e *env) []string {
	return pgtest.SecondaryIndexes(t, e.conn, "chain x")
}

func TestDeferAndRestoreIndexes(t *testing.T) {
	e := newEnv(t)
	tables := testDecoder{}.Tables()
	if err := EnsureSchema(e.ctx, e.conn, "chain x", tables, false, nil); err != nil {
		t.Fatal(err)
	}
	if got := indexNames(t, e); len(got) != 1 || got[0] != "items_note" {
		t.Fatalf("indexes before: %v", got)
	}
	log := slog.New(slog.DiscardHandler)
	if err := DeferIndexes(e.ctx, e.conn, "chain x", tables, log); err != nil {
		t.Fatal(err)
	}
	if got := indexNames(t, e); len(got) != 0 {
		t.Fatalf("indexes during the fill: %v", got)
	}
	// Deferring twice keeps the one recorded definition.
	if err := DeferIndexes(e.ctx, e.conn, "chain x", tables, log); err != nil {
		t.Fatal(err)
	}
	n, err := RestoreIndexes(e.ctx, e.conn, "chain x", log)
	if err != nil || n != 1 {
		t.Fatalf("restore built %d (%v), want 1", n, err)
	}
	if got := indexNames(t, e); len(got) != 1 || got[0] != "items_note" {
		t.Fatalf("indexes after: %v", got)
	}
	if n, err := RestoreIndexes(e.ctx, e.conn, "chain x", log); n != 0 || err != nil {
		t.Fatalf("second restore built %d (%v)", n, err)
	}
}

func TestBatchesEndEarlyAtTheRowBudget(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 100, func(uint64) string { return "n=9" }) // 10 rows a block
	res, err := Run(e.ctx, Fixed(e.conn), e.store, testDecoder{}, Config{Schema: "chain x", BatchBlocks: 100, BatchRows: 95,
		Stream: Stream{Alias: "rows", From: 1, To: 100}})
	if err != nil || !res.Complete {
		t.Fatalf("%v complete=%v", err, res.Complete)
	}
	// 95 rows is reached at the 10th block of each batch.
	if res.Batches != 10 || res.Blocks != 100 || res.Rows["items"] != 900 {
		t.Fatalf("%d batches, %d blocks, %d items; want 10 batches of 10 blocks", res.Batches, res.Blocks, res.Rows["items"])
	}
}

var hashOf = chaintest.HashOf
