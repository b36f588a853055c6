package pipeline

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// An EVM chain from genesis (height 0) lands with the synthetic chain's own
// counts per block, and a rerun adds nothing.
func TestEVMRunMatchesSyntheticChain(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 0, 60)
	cfg.Chain, cfg.Schema, cfg.BatchBlocks = "evm", "", 16
	for range 2 {
		sum, err := Run(context.Background(), cfg, io.Discard, quiet)
		if err != nil || !sum.Complete {
			t.Fatalf("run: %v complete=%v", err, sum.Complete)
		}
	}
	src := evm.NewSynthetic(evm.SyntheticConfig{Seed: cfg.SyntheticSeed})
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT b.number,
	(SELECT count(*) FROM evm.transactions t WHERE t.block_number = b.number),
	(SELECT count(*) FROM evm.logs l WHERE l.block_number = b.number)
FROM evm.blocks b ORDER BY b.number`)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	for rows.Next() {
		var h, txs, logs int64
		if err := rows.Scan(&h, &txs, &logs); err != nil {
			t.Fatal(err)
		}
		if h != want {
			t.Fatalf("block %d where %d was expected", h, want)
		}
		wt, wl := src.ExpectedCounts(uint64(h))
		if txs != int64(wt) || logs != int64(wl) {
			t.Fatalf("block %d: %d txs %d logs, synthetic chain has %d and %d", h, txs, logs, wt, wl)
		}
		want++
	}
	if rows.Err() != nil || want != 61 {
		t.Fatalf("blocks 0-%d (%v), want 0-60", want-1, rows.Err())
	}
}
