package pipeline

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// Streams started at the same moment on an empty database all create the
// schema, defer its indexes and complete: schema creation is serialised.
func TestConcurrentBackfillsOnEmptyDatabase(t *testing.T) {
	const n = 6
	for round := range 3 {
		dsn := pgtest.NewDatabase(t)
		start := make(chan struct{})
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				from := uint64(1 + i*40)
				cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), fmt.Sprint("s", i)), nil, from, from+39)
				cfg.Source = newCounting(1000)
				cfg.BatchBlocks = 10
				<-start
				_, errs[i] = Run(context.Background(), cfg, io.Discard, quiet)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: stream %d: %v", round, i, err)
			}
		}
		if t.Failed() {
			return
		}
		conn := pgtest.ConnectTo(t, dsn)
		var blocks, complete, indexes int
		err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM cometbft.blocks),
	(SELECT count(*) FROM cometbft.blockhaul_backfills WHERE status = 'complete'),
	(SELECT count(*) FROM pg_indexes WHERE schemaname = 'cometbft' AND indexname LIKE '%_idx')`).Scan(&blocks, &complete, &indexes)
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if blocks != n*40 || complete != n || indexes != cometbftIndexes {
			t.Fatalf("round %d: %d blocks (want %d), %d complete backfills (want %d), %d secondary indexes (want %d)", round, blocks, n*40, complete, n, indexes, cometbftIndexes)
		}
	}
}

// Backfills of overlapping ranges under different aliases, started at once
// into a new schema, prepare it (create it, defer its keys and indexes)
// taking turns: the server's log holds no deadlock, where two such jobs
// once deadlocked while deferring the keys (`defer keys: lock tables`)
// and spent retries on it.
func TestConcurrentOverlappingBackfillsNeverDeadlock(t *testing.T) {
	cluster := pgtest.StartCluster(t)
	const n = 4
	for round := range 2 {
		dsn := cluster.NewDatabase(t, fmt.Sprint("overlap", round))
		start := make(chan struct{})
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				from := uint64(1 + i*20)
				cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), fmt.Sprint("s", i)), nil, from, from+79)
				cfg.BatchBlocks = 10
				cfg.ExportStreams = 2
				cfg.Alias = fmt.Sprint("overlap-", i)
				<-start
				_, errs[i] = Run(context.Background(), cfg, io.Discard, quiet)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: stream %d: %v", round, i, err)
			}
		}
		conn := pgtest.ConnectTo(t, dsn)
		var blocks, complete int
		err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM cometbft.blocks),
	(SELECT count(*) FROM cometbft.blockhaul_backfills WHERE status = 'complete' AND alias LIKE 'overlap-_')`).Scan(&blocks, &complete)
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if want := 20*(n-1) + 80; blocks != want || complete != n {
			t.Errorf("round %d: %d blocks (want %d, each once), %d complete backfills (want %d)", round, blocks, want, complete, n)
		}
	}
	log := cluster.Log()
	if c := strings.Count(log, "deadlock detected"); c > 0 {
		var lines []string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "deadlock") || strings.Contains(l, "Process ") || strings.Contains(l, "STATEMENT") {
				lines = append(lines, l)
			}
		}
		t.Errorf("%d deadlocks in the server's log:\n%s", c, strings.Join(lines, "\n"))
	}
}
