package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// TestRunRefusesForeignBlocksTable: a target schema holding another tool's
// blocks table stops run with exit status 2 and an error naming the table
// and what differs, before anything is created or fetched.
func TestRunRefusesForeignBlocksTable(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA cometbft; CREATE TABLE cometbft.blocks (height bigint PRIMARY KEY, block_hash text)`); err != nil {
		t.Fatal(err)
	}
	src := newCounting(100)
	_, err := runWith(t, testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 20), src)
	var se *export.ShapeError
	if ExitCode(err) != ExitConfig || !errors.As(err, &se) || !strings.Contains(err.Error(), "cometbft.blocks") || !strings.Contains(err.Error(), `missing column "hash" bytea`) {
		t.Fatalf("run into a foreign blocks table: exit %d, %v", ExitCode(err), err)
	}
	if n := src.calls.Load(); n != 0 {
		t.Errorf("%d source calls before the refusal, want 0", n)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'cometbft'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d tables in the schema after the refusal (%v), want only the foreign one", n, err)
	}
}
