package events_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/evm/events"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
)

// BenchmarkDecode decodes synthetic mainnet-density EVM blocks (≈150
// transactions, ≈400 logs) with the family's decoder alone and with an ABI
// of three events (Approval, Uniswap V2 Sync, Uniswap V3 Swap) over every
// address: what decoding costs on the export path, per block and per
// event row (go test -bench Decode ./chain/evm/events/). The ABI is the
// synthetic chain's evmsynth.DecodingABI, the benchmark harness's too.
func BenchmarkDecode(b *testing.B) {
	const blocks = 64
	src := evmsynth.NewSynthetic(evmsynth.SyntheticConfig{Seed: 1})
	recs := make([][]byte, blocks)
	for i := range recs {
		recs[i] = src.Record(uint64(1000 + i))
	}
	abiFile := filepath.Join(b.TempDir(), "abi3.json")
	if err := os.WriteFile(abiFile, []byte(evmsynth.DecodingABI), 0o644); err != nil {
		b.Fatal(err)
	}
	set, err := events.Compile([]string{"b=" + abiFile})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dec  interface {
			Tables() []chain.Table
			Decode(uint64, []byte, *chain.Rows) error
		}
	}{{"raw", evm.NewDecoder()}, {"abi3", events.NewDecoder(evm.NewDecoder(), set)}} {
		b.Run(c.name, func(b *testing.B) {
			tables := c.dec.Tables()
			rows := chain.NewRows(tables)
			var logs, eventRows, undecoded, all int
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				i := n % blocks
				if err := c.dec.Decode(uint64(1000+i), recs[i], rows); err != nil {
					b.Fatal(err)
				}
				logs += rows.Len(evm.TableLogs)
				for t := 4; t < len(tables); t++ {
					if tables[t].Name == "b_undecoded" {
						undecoded += rows.Len(t)
					} else {
						eventRows += rows.Len(t)
					}
				}
				all += rows.Total()
				rows.Reuse()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(all), "ns/row")
			b.ReportMetric(float64(eventRows)/float64(logs), "events/log")
			b.ReportMetric(float64(undecoded)/float64(b.N), "undecoded/block")
		})
	}
}
