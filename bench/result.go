package bench

import (
	"fmt"
	"math"
	"time"
)

// Result is everything one run measured. It marshals to the JSON written by
// WriteFiles; durations are in seconds.
type Result struct {
	Date      time.Time       `json:"date"`
	Machine   Machine         `json:"machine"`
	CPU       CPUUsage        `json:"cpu"`
	Settings  Settings        `json:"settings"`
	Densities []DensityResult `json:"densities,omitempty"`
	Streams   *StreamsResult  `json:"streams,omitempty"`
	// Limits are the whole export against PostgreSQL's own restore of the
	// same end state, one per family (section limit).
	Limits []LimitResult `json:"limits,omitempty"`
	// Decoding is each family's export with and without the decoders a
	// user configures, each against raw COPY of its rows (section decoding).
	Decoding  []DecodingResult `json:"decoding,omitempty"`
	Fetch     *FetchResult     `json:"fetch,omitempty"`
	Processes []ProcessRun     `json:"processes,omitempty"`
	// HeadBackfill is the head and a backfill in one process vs two.
	HeadBackfill *HeadBackfillResult `json:"head_backfill,omitempty"`
	Targets      []Target            `json:"targets"`
	Seconds      float64             `json:"seconds"`
}

// Settings are the Config values a result depends on.
type Settings struct {
	Sections         []string `json:"sections"`
	Seed             int64    `json:"seed"`
	CometBFTBlocks   uint64   `json:"cometbft_blocks"`
	EVMBlocks        uint64   `json:"evm_blocks"`
	AptosBlocks      uint64   `json:"aptos_blocks,omitempty"`
	BatchBlocks      int      `json:"batch_blocks"`
	Rounds           int      `json:"rounds"`
	IngestWorkers    int      `json:"ingest_workers"`
	IngestSpan       int      `json:"ingest_span"`
	FetchBlocks      uint64   `json:"fetch_blocks"`
	FetchWorkers     int      `json:"fetch_workers"`
	FetchSpan        int      `json:"fetch_span"`
	RangeSizes       []uint64 `json:"range_sizes"`
	SampleMillis     int64    `json:"sample_ms"`
	StreamsChain     string   `json:"streams_chain,omitempty"`
	StreamsBlocks    uint64   `json:"streams_blocks,omitempty"`
	StreamCounts     []int    `json:"stream_counts,omitempty"`
	ProjectCores     int      `json:"project_cores,omitempty"`
	StateMillis      int64    `json:"state_ms,omitempty"`
	HeadBackfill     uint64   `json:"head_backfill_blocks,omitempty"`
	LimitCometBFT    uint64   `json:"limit_cometbft_blocks,omitempty"`
	LimitEVM         uint64   `json:"limit_evm_blocks,omitempty"`
	IndexWorkers     int      `json:"index_workers,omitempty"`
	IndexMemoryMiB   int64    `json:"index_memory_mib,omitempty"`
	DecodingCometBFT uint64   `json:"decoding_cometbft_blocks,omitempty"`
	DecodingEVM      uint64   `json:"decoding_evm_blocks,omitempty"`
}

func settingsOf(c *Config) Settings {
	return Settings{
		Sections: c.Sections, Seed: c.Seed,
		CometBFTBlocks: c.CometBFTBlocks, EVMBlocks: c.EVMBlocks, AptosBlocks: c.AptosBlocks, BatchBlocks: c.BatchBlocks, Rounds: c.Rounds,
		IngestWorkers: c.IngestWorkers, IngestSpan: c.IngestSpan,
		FetchBlocks: c.FetchBlocks, FetchWorkers: c.FetchWorkers, FetchSpan: c.FetchSpan,
		RangeSizes: c.RangeSizes, SampleMillis: c.SampleInterval.Milliseconds(),
		StreamsChain: c.StreamsChain.String(), StreamsBlocks: c.StreamsBlocks, StreamCounts: c.StreamCounts,
		ProjectCores: c.ProjectCores, StateMillis: c.StateInterval.Milliseconds(), HeadBackfill: c.HeadBackfillBlocks,
		LimitCometBFT: c.LimitCometBFTBlocks, LimitEVM: c.LimitEVMBlocks, IndexWorkers: c.IndexWorkers, IndexMemoryMiB: c.IndexMemoryMiB,
		DecodingCometBFT: c.DecodingCometBFTBlocks, DecodingEVM: c.DecodingEVMBlocks,
	}
}

// DensityResult is one workload's ingest, export and baseline.
type DensityResult struct {
	Name         string            `json:"name"`
	Blocks       uint64            `json:"blocks"`
	Rows         map[string]uint64 `json:"rows"` // per table
	RowsPerBlock float64           `json:"rows_per_block"`
	Ingest       IngestResult      `json:"ingest"`
	Export       CopyRun           `json:"export"`
	Baseline     CopyRun           `json:"baseline"`
	// Ratio is export's rate over the baseline's: the headline figure.
	Ratio float64 `json:"ratio"`
	// ExportCPU and BaselineCPU are where the CPU went in the best round
	// of each.
	ExportCPU   LoadCPU `json:"export_cpu"`
	BaselineCPU LoadCPU `json:"baseline_cpu"`
}

// DecodingResult is one family's staged range exported plain and decoded
// (see runDecoding), each against the raw-COPY baseline of its own rows.
type DecodingResult struct {
	Chain  string `json:"chain"`
	Blocks uint64 `json:"blocks"`
	// Decoding says what the decoded load decodes that the plain one keeps
	// raw or leaves out.
	Decoding string       `json:"decoding"`
	Plain    DecodingLoad `json:"plain"`
	Decoded  DecodingLoad `json:"decoded"`
	// Filled is what decoding fills, counted in the first batch.
	Filled []Filled `json:"filled"`
}

// DecodingLoad is one decoder's export and baseline: the best round of each.
type DecodingLoad struct {
	Name     string            `json:"name"`
	Rows     map[string]uint64 `json:"rows"` // per table
	Export   CopyRun           `json:"export"`
	Baseline CopyRun           `json:"baseline"`
	// Ratio is export's rate over the baseline's (the same rows): the
	// issue's measure, ≥ 0.8 decoded.
	Ratio       float64 `json:"ratio"`
	ExportCPU   LoadCPU `json:"export_cpu"`
	BaselineCPU LoadCPU `json:"baseline_cpu"`
}

// BlockhaulMicrosPerRow is this process's CPU per row exporting (export)
// or COPYing (the baseline); 0 where the CPU is not known.
func (l DecodingLoad) BlockhaulMicrosPerRow(export bool) float64 {
	run, cpu := l.Baseline, l.BaselineCPU
	if export {
		run, cpu = l.Export, l.ExportCPU
	}
	if !cpu.Known || run.Rows == 0 {
		return 0
	}
	return 1e6 * cpu.Blockhaul / float64(run.Rows)
}

// Filled is what a decoder fills that the plain decoder does not, in the
// first Blocks blocks: Values of Column (NULL in the plain rows) in a table
// of Rows rows, or, with no Column, the Rows of a table only it has.
type Filled struct {
	Blocks uint64 `json:"blocks"`
	Table  string `json:"table"`
	Column string `json:"column,omitempty"`
	Rows   uint64 `json:"rows"`
	Values uint64 `json:"values"`
}

// LimitResult is one family's whole export (defer, fill, build, ANALYZE),
// with one and two streams, against PostgreSQL's restore of the same rows,
// indexes and statistics (see runLimit).
type LimitResult struct {
	Chain  string `json:"chain"`
	Blocks uint64 `json:"blocks"`
	Rows   uint64 `json:"rows"`
	// Export and Export2 are `blockhaul export --export-streams 1` and 2;
	// Limit is dump → pre-data → COPY in one transaction → post-data →
	// ANALYZE. The fastest round of each.
	Export  PhaseRun `json:"export"`
	Export2 PhaseRun `json:"export_2_streams"`
	Limit   PhaseRun `json:"limit"`
	// Ratio is the limit's time over export's (like for like, the
	// headline), FillRatio the limit's COPY over export's fill (no index
	// build, no ANALYZE on either side), TwoOverOne one stream's time
	// over two streams'.
	Ratio      float64 `json:"ratio"`
	FillRatio  float64 `json:"fill_ratio"`
	TwoOverOne float64 `json:"two_over_one"`
}

// PhaseRun is one whole load and its phases, in seconds: Fill is the rows'
// COPY (export: its fill, its primary keys deferred as a fresh fill's are;
// the limit: the one transaction, without them), Indexes the index builds
// (export: the deferred builds, the GIN and GiST indexes first, then the
// primary keys, and the little setup around them, the rest of its time;
// the limit: post-data, primary keys included), Analyze the ANALYZE of the
// tables after the builds. AnalyzeBeside is the time of the ANALYZEs export ran
// beside its builds (inside Indexes), each once its table's indexes were
// built.
type PhaseRun struct {
	Rows    uint64  `json:"rows"`
	Seconds float64 `json:"seconds"`
	Fill    float64 `json:"fill_s"`
	Indexes float64 `json:"indexes_s"`
	Analyze float64 `json:"analyze_s"`
	// AnalyzeBeside overlaps Indexes: not part of Seconds on its own.
	AnalyzeBeside float64      `json:"analyze_beside_s,omitempty"`
	Builds        []IndexBuild `json:"builds,omitempty"`
	// IndexWorkers is how many of Builds an export ran at once, and
	// IndexWorkersWhy why (its --index-workers, resolved); 0 for the limit,
	// which builds one after another.
	IndexWorkers    int       `json:"index_workers,omitempty"`
	IndexWorkersWhy string    `json:"index_workers_why,omitempty"`
	AllSeconds      []float64 `json:"all_seconds"`
}

// IndexBuild is one index's (or key's) build time.
type IndexBuild struct {
	Name    string  `json:"name"`
	Table   string  `json:"table"`
	Seconds float64 `json:"seconds"`
}

// IngestResult is a synthetic source staged by the loader, flush included.
type IngestResult struct {
	Blocks         uint64  `json:"blocks"`
	Seconds        float64 `json:"seconds"`
	BlocksPerSec   float64 `json:"blocks_per_s"`
	RawBytes       int64   `json:"raw_bytes"`
	StoredBytes    int64   `json:"stored_bytes"`
	RawMBPerSec    float64 `json:"raw_mb_per_s"`
	StoredMBPerSec float64 `json:"stored_mb_per_s"`
	// Ratio is raw bytes over stored bytes (compressed records and headers).
	Ratio     float64 `json:"ratio"`
	DiskBytes uint64  `json:"disk_bytes"`
	// SourceBlocksPerSec is the synthetic source alone, at the same
	// concurrency, writing nothing: the ceiling the generator sets.
	SourceBlocksPerSec float64 `json:"source_blocks_per_s"`
}

// CopyRun is one load into PostgreSQL: export or the baseline.
type CopyRun struct {
	Blocks       uint64  `json:"blocks"`
	Rows         uint64  `json:"rows"`
	Batches      int     `json:"batches"`
	Seconds      float64 `json:"seconds"`
	BlocksPerSec float64 `json:"blocks_per_s"`
	RowsPerSec   float64 `json:"rows_per_s"`
	// AllSeconds are the times of every round; the figures above are the
	// best round's.
	AllSeconds []float64 `json:"all_seconds"`
	// Samples are the progress every Config.SampleInterval, Commits at
	// every committed batch, of the best round.
	Samples []Sample `json:"samples,omitempty"`
	Commits []Sample `json:"commits,omitempty"`
}

// Sample is the progress of a load at one moment: cumulative counts.
type Sample struct {
	Seconds float64 `json:"t"`
	Blocks  uint64  `json:"blocks"`
	Rows    uint64  `json:"rows"`
}

// StreamsResult is one staged range exported with several stream counts
// and COPYed by the baseline, in one run.
type StreamsResult struct {
	Chain    string  `json:"chain"`
	Blocks   uint64  `json:"blocks"`
	Rows     uint64  `json:"rows"`
	Baseline CopyRun `json:"baseline"`
	// BaselineCPU is the best baseline round's.
	BaselineCPU LoadCPU      `json:"baseline_cpu"`
	Runs        []StreamsRun `json:"runs"`
	Projection  *Projection  `json:"projection,omitempty"`
}

// StreamsRun is export with one stream count.
type StreamsRun struct {
	Streams int     `json:"streams"`
	Export  CopyRun `json:"export"`
	// OverOne is the rate over the one-stream rate, OverBaseline over the
	// raw-COPY baseline's (one connection).
	OverOne      float64 `json:"over_one_stream"`
	OverBaseline float64 `json:"over_baseline"`
	// CPU is the best round's.
	CPU LoadCPU `json:"cpu"`
}

// Projection is the streams section's figures carried to a database
// server of Cores cores running Streams streams (see project).
type Projection struct {
	Cores   int `json:"cores"`
	Streams int `json:"streams"`
	// PerStreamRowsPerSec is the one-stream rate measured here, and
	// StreamsRowsPerSec Streams times it.
	PerStreamRowsPerSec float64 `json:"per_stream_rows_per_s"`
	StreamsRowsPerSec   float64 `json:"streams_rows_per_s"`
	// The CPU per row of the load with FromStreams streams.
	FromStreams              int     `json:"from_streams"`
	BackendCPUPerRowMicros   float64 `json:"backend_cpu_us_per_row"`
	WritersCPUPerRowMicros   float64 `json:"writers_cpu_us_per_row"`
	BlockhaulCPUPerRowMicros float64 `json:"blockhaul_cpu_us_per_row"`
	// CPURowsPerSec is the server's cores at the PostgreSQL CPU per row,
	// CPUOverOneStream that over the one-stream rate, and BlockhaulCores
	// the blockhaul CPU it takes, in cores.
	CPURowsPerSec    float64 `json:"cpu_rows_per_s"`
	CPUOverOneStream float64 `json:"cpu_over_one_stream"`
	BlockhaulCores   float64 `json:"blockhaul_cores"`
}

// HeadBackfillResult is [1, Blocks] loaded as a head stream from HeadFrom
// and a backfill below it, in one process and in two at once.
type HeadBackfillResult struct {
	Blocks       uint64          `json:"blocks"`
	HeadFrom     uint64          `json:"head_from"`
	Rows         uint64          `json:"rows"`
	OneProcess   HeadBackfillRun `json:"one_process"`
	TwoProcesses HeadBackfillRun `json:"two_processes"`
	// TwoOverOne is the two processes' time over the one process's: above
	// 1, one process is faster.
	TwoOverOne float64 `json:"two_over_one"`
}

// HeadBackfillRun is one way of running the head and the backfill: the
// wall time until every process exited, their CPU time (user+sys) and the
// sum of their peak RSS, of the fastest round.
type HeadBackfillRun struct {
	Processes    int       `json:"processes"`
	Seconds      float64   `json:"seconds"`
	CPUSeconds   float64   `json:"cpu_s"`
	PeakRSSBytes int64     `json:"peak_rss_bytes"`
	Rows         uint64    `json:"rows"`
	AllSeconds   []float64 `json:"all_seconds"`
}

// ProcessRun is one `blockhaul run` process over a range of synthetic
// CometBFT blocks into a fresh database.
type ProcessRun struct {
	Blocks         uint64  `json:"blocks"`
	Seconds        float64 `json:"seconds"`
	MicrosPerBlock float64 `json:"us_per_block"`
	Rows           uint64  `json:"rows"`
	MicrosPerRow   float64 `json:"us_per_row"`
	// AllSeconds is the time of every run of this size; the fields above
	// describe the fastest.
	AllSeconds []float64 `json:"all_seconds,omitempty"`
	// PeakRSSBytes is the process's peak resident set, the best of the
	// three figures below (see peakRSS), the highest over the runs.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// KernelMaxRSSBytes is wait4's ru_maxrss; SpawnerHWMBytes the
	// benchmark's own peak when it started the process, below which the
	// kernel's figure says nothing; PolledHWMBytes the process's VmHWM
	// read every 100ms while it ran.
	KernelMaxRSSBytes int64 `json:"kernel_maxrss_bytes"`
	SpawnerHWMBytes   int64 `json:"spawner_hwm_bytes"`
	PolledHWMBytes    int64 `json:"polled_hwm_bytes"`
}

// Target is one goal of the issue checked against this run.
type Target struct {
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Op       string  `json:"op"` // ">=" or "<="
	Limit    float64 `json:"limit"`
	Unit     string  `json:"unit,omitempty"`
	Measured bool    `json:"measured"` // false: the section did not run
	Pass     bool    `json:"pass"`
}

func (t Target) String() string {
	if !t.Measured {
		return fmt.Sprintf("%s: not measured", t.Name)
	}
	verdict := "FAIL"
	if t.Pass {
		verdict = "ok"
	}
	return fmt.Sprintf("%s: %s %s %s%s (%s)", t.Name, fmtNum(t.Value), opSign(t.Op), fmtNum(t.Limit), t.Unit, verdict)
}

func opSign(op string) string {
	if op == ">=" {
		return "≥"
	}
	return "≤"
}

func target(name string, value float64, op string, limit float64, unit string) Target {
	t := Target{Name: name, Value: value, Op: op, Limit: limit, Unit: unit, Measured: true}
	if op == ">=" {
		t.Pass = value >= limit
	} else {
		t.Pass = value <= limit
	}
	return t
}

func unmeasured(name, op string, limit float64, unit string) Target {
	return Target{Name: name, Op: op, Limit: limit, Unit: unit}
}

// perFamily is a target for each family ("name, family"): its value in
// values, or not measured where values has none.
func perFamily(name string, values map[string]float64, op string, limit float64, unit string) []Target {
	var ts []Target
	for _, f := range []string{SectionCometBFT, SectionEVM} {
		if v, ok := values[f]; ok {
			ts = append(ts, target(name+", "+f, v, op, limit, unit))
		} else {
			ts = append(ts, unmeasured(name+", "+f, op, limit, unit))
		}
	}
	return ts
}

// evaluateTargets checks the targets, each a ratio or a rate from
// this one run.
func evaluateTargets(r *Result) []Target {
	var ts []Target
	byName := map[string]*DensityResult{}
	baseline, ingest := map[string]float64{}, map[string]float64{}
	for i, d := range r.Densities {
		byName[d.Name] = &r.Densities[i]
		baseline[d.Name] = d.Ratio
		if d.Export.BlocksPerSec > 0 {
			ingest[d.Name] = d.Ingest.BlocksPerSec / d.Export.BlocksPerSec
		}
	}
	ts = append(ts, perFamily("export / COPY baseline", baseline, ">=", 0.90, "")...)
	if d := byName[SectionCometBFT]; d != nil {
		ts = append(ts, target("export rate, cometbft", d.Export.BlocksPerSec, ">=", 3000, " blocks/s"))
	} else {
		ts = append(ts, unmeasured("export rate, cometbft", ">=", 3000, " blocks/s"))
	}
	ts = append(ts, perFamily("staging ingest / export", ingest, ">=", 5, "×")...)
	if st := r.Streams; st != nil && streamsRun(st, 2) != nil {
		ts = append(ts, target("export, 2 streams / 1 stream, "+st.Chain, streamsRun(st, 2).OverOne, ">=", 1.20, "×"))
	} else {
		ts = append(ts, unmeasured("export, 2 streams / 1 stream", ">=", 1.20, "×"))
	}
	limits, likeForLike := map[string]*LimitResult{}, map[string]float64{}
	for i, l := range r.Limits {
		limits[l.Chain] = &r.Limits[i]
		likeForLike[l.Chain] = l.Ratio
	}
	ts = append(ts, perFamily("export / restore, like for like", likeForLike, ">=", 0.90, "")...)
	decoded := map[string]float64{}
	for _, d := range r.Decoding {
		decoded[d.Chain] = d.Decoded.Ratio
	}
	ts = append(ts, perFamily("export / COPY baseline, decoded", decoded, ">=", 0.80, "")...)
	if l := limits[SectionCometBFT]; l != nil {
		ts = append(ts, target(fmt.Sprintf("whole export, 2 streams / 1 stream, cometbft %d blocks", l.Blocks), l.TwoOverOne, ">=", 1.20, "×"))
	} else {
		ts = append(ts, unmeasured("whole export, 2 streams / 1 stream, cometbft", ">=", 1.20, "×"))
	}
	if f := r.Fetch; f != nil && f.Blockhaul != nil {
		ts = append(ts, target("fetch / minimal client", f.Ratio, ">=", 0.90, ""))
	} else {
		ts = append(ts, unmeasured("fetch / minimal client", ">=", 0.90, ""))
	}
	if len(r.Processes) >= 2 {
		var peak int64
		for _, p := range r.Processes {
			peak = max(peak, p.PeakRSSBytes)
		}
		ts = append(ts, target("peak RSS, every run", float64(peak)/(1<<20), "<=", 512, " MiB"))
		small, large := smallestLargest(r.Processes)
		name := fmt.Sprintf("peak RSS change, %d → %d blocks", small.Blocks, large.Blocks)
		if small.PeakRSSBytes > 0 && large.PeakRSSBytes > 0 {
			ts = append(ts, target(name, relChange(float64(small.PeakRSSBytes), float64(large.PeakRSSBytes)), "<=", 0.10, ""))
		} else {
			ts = append(ts, unmeasured(name, "<=", 0.10, "")) // no rusage on this OS
		}
		lo, hi := math.Inf(1), 0.0
		for _, p := range r.Processes {
			lo, hi = min(lo, p.MicrosPerBlock), max(hi, p.MicrosPerBlock)
		}
		ts = append(ts, target("time per block spread across sizes", relChange(lo, hi), "<=", 0.10, ""))
		lo, hi = math.Inf(1), 0.0
		for _, p := range r.Processes {
			lo, hi = min(lo, p.MicrosPerRow), max(hi, p.MicrosPerRow)
		}
		ts = append(ts, target("time per row spread across sizes", relChange(lo, hi), "<=", 0.10, ""))
	} else {
		ts = append(ts,
			unmeasured("peak RSS, every run", "<=", 512, " MiB"),
			unmeasured("peak RSS change, smallest → largest run", "<=", 0.10, ""),
			unmeasured("time per block spread across sizes", "<=", 0.10, ""))
	}
	return ts
}

func smallestLargest(ps []ProcessRun) (small, large ProcessRun) {
	small, large = ps[0], ps[0]
	for _, p := range ps[1:] {
		if p.Blocks < small.Blocks {
			small = p
		}
		if p.Blocks > large.Blocks {
			large = p
		}
	}
	return small, large
}

// relChange is |b-a| relative to the smaller of the two, both positive.
func relChange(a, b float64) float64 {
	lo := min(a, b)
	if lo <= 0 {
		return math.MaxFloat64 // keeps the JSON encodable, fails any limit
	}
	return math.Abs(b-a) / lo
}

// streamsRun is the run with n streams, nil when n was not measured.
func streamsRun(st *StreamsResult, n int) *StreamsRun {
	for i := range st.Runs {
		if st.Runs[i].Streams == n {
			return &st.Runs[i]
		}
	}
	return nil
}
