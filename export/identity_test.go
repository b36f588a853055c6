package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
	"github.com/jackc/pgx/v5"
)

// otherStore is a staging store of another chain over the same heights: a
// chain id of its own, or (chainID "test") the env's chain id with other
// blocks.
func otherStore(t *testing.T, chainID string, from, to uint64) *staging.Store {
	t.Helper()
	s := stagingtest.Open(t, t.TempDir(), staging.Options{})
	t.Cleanup(func() { s.Close() })
	if err := s.Bind(chain.FamilyCometBFT, chainID); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	defer b.Close()
	other := func(h uint64) []byte { return hashOf(h + 1<<40) }
	for h := from; h <= to; h++ {
		if err := b.Put(chain.Block{Height: h, Hash: other(h), ParentHash: other(h - 1), Raw: []byte(items(h))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) chainRecord() (ChainRecord, bool) {
	e.t.Helper()
	rec, ok, err := ReadChainRecord(e.ctx, e.conn, "chain x")
	if err != nil {
		e.t.Fatal(err)
	}
	return rec, ok
}

// The chain is recorded in the transaction of the schema's first rows: a
// first batch that fails records nothing; the first that commits records
// its first block.
func TestChainRecordedWithTheFirstRows(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 30, func(h uint64) string {
		if h == 5 {
			return "nul" // PostgreSQL rejects the first batch mid-COPY
		}
		return items(h)
	})
	if _, err := e.run("a", 1, 30, 10); err == nil {
		t.Fatal("a batch PostgreSQL rejects was committed")
	}
	if rec, ok := e.chainRecord(); ok {
		t.Fatalf("a failed first batch recorded %s", rec)
	}
	if _, err := e.run("b", 11, 30, 10); err != nil {
		t.Fatal(err)
	}
	rec, ok := e.chainRecord()
	if !ok || rec.Family != "cometbft" || rec.ChainID != "test" || rec.Height != 11 || !bytes.Equal(rec.Hash, hashOf(11)) {
		t.Fatalf("recorded %+v (%v), want cometbft chain test at block 11", rec, ok)
	}
}

// A writer from another chain's staging — another chain id, or the same
// chain id with other blocks — is refused by Run, RunStreams and Replay
// before anything is written, naming both chains.
func TestExportRefusesAnotherChainsStaging(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 40, items)
	if _, err := e.run("mine", 1, 40, 10); err != nil {
		t.Fatal(err)
	}
	rec, _ := e.chainRecord()
	state := func() string {
		var s string
		if err := e.conn.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM "chain x".blocks)::text || ' ' || (SELECT count(*) FROM "chain x".items)::text || ' ' ||
			(SELECT string_agg(alias || ':' || coalesce(last_height, -1)::text, ',' ORDER BY alias) FROM "chain x".blockhaul_backfills) || ' ' ||
			(SELECT count(*) FROM pg_indexes WHERE schemaname = 'chain x')::text`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := state()
	for _, tc := range []struct {
		name, chainID, given string
	}{
		{"another chain id", "other", `cometbft chain "other" of staging`},
		{"the same chain id, other blocks", "test", fmt.Sprintf("whose block 1 has hash %X", hashOf(1+1<<40))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := otherStore(t, tc.chainID, 1, 60)
			writers := map[string]func() error{
				"Run": func() error {
					_, err := Run(e.ctx, Fixed(e.conn), s, testDecoder{}, Config{Schema: "chain x", Stream: Stream{Alias: "x", From: 1, To: 60}})
					return err
				},
				"RunStreams": func() error {
					_, err := RunStreams(e.ctx, []*Session{Fixed(e.conn), Fixed(e.secondConn())}, s, testDecoder{}, Config{Schema: "chain x", Stream: Stream{Alias: "y", From: 1, To: 60}})
					return err
				},
				"head": func() error {
					_, err := Run(e.ctx, Fixed(e.conn), s, testDecoder{}, Config{Schema: "chain x", Stream: Stream{Head: true, From: 41, To: 60}})
					return err
				},
				"Replay": func() error {
					_, err := Replay(e.ctx, Fixed(e.conn), s, testDecoder{}, ReplayConfig{Schema: "chain x"})
					return err
				},
			}
			for name, w := range writers {
				err := w()
				var wc *WrongChainError
				if !errors.As(err, &wc) {
					t.Fatalf("%s: got %v, want *WrongChainError", name, err)
				}
				if !strings.Contains(err.Error(), rec.String()) || !strings.Contains(err.Error(), tc.given) {
					t.Errorf("%s: %v does not name both chains (%s; %s)", name, err, rec, tc.given)
				}
				if got := state(); got != want {
					t.Fatalf("%s changed the schema: %s, was %s", name, got, want)
				}
			}
		})
	}
}

// secondConn is another connection to e's database.
func (e *env) secondConn() *pgx.Conn {
	e.t.Helper()
	conn, err := pgx.ConnectConfig(e.ctx, e.conn.Config().Copy())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Two writers of two chains that start on an empty schema at once: one
// records its chain, the other is refused, and every row is the first's.
func TestConcurrentFirstWritersOfTwoChainsRecordOne(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 100, items)
	s := otherStore(t, "other", 201, 300) // not adjacent: no parent link to check
	conns := []*pgx.Conn{e.conn, e.secondConn()}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, st := range []*staging.Store{e.store, s} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := uint64(1 + 200*i)
			_, errs[i] = Run(context.Background(), Fixed(conns[i]), st, testDecoder{}, Config{Schema: "chain x", BatchBlocks: 10,
				Stream: Stream{Alias: fmt.Sprintf("w%d", i), From: from, To: from + 99}})
		}()
	}
	wg.Wait()
	rec, ok := e.chainRecord()
	if !ok {
		t.Fatal("no chain recorded")
	}
	winner := 0
	if rec.ChainID == "other" {
		winner = 1
	}
	var wc *WrongChainError
	if errs[winner] != nil || !errors.As(errs[1-winner], &wc) {
		t.Fatalf("errors %v, want the writer of %s to succeed and the other refused", errs, rec)
	}
	lo, hi := 1+200*winner, 100+200*winner
	if n := e.count(fmt.Sprintf(`SELECT count(*) FROM "chain x".blocks WHERE height NOT BETWEEN %d AND %d`, lo, hi)); n != 0 {
		t.Fatalf("%d blocks of the refused chain were written", n)
	}
}

// A reorg rollback below the recorded block moves the record to the block
// both forks share.
func TestRollbackMovesTheChainRecordDown(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 20, items)
	if _, err := Run(e.ctx, Fixed(e.conn), e.store, testDecoder{}, Config{Schema: "chain x", Stream: Stream{Head: true, From: 15, To: 20}}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := e.chainRecord(); rec.Height != 15 {
		t.Fatalf("recorded block %d, want 15", rec.Height)
	}
	if err := Rollback(e.ctx, e.conn, "chain x", testDecoder{}.Tables(), 17, hashOf(17)); err != nil {
		t.Fatal(err)
	}
	if rec, _ := e.chainRecord(); rec.Height != 15 {
		t.Fatalf("a rollback above the recorded block moved it to %d", rec.Height)
	}
	if err := Rollback(e.ctx, e.conn, "chain x", testDecoder{}.Tables(), 12, hashOf(12)); err != nil {
		t.Fatal(err)
	}
	if rec, _ := e.chainRecord(); rec.Height != 12 || !bytes.Equal(rec.Hash, hashOf(12)) {
		t.Fatalf("after a rollback to 12 the record names block %d %x", rec.Height, rec.Hash)
	}
}

// A chain recorded by another writer after this one's check and before its
// first batch is seen inside that batch's transaction: the batch is refused
// and nothing of it is written.
func TestFirstBatchChecksARecordWrittenMeanwhile(t *testing.T) {
	e := newEnv(t)
	e.stage(1, 30, items)
	other := e.secondConn()
	var recorded bool
	_, err := Run(e.ctx, Fixed(e.conn), e.store, testDecoder{}, Config{Schema: "chain x", BatchBlocks: 10,
		Stream: Stream{Alias: "a", From: 1, To: 30},
		Available: func(ctx context.Context, h uint64) (uint64, bool, error) {
			if !recorded {
				recorded = true
				if _, err := other.Exec(ctx, `INSERT INTO "chain x".blockhaul_chain (family, chain_id, height, hash) VALUES ('cometbft', 'other', 7, '\x07')`); err != nil {
					return 0, false, err
				}
			}
			return 30, true, nil
		}})
	var wc *WrongChainError
	if !errors.As(err, &wc) || !strings.Contains(err.Error(), `holds cometbft chain "other" (its block 7 has hash 07), refusing cometbft chain "test" of staging`) {
		t.Fatalf("got %v, want the chain recorded meanwhile named", err)
	}
	if n := e.count(`SELECT count(*) FROM "chain x".blocks`) + e.count(`SELECT count(*) FROM "chain x".blockhaul_backfills WHERE last_height IS NOT NULL`); n != 0 {
		t.Fatalf("%d rows written after the refusal", n)
	}
}
