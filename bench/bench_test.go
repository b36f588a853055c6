package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// smallConfig is a whole run in miniature: every section, a few hundred
// blocks each.
func smallConfig(t testing.TB) Config {
	return Config{
		DatabaseURL:         pgtest.BaseURL(),
		CometBFTBlocks:      300,
		EVMBlocks:           30,
		AptosBlocks:         30,
		BatchBlocks:         100,
		FetchBlocks:         300,
		FetchWorkers:        4,
		FetchSpan:           8,
		FetchSource:         RPCSource(chain.FamilyCometBFT, 4),
		RangeSizes:          []uint64{200, 400, 600},
		StateInterval:       5 * time.Millisecond,
		HeadBackfillBlocks:  400,
		LimitCometBFTBlocks: 200,
		LimitEVMBlocks:      20,
		// Decoding: the first batch is where what decoding fills is counted.
		DecodingCometBFTBlocks: 150,
		DecodingEVMBlocks:      15,
		WorkDir:                t.TempDir(),
	}
}

func TestRunSmall(t *testing.T) {
	cfg := smallConfig(t)
	cfg.CPUProfileDir = t.TempDir()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Machine.CPUs < 1 || res.Machine.GoVersion == "" || res.Machine.PostgreSQL == "" {
		t.Errorf("machine info incomplete: %+v", res.Machine)
	}
	if runtime.GOOS == "linux" && (!res.CPU.Known || res.CPU.Bench <= 0 || res.CPU.Capacity <= res.CPU.Bench) {
		t.Errorf("cpu usage: %+v", res.CPU)
	}
	if len(res.Densities) != len(family.All()) {
		t.Fatalf("densities = %d, want one a family (%d)", len(res.Densities), len(family.All()))
	}
	for _, d := range res.Densities {
		if d.Export.Rows == 0 || d.Export.Rows != d.Baseline.Rows {
			t.Errorf("%s: export %d rows, baseline %d", d.Name, d.Export.Rows, d.Baseline.Rows)
		}
		var perTable uint64
		for _, n := range d.Rows {
			perTable += n
		}
		if perTable != d.Export.Rows || d.Rows["blocks"] != d.Blocks {
			t.Errorf("%s: rows per table %v do not add up to %d or miss one row per block", d.Name, d.Rows, d.Export.Rows)
		}
		if d.Ingest.Blocks != d.Blocks || d.Ingest.Ratio <= 1 || d.Ingest.SourceBlocksPerSec <= 0 {
			t.Errorf("%s: ingest %+v", d.Name, d.Ingest)
		}
		if len(d.Export.AllSeconds) != 2 || len(d.Baseline.AllSeconds) != 2 || d.Export.Seconds != min(d.Export.AllSeconds[0], d.Export.AllSeconds[1]) {
			t.Errorf("%s: rounds: export %v (best %v), baseline %v", d.Name, d.Export.AllSeconds, d.Export.Seconds, d.Baseline.AllSeconds)
		}
		if d.Ratio <= 0 || d.Export.Batches != int((d.Blocks+99)/100) || d.Baseline.Batches != d.Export.Batches {
			t.Errorf("%s: ratio %v, batches export %d baseline %d", d.Name, d.Ratio, d.Export.Batches, d.Baseline.Batches)
		}
		if runtime.GOOS == "linux" {
			for _, c := range []LoadCPU{d.ExportCPU, d.BaselineCPU} {
				if !c.Known || len(c.PerBackend) != 1 || c.Backends <= 0 || c.Blockhaul <= 0 {
					t.Errorf("%s: cpu %+v", d.Name, c)
				}
			}
		}
		for _, run := range []CopyRun{d.Export, d.Baseline} {
			last := run.Samples[len(run.Samples)-1]
			if last.Blocks != d.Blocks || last.Rows != run.Rows {
				t.Errorf("%s: last sample %+v, want %d blocks %d rows", d.Name, last, d.Blocks, run.Rows)
			}
			if len(run.Commits) != run.Batches || run.Commits[len(run.Commits)-1].Rows != run.Rows {
				t.Errorf("%s: %d commits recorded for %d batches: %+v", d.Name, len(run.Commits), run.Batches, run.Commits)
			}
			for i := 1; i < len(run.Samples); i++ {
				if run.Samples[i].Rows < run.Samples[i-1].Rows || run.Samples[i].Seconds < run.Samples[i-1].Seconds {
					t.Fatalf("%s: samples go backwards: %+v", d.Name, run.Samples)
				}
			}
		}
	}
	if res.Fetch == nil || res.Fetch.Blockhaul == nil || res.Fetch.Blockhaul.Blocks != 300 || res.Fetch.Minimal.Blocks != 300 || res.Fetch.Ratio <= 0 ||
		res.Fetch.Client == nil || res.Fetch.Client.Blocks != 300 || res.Fetch.Client.Requests < 300/16 || res.Fetch.ClientRatio <= 0 {
		t.Errorf("fetch: %+v", res.Fetch)
	}
	if len(res.Processes) != 3 {
		t.Fatalf("processes: %+v", res.Processes)
	}
	for _, p := range res.Processes {
		if p.PeakRSSBytes < 1<<20 || p.MicrosPerBlock <= 0 || p.Rows < p.Blocks || p.MicrosPerRow <= 0 || p.PolledHWMBytes <= 0 || p.PeakRSSBytes < p.PolledHWMBytes {
			t.Errorf("process run %+v", p)
		}
		if len(p.AllSeconds) != res.Settings.Rounds || res.Settings.Rounds < 2 || slices.Min(p.AllSeconds) != p.Seconds {
			t.Errorf("%d blocks: runs of %v s, reported %v s; want %d runs and the fastest", p.Blocks, p.AllSeconds, p.Seconds, res.Settings.Rounds)
		}
	}
	checkStreams(t, res)
	checkLimits(t, res)
	checkDecoding(t, res)
	if h := res.HeadBackfill; h == nil {
		t.Error("no head and backfill section")
	} else {
		if h.Blocks != 400 || h.HeadFrom != 201 || h.Rows < 400 || h.OneProcess.Rows != h.Rows || h.TwoProcesses.Rows != h.Rows {
			t.Errorf("head and backfill: %+v", h)
		}
		for _, w := range []HeadBackfillRun{h.OneProcess, h.TwoProcesses} {
			if w.Seconds <= 0 || w.CPUSeconds <= 0 || len(w.AllSeconds) != 2 || w.Seconds != slices.Min(w.AllSeconds) {
				t.Errorf("head and backfill run %+v", w)
			}
		}
		if h.OneProcess.Processes != 1 || h.TwoProcesses.Processes != 2 || math.Abs(h.TwoOverOne-h.TwoProcesses.Seconds/h.OneProcess.Seconds) > 1e-9 {
			t.Errorf("head and backfill: %+v", h)
		}
	}
	if len(res.Targets) != 16 {
		t.Errorf("targets: %d, want 16", len(res.Targets))
	}
	for _, tg := range res.Targets {
		if !tg.Measured {
			t.Errorf("target %q not measured in a run of every section", tg.Name)
		}
	}
	for _, name := range []string{"ingest-cometbft", "export-cometbft", "baseline-cometbft", "ingest-evm", "export-evm", "baseline-evm", "fetch-blockhaul"} {
		if fi, err := os.Stat(filepath.Join(cfg.CPUProfileDir, name+".pprof")); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", name, err)
		}
	}

	dir := t.TempDir()
	paths, err := WriteFiles(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	prefix := filesPrefix(res)
	for _, want := range []string{prefix + ".json", prefix + ".md", prefix + "-throughput-cometbft.svg", prefix + "-throughput-evm.svg", prefix + "-scaling.svg",
		"latest.json", "latest.md", "latest-throughput-cometbft.svg", "latest-throughput-evm.svg", "latest-scaling.svg"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("missing %s (wrote %v)", want, paths)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "latest.md"))
	for _, want := range []string{"blockhaul µs/row", "### The head and a backfill: one process vs two", "### Export streams", "| export, 4 streams |", "### Whole export vs PostgreSQL's restore, like for like", "| cometbft | **", "### Decoding: export with and without", "messages.decoded ", "Projection for a 16-core database server running 16 streams"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("latest.md lacks %q:\n%s", want, md)
		}
	}
	if !strings.Contains(string(md), "(latest-throughput-cometbft.svg)") || !strings.Contains(string(md), "(latest-scaling.svg)") {
		t.Errorf("latest.md does not link the latest plots:\n%s", md)
	}
}

// checkDecoding checks the decoding section of a small run: each family's
// plain and decoded loads exported and COPYed the same rows, ratios of the
// rates, and decoding filled what it claims: every Cosmos message's JSON,
// and event rows for about 29% of the EVM logs with none undecoded.
func checkDecoding(t *testing.T, res Result) {
	t.Helper()
	if len(res.Decoding) != 2 {
		t.Fatalf("decoding section: %d families, want 2", len(res.Decoding))
	}
	for _, d := range res.Decoding {
		want := map[string]uint64{"cometbft": 150, "evm": 15}[d.Chain]
		if d.Blocks != want || d.Decoding == "" {
			t.Errorf("%s: %d blocks, want %d; decoding %q", d.Chain, d.Blocks, want, d.Decoding)
		}
		for _, l := range []DecodingLoad{d.Plain, d.Decoded} {
			if l.Export.Rows == 0 || l.Baseline.Rows != l.Export.Rows || l.Export.Blocks != want || len(l.Export.AllSeconds) != 2 || len(l.Baseline.AllSeconds) != 2 ||
				math.Abs(l.Ratio-l.Baseline.Seconds/l.Export.Seconds) > 1e-9 {
				t.Errorf("%s, %s: export %+v, baseline %+v, ratio %v", d.Chain, l.Name, l.Export, l.Baseline, l.Ratio)
			}
			if runtime.GOOS == "linux" && (l.BlockhaulMicrosPerRow(true) <= 0 || l.BlockhaulMicrosPerRow(false) <= 0) {
				t.Errorf("%s, %s: cpu per row unknown: %+v", d.Chain, l.Name, l.ExportCPU)
			}
		}
		filled := map[string]Filled{}
		for _, f := range d.Filled {
			filled[f.Table+"."+f.Column] = f
		}
		switch d.Chain {
		case "cometbft":
			f := filled["messages.decoded"]
			if len(d.Filled) != 1 || f.Rows == 0 || f.Values != f.Rows || f.Blocks != 100 || d.Plain.Rows["messages"] != d.Decoded.Rows["messages"] {
				t.Errorf("cometbft: filled %+v, want every message of the first 100 blocks decoded", d.Filled)
			}
			if d.Decoded.Export.Rows != d.Plain.Export.Rows {
				t.Errorf("cometbft: %d rows decoded, %d plain", d.Decoded.Export.Rows, d.Plain.Export.Rows)
			}
		case "evm":
			var events uint64
			for _, name := range []string{"b_approval", "b_sync", "b_swap"} {
				events += d.Decoded.Rows[name]
				if filled[name+"."].Values == 0 {
					t.Errorf("evm: no %s rows in the first batch: %+v", name, d.Filled)
				}
			}
			logs := d.Decoded.Rows["logs"]
			if share := float64(events) / float64(logs); share < 0.2 || share > 0.4 || d.Decoded.Rows["b_undecoded"] != 0 ||
				d.Decoded.Export.Rows != d.Plain.Export.Rows+events {
				t.Errorf("evm: %d event rows of %d logs, %d undecoded; %d rows decoded, %d plain", events, logs, d.Decoded.Rows["b_undecoded"], d.Decoded.Export.Rows, d.Plain.Export.Rows)
			}
		default:
			t.Errorf("decoding section of %s", d.Chain)
		}
	}
}

// checkLimits checks the limit section of a small run: both families,
// every load with the same rows, phases that add up, the post-data builds
// of every secondary index and key, and the ratios of the times.
func checkLimits(t *testing.T, res Result) {
	t.Helper()
	if len(res.Limits) != len(family.All()) {
		t.Fatalf("limit section: %d families, want one a family (%d)", len(res.Limits), len(family.All()))
	}
	for _, l := range res.Limits {
		// Aptos has no limit range of its own: its section's blocks.
		want := map[string]uint64{"cometbft": 200, "evm": 20, "aptos": 30}[l.Chain]
		if l.Blocks != want || l.Rows <= l.Blocks || l.Export.Rows != l.Rows || l.Export2.Rows != l.Rows || l.Limit.Rows != l.Rows {
			t.Errorf("%s: %d blocks (want %d), rows %d: export %d, 2 streams %d, limit %d", l.Chain, l.Blocks, want, l.Rows, l.Export.Rows, l.Export2.Rows, l.Limit.Rows)
		}
		for name, r := range map[string]PhaseRun{"export": l.Export, "export, 2 streams": l.Export2, "limit": l.Limit} {
			if len(r.AllSeconds) != 2 || r.Seconds != slices.Min(r.AllSeconds) || r.Fill <= 0 || r.Analyze+r.AnalyzeBeside <= 0 || r.Indexes <= 0 ||
				r.Fill+r.Indexes+r.Analyze > r.Seconds*1.0001 {
				t.Errorf("%s, %s: %+v", l.Chain, name, r)
			}
		}
		// Export defers a fresh fill's primary keys with its secondary
		// indexes, so both sides build the same keys and indexes after the fill.
		keys, exportKeys := countKeys(l.Limit.Builds), countKeys(l.Export.Builds)
		if keys == 0 || exportKeys != keys || len(l.Limit.Builds) != len(l.Export.Builds) {
			t.Errorf("%s: the limit built %d keys and %d indexes, export %d keys and %d indexes", l.Chain, keys, len(l.Limit.Builds)-keys, exportKeys, len(l.Export.Builds)-exportKeys)
		}
		if math.Abs(l.Ratio-l.Limit.Seconds/l.Export.Seconds) > 1e-9 || math.Abs(l.FillRatio-l.Limit.Fill/l.Export.Fill) > 1e-9 ||
			math.Abs(l.TwoOverOne-l.Export.Seconds/l.Export2.Seconds) > 1e-9 {
			t.Errorf("%s: ratios %v, %v, %v", l.Chain, l.Ratio, l.FillRatio, l.TwoOverOne)
		}
	}
}

// checkStreams checks the streams section of a small run: every stream
// count exported the baseline's rows, the ratios are those of the rates,
// and on Linux every load's CPU was split with one figure per backend.
func checkStreams(t *testing.T, res Result) {
	t.Helper()
	st := res.Streams
	if st == nil {
		t.Fatal("no streams section")
	}
	if st.Chain != "cometbft" || st.Blocks != 300 || st.Rows == 0 || st.Baseline.Rows != st.Rows || len(st.Baseline.AllSeconds) != 2 {
		t.Errorf("streams: chain %s, %d blocks, %d rows, baseline %+v", st.Chain, st.Blocks, st.Rows, st.Baseline)
	}
	if len(st.Runs) != 3 {
		t.Fatalf("streams runs: %+v", st.Runs)
	}
	one := st.Runs[0].Export.RowsPerSec
	for i, r := range st.Runs {
		if want := []int{1, 2, 4}[i]; r.Streams != want {
			t.Errorf("run %d: %d streams, want %d", i, r.Streams, want)
		}
		if r.Export.Rows != st.Rows || r.Export.Blocks != st.Blocks || len(r.Export.AllSeconds) != 2 || r.Export.Seconds != slices.Min(r.Export.AllSeconds) {
			t.Errorf("%d streams: %+v", r.Streams, r.Export)
		}
		if math.Abs(r.OverOne-r.Export.RowsPerSec/one) > 1e-9 || math.Abs(r.OverBaseline-r.Export.RowsPerSec/st.Baseline.RowsPerSec) > 1e-9 {
			t.Errorf("%d streams: over one %v, over baseline %v for %v rows/s (one %v, baseline %v)", r.Streams, r.OverOne, r.OverBaseline, r.Export.RowsPerSec, one, st.Baseline.RowsPerSec)
		}
		if runtime.GOOS != "linux" {
			continue
		}
		c := r.CPU
		if !c.Known || len(c.PerBackend) != r.Streams || c.Backends <= 0 || c.Blockhaul <= 0 || c.Machine < c.Blockhaul || c.StateSamples == 0 {
			t.Errorf("%d streams: cpu %+v", r.Streams, c)
		}
		var share float64
		for _, v := range c.States {
			share += v
		}
		if math.Abs(share-1) > 1e-9 {
			t.Errorf("%d streams: state shares add up to %v: %v", r.Streams, share, c.States)
		}
	}
	if runtime.GOOS == "linux" {
		if c := st.BaselineCPU; !c.Known || len(c.PerBackend) != 1 || c.Backends <= 0 {
			t.Errorf("baseline cpu: %+v", c)
		}
		p := st.Projection
		r4 := st.Runs[2]
		if p == nil || p.Cores != 16 || p.FromStreams != 4 || p.PerStreamRowsPerSec != one || math.Abs(p.StreamsRowsPerSec-16*one) > 1e-6 ||
			math.Abs(p.BackendCPUPerRowMicros-1e6*r4.CPU.Backends/float64(r4.Export.Rows)) > 1e-9 ||
			math.Abs(p.CPURowsPerSec*(p.BackendCPUPerRowMicros+p.WritersCPUPerRowMicros)-16e6) > 1e-3 || p.BlockhaulCores <= 0 {
			t.Errorf("projection: %+v", p)
		}
	}
}

func TestRunWithoutFetchSourceReportsNotAvailable(t *testing.T) {
	cfg := smallConfig(t)
	cfg.Sections = []string{SectionFetch}
	cfg.FetchSource = nil
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Fetch == nil || res.Fetch.Blockhaul != nil || !strings.Contains(res.Fetch.Note, "not available") || res.Fetch.Minimal.BlocksPerSec <= 0 {
		t.Fatalf("fetch = %+v", res.Fetch)
	}
	if len(res.Densities) != 0 || len(res.Processes) != 0 {
		t.Errorf("sections not selected ran: %d densities, %d processes", len(res.Densities), len(res.Processes))
	}
	md := Markdown(res, "")
	if !strings.Contains(md, "not available") || !strings.Contains(md, "| fetch / minimal client | – |") {
		t.Errorf("markdown does not say fetch is not available:\n%s", md)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	cfg := Config{Sections: []string{"ingest"}, BatchBlocks: -1, FetchWorkers: -2, RangeSizes: []uint64{10, 0}}
	cfg.EnsureDefaults()
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"database URL", `unknown section "ingest"`, "batch blocks", "fetch workers", "range sizes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// BenchmarkRun runs the small configuration and reports its headline
// figures; `go run ./bench/cmd/bench` runs the full-size one.
func BenchmarkRun(b *testing.B) {
	cfg := smallConfig(b)
	var res Result
	for b.Loop() {
		var err error
		if res, err = Run(context.Background(), cfg); err != nil {
			b.Fatal(err)
		}
	}
	for _, d := range res.Densities {
		b.ReportMetric(d.Export.BlocksPerSec, d.Name+"-export-blocks/s")
		b.ReportMetric(d.Ratio, d.Name+"-export/baseline")
		b.ReportMetric(d.Ingest.BlocksPerSec, d.Name+"-ingest-blocks/s")
	}
	if res.Fetch != nil {
		b.ReportMetric(res.Fetch.Ratio, "fetch/minimal")
	}
	var peak int64
	for _, p := range res.Processes {
		peak = max(peak, p.PeakRSSBytes)
	}
	b.ReportMetric(float64(peak>>20), "peak-RSS-MiB")
}

// countKeys is how many of builds are primary keys (named <table>_pkey).
func countKeys(builds []IndexBuild) int {
	n := 0
	for _, b := range builds {
		if strings.HasSuffix(b.Name, "_pkey") {
			n++
		}
	}
	return n
}
