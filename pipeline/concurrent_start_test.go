package pipeline

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
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
