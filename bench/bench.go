// Package bench measures blockhaul on the machine it runs on, every figure
// beside the limit it is judged against, in one run:
//
//   - staging ingest: a synthetic source into staging (blocks/s, MB/s raw
//     and stored, compression ratio) at CometBFT and EVM density;
//   - export: staging into PostgreSQL, against a baseline that COPYs the
//     very same rows, already decoded, into identical empty tables;
//   - fetch: blockhaul's fetch against a minimal client, at the same
//     concurrency, on a local server that answers as fast as it can;
//   - memory and scaling: peak RSS and time per block of a separate
//     `blockhaul run` process at several range sizes.
//
// The command bench/cmd/bench and `go test -bench` both call Run; WriteFiles
// turns a Result into JSON, a Markdown table and SVG plots.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/loader"
)

// Sections of a run, selectable with Config.Sections.
const (
	SectionCometBFT = "cometbft" // ingest, export and baseline at CometBFT density
	SectionEVM      = "evm"      // ingest, export and baseline at EVM density
	SectionAptos    = "aptos"    // ingest, export and baseline at Aptos density
	SectionFetch    = "fetch"    // fetch vs the minimal client
	SectionProcess  = "process"  // memory and scaling of a blockhaul process
	SectionStreams  = "streams"  // export with 1, 2, 4 streams of one staged range, beside the baseline
	// SectionHeadBackfill: the head and a backfill in one process vs two.
	SectionHeadBackfill = "headbackfill"
	// SectionLimit: the whole export (1 and 2 streams) against PostgreSQL's
	// restore of the same end state, both families.
	SectionLimit = "limit"
	// SectionDecoding: export with and without decoding (Cosmos messages,
	// an ABI of EVM events), each against raw COPY of its rows.
	SectionDecoding = "decoding"
)

// AllSections is the default selection, in the order of the report (the
// process section runs first; see Run).
var AllSections = []string{SectionCometBFT, SectionEVM, SectionAptos, SectionDecoding, SectionLimit, SectionStreams, SectionFetch, SectionProcess, SectionHeadBackfill}

// Config configures a benchmark run. Zero fields take the defaults named in
// their comments (EnsureDefaults); the defaults keep a whole run under about
// five minutes on two cores.
type Config struct {
	// DatabaseURL is the PostgreSQL server. Every measurement creates a
	// database of its own on it and drops it afterwards. Required.
	DatabaseURL string
	// Sections selects what to measure. Default AllSections.
	Sections []string
	// Seed selects the synthetic chains. Default 1.
	Seed int64

	// CometBFTBlocks, EVMBlocks and AptosBlocks are the blocks staged,
	// exported and COPYed by the baseline at each density. Defaults 20,000,
	// 2,000 and 5,000.
	CometBFTBlocks uint64
	EVMBlocks      uint64
	AptosBlocks    uint64
	// RawMessages exports Cosmos messages without decoding them (their
	// decoded JSON NULL), to measure what decoding costs (docs/messages.md).
	RawMessages bool
	// BatchBlocks is the export batch (one transaction), used by the
	// baseline too. Default 500, the CLI's.
	BatchBlocks int
	// Rounds is how many times export and baseline each run, alternating
	// which goes first, and how many times each range size of the process
	// section runs; the best round of each is reported. Default 2.
	Rounds int
	// IngestWorkers and IngestSpan configure the loader for ingest.
	// Defaults 8 and 16, the CLI's.
	IngestWorkers, IngestSpan int

	// FetchChain is the family the fetch section serves. Default CometBFT.
	FetchChain chain.Family
	// FetchBlocks is the range the fetch server serves (its responses are
	// held in memory: ~30 KB a CometBFT block). Default 20,000.
	FetchBlocks uint64
	// FetchWorkers and FetchSpan are the concurrency and heights per
	// request of both fetch clients. Defaults 8 and 16, the CLI's.
	FetchWorkers, FetchSpan int
	// FetchSource builds blockhaul's RPC source for an endpoint. Nil
	// reports blockhaul's side of the fetch section as not available.
	FetchSource func(endpoint string) (loader.Source, error)

	// RangeSizes are the ranges of the `blockhaul run` processes, in
	// CometBFT blocks. Memory compares the smallest and the largest;
	// scaling compares all. Default 10,000, 30,000, 100,000.
	RangeSizes []uint64
	// Blockhaul is the blockhaul binary those processes run. Empty builds
	// one from this module into WorkDir.
	Blockhaul string

	// StreamsChain is the family of the streams section's workload, and
	// StreamsBlocks its range. Defaults CometBFT and CometBFTBlocks.
	StreamsChain  chain.Family
	StreamsBlocks uint64
	// StreamCounts are the export streams measured, each on the same
	// staged range. Default 1, 2, 4; 1 is always measured (the others'
	// ratios are to it).
	StreamCounts []int
	// ProjectCores is the database server the streams section projects
	// its rates to (one stream per core). Default 16; negative: none.
	ProjectCores int
	// HeadBackfillBlocks is the range of the headbackfill section, in
	// CometBFT blocks: the head stream exports its upper half, the
	// backfill the lower. Default 20,000.
	HeadBackfillBlocks uint64

	// DecodingCometBFTBlocks and DecodingEVMBlocks are the ranges of the
	// decoding section: each staged once and exported and COPYed plain and
	// decoded. Defaults 10,000 and 1,000.
	DecodingCometBFTBlocks, DecodingEVMBlocks uint64

	// LimitCometBFTBlocks and LimitEVMBlocks are the ranges of the limit
	// section: exported whole with 1 and 2 streams and restored by
	// PostgreSQL. Defaults 60,000 and 6,000.
	LimitCometBFTBlocks, LimitEVMBlocks uint64
	// IndexWorkers is the limit section's exports' --index-workers. 0:
	// the command's default.
	IndexWorkers int
	// IndexMemoryMiB is the maintenance_work_mem of each deferred index
	// build of the limit section's exports (pipeline's IndexMemoryMiB,
	// --index-memory): -1 export's default, 0 the server's; the limit
	// keeps the server's, as a restore does.
	IndexMemoryMiB int64

	// StateInterval is the period of the pg_stat_activity samples of the
	// streams section's backends. Default 100ms.
	StateInterval time.Duration

	// SampleInterval is the period of the throughput samples. Default 250ms.
	SampleInterval time.Duration
	// WorkDir holds staging stores and the built binary. Default: the
	// system's temporary directory.
	WorkDir string
	// CPUProfileDir, if set, receives a CPU profile of each in-process
	// section (ingest-*, export-*, baseline-*, fetch-blockhaul).pprof; of
	// export and baseline, the first round's.
	CPUProfileDir string
	// Logger receives progress. Default: discard.
	Logger *slog.Logger
}

// EnsureDefaults fills unset fields.
func (c *Config) EnsureDefaults() {
	if len(c.Sections) == 0 {
		c.Sections = slices.Clone(AllSections)
	}
	c.Seed = cmp.Or(c.Seed, 1)
	c.CometBFTBlocks = cmp.Or(c.CometBFTBlocks, 20_000)
	c.EVMBlocks = cmp.Or(c.EVMBlocks, 2_000)
	c.AptosBlocks = cmp.Or(c.AptosBlocks, 5_000)
	c.BatchBlocks = cmp.Or(c.BatchBlocks, 500)
	c.Rounds = cmp.Or(c.Rounds, 2)
	c.IngestWorkers = cmp.Or(c.IngestWorkers, 8)
	c.IngestSpan = cmp.Or(c.IngestSpan, 16)
	if c.FetchChain == chain.FamilyUnknown {
		c.FetchChain = family.Default.ID
	}
	c.FetchBlocks = cmp.Or(c.FetchBlocks, 20_000)
	c.FetchWorkers = cmp.Or(c.FetchWorkers, 8)
	c.FetchSpan = cmp.Or(c.FetchSpan, 16)
	if len(c.RangeSizes) == 0 {
		c.RangeSizes = []uint64{10_000, 30_000, 100_000}
	}
	if c.StreamsChain == chain.FamilyUnknown {
		c.StreamsChain = family.Default.ID
	}
	if f := family.Of(c.StreamsChain); c.StreamsBlocks == 0 && f != nil {
		c.StreamsBlocks = c.familyBlocks()[f.Name]
	}
	if len(c.StreamCounts) == 0 {
		c.StreamCounts = []int{1, 2, 4}
	}
	if !slices.Contains(c.StreamCounts, 1) {
		c.StreamCounts = append([]int{1}, c.StreamCounts...)
	}
	c.ProjectCores = cmp.Or(c.ProjectCores, 16)
	c.HeadBackfillBlocks = cmp.Or(c.HeadBackfillBlocks, 20_000)
	c.DecodingCometBFTBlocks = cmp.Or(c.DecodingCometBFTBlocks, 10_000)
	c.DecodingEVMBlocks = cmp.Or(c.DecodingEVMBlocks, 1_000)
	c.LimitCometBFTBlocks = cmp.Or(c.LimitCometBFTBlocks, 60_000)
	c.LimitEVMBlocks = cmp.Or(c.LimitEVMBlocks, 6_000)
	c.StateInterval = cmp.Or(c.StateInterval, 100*time.Millisecond)
	c.SampleInterval = cmp.Or(c.SampleInterval, 250*time.Millisecond)
	c.WorkDir = cmp.Or(c.WorkDir, os.TempDir())
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid field at once.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("bench: "+format, args...)) }
	if c.DatabaseURL == "" {
		bad("no database URL (set DATABASE_URL)")
	}
	for _, s := range c.Sections {
		if !slices.Contains(AllSections, s) {
			bad("unknown section %q (want %v)", s, AllSections)
		}
	}
	if c.BatchBlocks < 0 {
		bad("batch blocks must be positive, got %d", c.BatchBlocks)
	}
	if c.Rounds < 0 {
		bad("rounds must be positive, got %d", c.Rounds)
	}
	if c.IngestWorkers < 0 || c.IngestSpan < 0 {
		bad("ingest workers and span must be positive, got %d and %d", c.IngestWorkers, c.IngestSpan)
	}
	if c.FetchWorkers < 0 || c.FetchSpan < 0 {
		bad("fetch workers and span must be positive, got %d and %d", c.FetchWorkers, c.FetchSpan)
	}
	if c.FetchChain != chain.FamilyUnknown && family.Of(c.FetchChain) == nil {
		bad("fetch chain %s is not a known family", c.FetchChain)
	}
	for _, n := range c.RangeSizes {
		if n == 0 {
			bad("range sizes must be positive, got %v", c.RangeSizes)
			break
		}
	}
	if family.Of(c.StreamsChain) == nil {
		bad("streams chain %s is not a known family", c.StreamsChain)
	}
	for _, n := range c.StreamCounts {
		if n < 1 || n > 64 {
			bad("stream counts must be between 1 and 64, got %v", c.StreamCounts)
			break
		}
	}
	if c.IndexWorkers < 0 {
		bad("index workers must be positive, got %d", c.IndexWorkers)
	}
	if c.IndexMemoryMiB < -1 {
		bad("index memory must be -1 (export's default), 0 (the server's) or a size in MiB, got %d", c.IndexMemoryMiB)
	}
	if c.HeadBackfillBlocks == 1 {
		bad("head and backfill blocks must be at least 2, got %d", c.HeadBackfillBlocks)
	}
	if c.StateInterval < 0 {
		bad("state interval must be positive, got %s", c.StateInterval)
	}
	if c.SampleInterval < 0 {
		bad("sample interval must be positive, got %s", c.SampleInterval)
	}
	return errors.Join(errs...)
}

func (c *Config) runs(section string) bool { return slices.Contains(c.Sections, section) }

// Run measures every selected section, one after the other so that none
// competes with another for the machine, and evaluates the targets.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	cpu0 := takeCPUSnapshot()
	res := Result{Date: start.UTC(), Settings: settingsOf(&cfg)}
	var err error
	res.Machine, err = machineInfo(ctx, cfg.DatabaseURL)
	if err != nil {
		return res, err
	}
	cfg.Logger.Info("machine", "host", res.Machine.Host, "cpus", res.Machine.CPUs, "cpu", res.Machine.CPUModel, "postgres", res.Machine.PostgreSQL)
	if cfg.CPUProfileDir != "" {
		if err := os.MkdirAll(cfg.CPUProfileDir, 0o755); err != nil {
			return res, fmt.Errorf("bench: profile directory: %w", err)
		}
	}
	// The processes run first, while this process is still small: a child's
	// peak RSS as the kernel reports it cannot be lower than the peak of the
	// process that started it (see peakRSS).
	if cfg.runs(SectionProcess) {
		if res.Processes, err = runProcesses(ctx, &cfg); err != nil {
			return res, err
		}
	}
	if cfg.runs(SectionHeadBackfill) {
		if res.HeadBackfill, err = runHeadBackfill(ctx, &cfg); err != nil {
			return res, err
		}
	}
	for _, d := range densities(&cfg) {
		if !cfg.runs(d.name) {
			continue
		}
		dr, err := runDensity(ctx, &cfg, d)
		if err != nil {
			return res, err
		}
		res.Densities = append(res.Densities, dr)
	}
	if cfg.runs(SectionDecoding) {
		if res.Decoding, err = runDecoding(ctx, &cfg); err != nil {
			return res, err
		}
	}
	if cfg.runs(SectionLimit) {
		for _, d := range densities(&cfg) {
			lr, err := runLimit(ctx, &cfg, limitDensity(&cfg, d))
			if err != nil {
				return res, err
			}
			res.Limits = append(res.Limits, lr)
		}
	}
	if cfg.runs(SectionStreams) {
		if res.Streams, err = runStreams(ctx, &cfg); err != nil {
			return res, err
		}
	}
	if cfg.runs(SectionFetch) {
		if res.Fetch, err = runFetch(ctx, &cfg); err != nil {
			return res, err
		}
	}
	res.CPU = cpuUsage(cpu0, takeCPUSnapshot(), res.Machine.CPUs)
	if res.CPU.Busy() {
		cfg.Logger.Warn("other work used the machine during the run; figures are not representative",
			"other_cpu_share", round2(res.CPU.OtherShare()))
	}
	res.Targets = evaluateTargets(&res)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// density is one workload: a family's synthetic chain and its decoder.
type density struct {
	name   string // the section's, the family's name
	fam    *family.Family
	blocks uint64
	source loader.Source
	dec    export.Decoder
}

// familyBlocks are the ranges of the sections named after families, by
// family name.
func (c *Config) familyBlocks() map[string]uint64 {
	return map[string]uint64{SectionCometBFT: c.CometBFTBlocks, SectionEVM: c.EVMBlocks, SectionAptos: c.AptosBlocks}
}

// decoderOptions are the options of the sections' decoders.
func (c *Config) decoderOptions() family.DecoderOptions {
	if c.RawMessages {
		return family.DecoderOptions{Messages: family.NoMessageTypes()}
	}
	return family.DecoderOptions{}
}

// densities are the workloads of the sections named after families.
func densities(cfg *Config) []density {
	var out []density
	for _, f := range family.All() {
		if n, ok := cfg.familyBlocks()[f.Name]; ok {
			out = append(out, density{f.Name, f, n, newSynthetic(f.ID, cfg.Seed), f.NewDecoder(cfg.decoderOptions())})
		}
	}
	return out
}

// newSynthetic returns the synthetic chain of fam (a registered family) at
// its default density (family.Family.SyntheticDensity).
func newSynthetic(fam chain.Family, seed int64) loader.Source {
	src, err := family.Of(fam).Source(family.SourceSynthetic, family.SourceOptions{Synthetic: family.SyntheticOptions{Seed: seed}})
	if err != nil {
		panic(err) // every family has a synthetic chain
	}
	return src
}

func startProfileIf(on bool, cfg *Config, section string) (stop func(), err error) {
	if !on {
		return func() {}, nil
	}
	return startProfile(cfg, section)
}

// startProfile starts a CPU profile of one section when profiling is on;
// the returned stop writes it.
func startProfile(cfg *Config, section string) (stop func(), err error) {
	if cfg.CPUProfileDir == "" {
		return func() {}, nil
	}
	path := filepath.Join(cfg.CPUProfileDir, section+".pprof")
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: cpu profile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func perSec(n uint64, sec float64) float64 {
	if sec <= 0 {
		return 0
	}
	return float64(n) / sec
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// settle collects the garbage of the previous section so that it is not
// charged to the next one.
func settle() {
	runtime.GC()
	runtime.GC()
}
