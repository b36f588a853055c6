// Command bench runs blockhaul's benchmark (package bench) against the
// PostgreSQL server of $DATABASE_URL, prints the result table and writes
// the result files:
//
//	go run ./bench/cmd/bench -out bench/results
//
// Flags set the sizes; -cpuprofile DIR writes a CPU profile of each
// in-process section, for `go tool pprof -top DIR/export-cometbft.pprof`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/blockhaul/blockhaul/bench"
	"github.com/blockhaul/blockhaul/family"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	c := defineFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := c.resolve(); err != nil {
		return err
	}
	cfg := c.cfg
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Println(bench.Markdown(res, ""))
	if c.out != "" {
		write := bench.WriteFiles
		if !c.latest {
			write = bench.WriteDatedFiles
		}
		paths, err := write(c.out, res)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintln(os.Stderr, "wrote", p)
		}
	}
	if c.out != "" && c.latest && c.rates != "" {
		// The estimate's rates follow latest.*: a run of some sections
		// does not replace them.
		if err := bench.WriteRates(c.rates, res); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", c.rates)
	}
	return nil
}

// cliFlags are the command's flags: the bench's Config and the values that
// become parts of it.
type cliFlags struct {
	cfg                                                                         bench.Config
	out, rates, sections, sizes, fetchChain, fetchSource, streamsChain, streams string
	latest                                                                      bool
}

func defineFlags(fs *flag.FlagSet) *cliFlags {
	c := &cliFlags{}
	fs.StringVar(&c.out, "out", "bench/results", "directory for the result files (empty: print only)")
	fs.StringVar(&c.rates, "rates", bench.RatesFile, "file for the estimate's rates, with latest.* (empty: none); estimate embeds archive/rates.json")
	fs.BoolVar(&c.latest, "latest", true, "also write the results as latest.* (false: only the dated files, for a run of some sections)")
	fs.StringVar(&c.cfg.DatabaseURL, "db", os.Getenv("DATABASE_URL"), "PostgreSQL server URL (default $DATABASE_URL)")
	fs.StringVar(&c.sections, "sections", strings.Join(bench.AllSections, ","), "sections to run, comma separated")
	fs.Int64Var(&c.cfg.Seed, "seed", 1, "seed of the synthetic chains")
	fs.Uint64Var(&c.cfg.CometBFTBlocks, "cometbft-blocks", 20_000, "blocks staged and exported at CometBFT density")
	fs.Uint64Var(&c.cfg.EVMBlocks, "evm-blocks", 2_000, "blocks staged and exported at EVM density")
	fs.Uint64Var(&c.cfg.AptosBlocks, "aptos-blocks", 5_000, "blocks staged and exported at Aptos density")
	fs.BoolVar(&c.cfg.RawMessages, "raw-messages", false, "export Cosmos messages without decoding them (the cost of messages.decoded)")
	fs.IntVar(&c.cfg.BatchBlocks, "batch-blocks", 500, "blocks per export transaction (baseline too)")
	fs.IntVar(&c.cfg.Rounds, "rounds", 2, "runs of export and of the baseline (alternating), and of each range size; the best counts")
	fs.IntVar(&c.cfg.IngestWorkers, "ingest-workers", 8, "loader workers for ingest")
	fs.IntVar(&c.cfg.IngestSpan, "ingest-span", 16, "heights per loader request for ingest")
	fs.StringVar(&c.streamsChain, "streams-chain", family.Default.Name, "chain family of the streams section: "+strings.Join(family.Names(), " or "))
	fs.Uint64Var(&c.cfg.StreamsBlocks, "streams-blocks", 0, "blocks staged and exported by the streams section (default: that family's blocks)")
	fs.StringVar(&c.streams, "streams", "1,2,4", "export stream counts of the streams section")
	fs.IntVar(&c.cfg.ProjectCores, "project-cores", 16, "cores of the database server the streams section projects to (negative: none)")
	fs.Uint64Var(&c.cfg.HeadBackfillBlocks, "headbackfill-blocks", 20_000, "CometBFT blocks of the headbackfill section (head: the upper half, backfill: the lower)")
	fs.Uint64Var(&c.cfg.DecodingCometBFTBlocks, "decoding-cometbft-blocks", 10_000, "CometBFT blocks of the decoding section (exported and COPYed with messages raw and decoded)")
	fs.Uint64Var(&c.cfg.DecodingEVMBlocks, "decoding-evm-blocks", 1_000, "EVM blocks of the decoding section (exported and COPYed without and with an ABI of 3 events)")
	fs.Uint64Var(&c.cfg.LimitCometBFTBlocks, "limit-cometbft-blocks", 60_000, "CometBFT blocks of the limit section (whole export with 1 and 2 streams vs PostgreSQL's restore; the issue's method: 100000)")
	fs.Uint64Var(&c.cfg.LimitEVMBlocks, "limit-evm-blocks", 6_000, "EVM blocks of the limit section")
	fs.IntVar(&c.cfg.IndexWorkers, "index-workers", 0, "the limit section's exports' --index-workers (0: the command's default)")
	fs.Int64Var(&c.cfg.IndexMemoryMiB, "index-memory", -1, "maintenance_work_mem of each deferred index build of the limit section's exports, in MiB (-1: export's default, 16; 0: the server's, as the limit's restore keeps)")
	fs.StringVar(&c.fetchChain, "fetch-chain", family.Default.Name, "chain family the fetch server serves: "+strings.Join(family.Names(), " or "))
	fs.Uint64Var(&c.cfg.FetchBlocks, "fetch-blocks", 20_000, "blocks the fetch server serves")
	fs.IntVar(&c.cfg.FetchWorkers, "fetch-workers", 8, "concurrent requests of both fetch clients")
	fs.IntVar(&c.cfg.FetchSpan, "fetch-span", 16, "heights per fetch request")
	fs.StringVar(&c.fetchSource, "fetch-source", "rpc", "blockhaul's side of the fetch section: rpc (the family's RPC source) or none")
	fs.StringVar(&c.sizes, "range-sizes", "10000,30000,100000", "block counts of the `blockhaul run` processes (memory, scaling)")
	fs.StringVar(&c.cfg.Blockhaul, "blockhaul", "", "blockhaul binary for the process runs (default: built from this module)")
	fs.StringVar(&c.cfg.WorkDir, "workdir", "", "directory for staging stores (default: the system's temporary directory)")
	fs.StringVar(&c.cfg.CPUProfileDir, "cpuprofile", "", "directory for a CPU profile of each in-process section")
	return c
}

// resolve turns the flags' strings into the Config's values.
func (c *cliFlags) resolve() error {
	c.cfg.Sections = splitList(c.sections)
	var err error
	if c.cfg.RangeSizes, err = parseCounts("-range-sizes", c.sizes); err != nil {
		return err
	}
	fetchFam, err := family.Lookup(c.fetchChain)
	if err != nil {
		return err
	}
	streamsFam, err := family.Lookup(c.streamsChain)
	if err != nil {
		return err
	}
	c.cfg.FetchChain, c.cfg.StreamsChain = fetchFam.ID, streamsFam.ID
	counts, err := parseCounts("-streams", c.streams)
	if err != nil {
		return err
	}
	for _, n := range counts {
		c.cfg.StreamCounts = append(c.cfg.StreamCounts, int(min(n, 1<<16)))
	}
	switch c.fetchSource {
	case "rpc":
		c.cfg.FetchSource = bench.RPCSource(c.cfg.FetchChain, c.cfg.FetchWorkers)
	case "none":
	default:
		return fmt.Errorf("-fetch-source %q: want rpc or none", c.fetchSource)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseCounts reads flag's comma-separated positive counts.
func parseCounts(flag, s string) ([]uint64, error) {
	var out []uint64
	for _, f := range splitList(s) {
		n, err := strconv.ParseUint(strings.ReplaceAll(f, "_", ""), 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%s: %q is not a positive count", flag, f)
		}
		out = append(out, n)
	}
	return out, nil
}
