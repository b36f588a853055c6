package pipeline

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"path/filepath"
	"testing"

	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
	"github.com/blockhaul/blockhaul/internal/pgtest"
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
	src := evmsynth.NewSynthetic(evmsynth.SyntheticConfig{Seed: cfg.SyntheticSeed})
	conn := pgtest.ConnectTo(t, dsn)
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

// Without --from an EVM range starts at the genesis block, 0, which is
// fetched, verified (its empty transactions, receipts and withdrawals
// tries) and exported like any other; --from 1 still starts at 1, and a
// CometBFT range at 1.
func TestEVMRangeStartsAtGenesis(t *testing.T) {
	for _, c := range []struct {
		chain   string
		fromSet bool
		from    uint64
		want    uint64
	}{
		{"evm", false, DefaultConfig().From, 0},
		{"evm", true, 1, 1},
		{"evm", false, 7, 7}, // set by a caller that does not say so
		{"cometbft", false, DefaultConfig().From, 1},
	} {
		cfg := DefaultConfig()
		cfg.Chain, cfg.From, cfg.FromSet = c.chain, c.from, c.fromSet
		cfg.EnsureDefaults()
		if cfg.From != c.want {
			t.Errorf("%s, --from %d given %v: from %d, want %d", c.chain, c.from, c.fromSet, cfg.From, c.want)
		}
	}

	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	cfg := testConfig(CmdRun, dsn, stg, nil, DefaultConfig().From, 12)
	cfg.Chain, cfg.Schema = "evm", ""
	sum, err := Run(context.Background(), cfg, io.Discard, quiet)
	if err != nil || !sum.Complete {
		t.Fatalf("run: %v complete=%v", err, sum.Complete)
	}
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	var first, n int64
	if err := conn.QueryRow(context.Background(), `SELECT min(number), count(*) FROM evm.blocks`).Scan(&first, &n); err != nil {
		t.Fatal(err)
	}
	if first != 0 || n != 13 {
		t.Fatalf("blocks from %d, %d of them; want 0-12", first, n)
	}
	var hash, parent, txRoot, rcptRoot, wdRoot []byte
	var txCount int32
	if err := conn.QueryRow(context.Background(), `SELECT hash, parent_hash, transactions_root, receipts_root, withdrawals_root, transaction_count
FROM evm.blocks WHERE number = 0`).Scan(&hash, &parent, &txRoot, &rcptRoot, &wdRoot, &txCount); err != nil {
		t.Fatal(err)
	}
	src := evmsynth.NewSynthetic(evmsynth.SyntheticConfig{Seed: cfg.SyntheticSeed})
	emptyTrie, _ := hex.DecodeString("56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421")
	if !bytes.Equal(hash, src.BlockHash(0)) || !bytes.Equal(parent, make([]byte, 32)) || txCount != 0 {
		t.Errorf("genesis row: hash %x parent %x %d txs; the chain's genesis is %x", hash, parent, txCount, src.BlockHash(0))
	}
	for name, root := range map[string][]byte{"transactions_root": txRoot, "receipts_root": rcptRoot, "withdrawals_root": wdRoot} {
		if !bytes.Equal(root, emptyTrie) {
			t.Errorf("genesis %s %x, want the empty trie's %x", name, root, emptyTrie)
		}
	}
	if _, err := evm.VerifyBlock(src.Record(0)); err != nil {
		t.Errorf("genesis record: %v", err)
	}
}
