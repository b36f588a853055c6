package aptos_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/aptos"
	"github.com/blockhaul/blockhaul/chain/aptossynth"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
)

// BenchmarkFetchFromReplay fetches synthetic blocks at mainnet density from
// a local node (replay_test.go) through the REST source, as fetch does:
// spans of 16 blocks, 8 at a time, full verification. It reports blocks/s
// and the node's answer bytes per block.
func BenchmarkFetchFromReplay(b *testing.B) {
	const blocks, span, workers = 2000, 16, 8
	syn := aptossynth.New(aptossynth.Config{Seed: 1})
	r := newReplay(b, "4")
	bytes := 0
	for h := uint64(0); h <= blocks; h++ {
		raw := blockOf(b, syn, h)
		bytes += len(raw)
		r.add(raw)
	}
	c, err := jsonrpc.New(jsonrpc.Config{Endpoints: []string{r.serve(b)}, Concurrency: workers})
	if err != nil {
		b.Fatal(err)
	}
	src, err := aptos.NewSource(aptos.SourceConfig{Client: c})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		spans := make(chan uint64)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for from := range spans {
					if _, err := src.Fetch(ctx, from, from+span-1); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for from := uint64(1); from+span-1 <= blocks; from += span {
			spans <- from
		}
		close(spans)
		wg.Wait()
	}
	sec := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N)*float64(blocks/span*span)/sec, "blocks/s")
	b.ReportMetric(float64(bytes)/float64(blocks+1), "answer-bytes/block")
}

// BenchmarkDecode decodes synthetic blocks at mainnet density into rows.
func BenchmarkDecode(b *testing.B) {
	syn := aptossynth.New(aptossynth.Config{Seed: 1})
	var recs [][]byte
	for h := uint64(1); h <= 64; h++ {
		recs = append(recs, mustRecord(b, syn, h))
	}
	d := aptos.NewDecoder()
	rows := chain.NewRows(d.Tables())
	b.ResetTimer()
	for i := range b.N {
		if i%64 == 0 {
			rows.Reuse()
		}
		if err := d.Decode(uint64(i%64+1), recs[i%64], rows); err != nil {
			b.Fatal(err)
		}
	}
}
