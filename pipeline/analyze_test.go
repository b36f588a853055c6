package pipeline

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// TestBoundedRunAnalyzesWhatItFilled: after a bounded run and an export,
// the tables they filled have planner statistics (pg_stats rows, a row
// estimate equal to the row count) without waiting for autovacuum.
func TestBoundedRunAnalyzesWhatItFilled(t *testing.T) {
	ctx := context.Background()
	for _, cmd := range []string{CmdRun, CmdExport} {
		t.Run(cmd, func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			stg := filepath.Join(t.TempDir(), "s")
			src := newCounting(300)
			if cmd == CmdExport {
				mustRunWith(t, testConfig(CmdFetch, dsn, stg, nil, 1, 300), src)
			}
			mustRunWith(t, testConfig(cmd, dsn, stg, nil, 1, 300), src)
			conn := pgtest.ConnectTo(t, dsn)
			defer conn.Close(ctx)
			for _, table := range []string{"blocks", "transactions", "events"} {
				var rows, stats int64
				var estimate float64
				err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM cometbft.`+table+`),
	(SELECT reltuples FROM pg_class WHERE oid = 'cometbft.`+table+`'::regclass),
	(SELECT count(*) FROM pg_stats WHERE schemaname = 'cometbft' AND tablename = $1)`, table).Scan(&rows, &estimate, &stats)
				if err != nil {
					t.Fatal(err)
				}
				if rows == 0 || stats == 0 || int64(estimate) != rows {
					t.Errorf("%s: %d rows, planner estimate %.0f, %d column statistics; want the estimate exact and statistics present", table, rows, estimate, stats)
				}
			}
		})
	}
}
