package parquet_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/export/parquet"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
	"gocloud.dev/blob"
)

// synthChain is a family's decoder and a synthetic chain of it.
type synthChain struct {
	name string
	dec  export.Decoder
	src  interface {
		Fetch(context.Context, uint64, uint64) ([]chain.Block, error)
		ChainID(context.Context) (string, error)
	}
	first uint64
}

func cometChain() synthChain {
	return synthChain{"cometbft", cometbft.NewDecoder(), cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 7, TxPerBlock: 6}), 1}
}

func evmChain() synthChain {
	return synthChain{"evm", evm.NewDecoder(), evmsynth.NewSynthetic(evmsynth.SyntheticConfig{Seed: 7, TxPerBlock: 8, LogsPerBlock: 20}), 1}
}

// stage fills a new store in dir with the chain's blocks [from, to].
func stage(t testing.TB, dir string, c synthChain, from, to uint64) *staging.Store {
	t.Helper()
	ctx := context.Background()
	store := stagingtest.Open(t, dir, staging.Options{})
	id, err := c.src.ChainID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Bind(c.dec.Family(), id); err != nil {
		t.Fatal(err)
	}
	for h := from; h <= to; h += 200 {
		blocks, err := c.src.Fetch(ctx, h, min(h+199, to))
		if err != nil {
			t.Fatal(err)
		}
		b := store.NewBatch()
		for _, blk := range blocks {
			if err := b.Put(blk); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

// dirBucket opens a directory as a bucket, closed when the test ends.
func dirBucket(t testing.TB, dir string) *blob.Bucket {
	t.Helper()
	b, err := parquet.OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// glob is the files of table under dir, as a DuckDB glob.
func glob(dir, table string) string {
	return filepath.Join(dir, table, "*.parquet")
}
