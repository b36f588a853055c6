package nodehome

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
)

// TestRecordRPC is the recorder of scripts/nodehome-fixture.sh, not a
// test: with NODEHOME_RECORD_RPC set it fetches heights
// 1..NODEHOME_RECORD_TO from that live node through the RPC source, as
// blockhaul's --rpc would stage them, and writes the raw records, one a
// line, zstd-compressed, to NODEHOME_RECORD_OUT.
func TestRecordRPC(t *testing.T) {
	rpc := os.Getenv("NODEHOME_RECORD_RPC")
	if rpc == "" {
		t.Skip("records a fixture from a live node: run by scripts/nodehome-fixture.sh")
	}
	to, err := strconv.ParseUint(os.Getenv("NODEHOME_RECORD_TO"), 10, 64)
	if err != nil {
		t.Fatalf("NODEHOME_RECORD_TO: %v", err)
	}
	outPath := os.Getenv("NODEHOME_RECORD_OUT")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	client, err := jsonrpc.New(jsonrpc.Config{Endpoints: []string{rpc}, MaxBatch: cometbft.RPCMaxBatch, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	src, err := cometbft.NewRPCSource(cometbft.RPCConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw, err := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(zw)
	const span = 10
	for from := uint64(1); from <= to; from += span {
		end := min(from+span-1, to)
		blocks, err := src.Fetch(ctx, from, end)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			w.Write(b.Raw)
			w.WriteByte('\n')
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
