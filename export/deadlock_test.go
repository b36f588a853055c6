package export

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Two writers of the same heights that take their row locks in opposite
// orders deadlock; PostgreSQL aborts the export's batch (40P01), which
// takes the merge path and commits: every row once, the tables those of an
// undisturbed run.
func TestOverlappingWritersDeadlockThenMerge(t *testing.T) {
	e, want := faultEnv(t)
	dsn := e.conn.Config().ConnString()
	if err := EnsureSchema(e.ctx, e.conn, "chain x", testDecoder{}.Tables(), false, nil); err != nil {
		t.Fatal(err)
	}
	// The other writer holds block 15 and will want block 12; it never runs
	// the deadlock check itself, so the export's backend is the one
	// PostgreSQL aborts.
	other, err := pgx.Connect(e.ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if _, err := other.Exec(e.ctx, "SET deadlock_timeout = '1min'"); err != nil {
		t.Fatal(err)
	}
	tx, err := other.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(e.ctx, `INSERT INTO "chain x".blocks VALUES (15, $1)`, hashOf(15)); err != nil {
		t.Fatal(err)
	}

	writer, err := dialer(dsn)(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(context.Background())
	var codes []string
	done := make(chan error, 1)
	var res Result
	go func() {
		cfg := faultConfig()
		cfg.OnBatch = func(b BatchStats) {
			if b.Conflicted {
				codes = append(codes, b.ConflictCode)
			}
		}
		var err error
		res, err = Run(e.ctx, Fixed(writer), e.store, testDecoder{}, cfg)
		done <- err
	}()
	// Once the export waits for block 15 it holds 11-14 of its first batch.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		if err := e.conn.QueryRow(e.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'blockhaul-victim'
	AND datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the export never waited for the other writer's row")
		}
		time.Sleep(10 * time.Millisecond) // polling the server's view of the lock wait
	}
	// Closing the cycle: the export's deadlock check aborts its batch.
	if _, err := tx.Exec(e.ctx, `INSERT INTO "chain x".blocks VALUES (12, $1)`, hashOf(12)); err != nil {
		t.Fatalf("the other writer was the deadlock's victim: %v", err)
	}
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || !res.Complete {
		t.Fatalf("export beside a deadlocking writer: %v (complete %v)", err, res.Complete)
	}
	if len(codes) != 1 || codes[0] != "40P01" {
		t.Fatalf("batches merged after conflicts with codes %v, want one after a deadlock (40P01)", codes)
	}
	if got := fingerprintOf(t, dsn); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}
