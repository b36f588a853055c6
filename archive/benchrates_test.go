package archive

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// The families' default rates (family.CometBFT.Rates, family.EVM.Rates):
// the family registry imports this package, so its tests cannot import it.
var (
	cometbftRates = Rates{StagingBytesPerBlock: 5.6e3, DBBytesPerBlock: 23.9e3, FetchBlocksPerSec: 1500, ExportBlocksPerSec: 1480}
	evmRates      = Rates{StagingBytesPerBlock: 92e3, DBBytesPerBlock: 135e3, FetchBlocksPerSec: 700, ExportBlocksPerSec: 155}
)

// TestBenchTimeRates: a bench result of this machine gives its rates and
// says so; one of another machine, or none, gives the defaults and says
// why.
func TestBenchTimeRates(t *testing.T) {
	host, _ := os.Hostname()
	result := func(host string) []byte {
		return []byte(fmt.Sprintf(`{"date":"2026-11-30T02:36:24Z","machine":{"host":%q,"cpus":%d},
"densities":[{"name":"cometbft","ingest":{"blocks_per_s":10765},"export":{"blocks_per_s":1480.5}},{"name":"evm","ingest":{"blocks_per_s":711},"export":{"blocks_per_s":155}}],
"fetch":{"chain":"cometbft","blockhaul":{"blocks_per_s":6548}}}`, host, runtime.NumCPU()))
	}
	here := result(host)
	if r := BenchTimeRates(here, "here.json", "cometbft", cometbftRates); r.FetchBlocksPerSec != 6548 || r.ExportBlocksPerSec != 1480.5 || !strings.Contains(r.Source, "measured on this machine") {
		t.Fatalf("cometbft: %+v", r)
	}
	if r := BenchTimeRates(here, "here.json", "evm", evmRates); r.FetchBlocksPerSec != 711 || r.ExportBlocksPerSec != 155 || !strings.Contains(r.Source, "staging ingest") {
		t.Fatalf("evm: %+v", r)
	}
	d := cometbftRates
	other := result(host + "-elsewhere")
	if r := BenchTimeRates(other, "other.json", "cometbft", d); r.FetchBlocksPerSec != d.FetchBlocksPerSec || !strings.Contains(r.Source, "default rates") || !strings.Contains(r.Source, "-elsewhere") {
		t.Fatalf("another machine's result: %+v", r)
	}
	if r := BenchTimeRates(nil, "none.json", "cometbft", d); r.ExportBlocksPerSec != d.ExportBlocksPerSec || !strings.Contains(r.Source, "no benchmark result") {
		t.Fatalf("no result: %+v", r)
	}
}
