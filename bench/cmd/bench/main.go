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
	var cfg bench.Config
	var out, sections, sizes, fetchChain, fetchSource, streamsChain, streams string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&out, "out", "bench/results", "directory for the result files (empty: print only)")
	latest := fs.Bool("latest", true, "also write the results as latest.* (false: only the dated files, for a run of some sections)")
	fs.StringVar(&cfg.DatabaseURL, "db", os.Getenv("DATABASE_URL"), "PostgreSQL server URL (default $DATABASE_URL)")
	fs.StringVar(&sections, "sections", strings.Join(bench.AllSections, ","), "sections to run, comma separated")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of the synthetic chains")
	fs.Uint64Var(&cfg.CometBFTBlocks, "cometbft-blocks", 20_000, "blocks staged and exported at CometBFT density")
	fs.Uint64Var(&cfg.EVMBlocks, "evm-blocks", 2_000, "blocks staged and exported at EVM density")
	fs.BoolVar(&cfg.RawMessages, "raw-messages", false, "export Cosmos messages without decoding them (the cost of messages.decoded)")
	fs.IntVar(&cfg.BatchBlocks, "batch-blocks", 500, "blocks per export transaction (baseline too)")
	fs.IntVar(&cfg.Rounds, "rounds", 2, "runs of export and of the baseline (alternating), and of each range size; the best counts")
	fs.IntVar(&cfg.IngestWorkers, "ingest-workers", 8, "loader workers for ingest")
	fs.IntVar(&cfg.IngestSpan, "ingest-span", 16, "heights per loader request for ingest")
	fs.StringVar(&streamsChain, "streams-chain", family.Default.Name, "chain family of the streams section: "+strings.Join(family.Names(), " or "))
	fs.Uint64Var(&cfg.StreamsBlocks, "streams-blocks", 0, "blocks staged and exported by the streams section (default: that family's blocks)")
	fs.StringVar(&streams, "streams", "1,2,4", "export stream counts of the streams section")
	fs.IntVar(&cfg.ProjectCores, "project-cores", 16, "cores of the database server the streams section projects to (negative: none)")
	fs.Uint64Var(&cfg.HeadBackfillBlocks, "headbackfill-blocks", 20_000, "CometBFT blocks of the headbackfill section (head: the upper half, backfill: the lower)")
	fs.Uint64Var(&cfg.DecodingCometBFTBlocks, "decoding-cometbft-blocks", 10_000, "CometBFT blocks of the decoding section (exported and COPYed with messages raw and decoded)")
	fs.Uint64Var(&cfg.DecodingEVMBlocks, "decoding-evm-blocks", 1_000, "EVM blocks of the decoding section (exported and COPYed without and with an ABI of 3 events)")
	fs.Uint64Var(&cfg.LimitCometBFTBlocks, "limit-cometbft-blocks", 60_000, "CometBFT blocks of the limit section (whole export with 1 and 2 streams vs PostgreSQL's restore; the issue's method: 100000)")
	fs.Uint64Var(&cfg.LimitEVMBlocks, "limit-evm-blocks", 6_000, "EVM blocks of the limit section")
	fs.IntVar(&cfg.IndexWorkers, "index-workers", 0, "the limit section's exports' --index-workers (0: the command's default)")
	fs.Int64Var(&cfg.IndexMemoryMiB, "index-memory", -1, "maintenance_work_mem of each deferred index build of the limit section's exports, in MiB (-1: export's default, 16; 0: the server's, as the limit's restore keeps)")
	fs.StringVar(&fetchChain, "fetch-chain", family.Default.Name, "chain family the fetch server serves: "+strings.Join(family.Names(), " or "))
	fs.Uint64Var(&cfg.FetchBlocks, "fetch-blocks", 20_000, "blocks the fetch server serves")
	fs.IntVar(&cfg.FetchWorkers, "fetch-workers", 8, "concurrent requests of both fetch clients")
	fs.IntVar(&cfg.FetchSpan, "fetch-span", 16, "heights per fetch request")
	fs.StringVar(&fetchSource, "fetch-source", "rpc", "blockhaul's side of the fetch section: rpc (the family's RPC source) or none")
	fs.StringVar(&sizes, "range-sizes", "10000,30000,100000", "block counts of the `blockhaul run` processes (memory, scaling)")
	fs.StringVar(&cfg.Blockhaul, "blockhaul", "", "blockhaul binary for the process runs (default: built from this module)")
	fs.StringVar(&cfg.WorkDir, "workdir", "", "directory for staging stores (default: the system's temporary directory)")
	fs.StringVar(&cfg.CPUProfileDir, "cpuprofile", "", "directory for a CPU profile of each in-process section")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Sections = splitList(sections)
	var err error
	if cfg.RangeSizes, err = parseCounts("-range-sizes", sizes); err != nil {
		return err
	}
	fetchFam, err := family.Lookup(fetchChain)
	if err != nil {
		return err
	}
	streamsFam, err := family.Lookup(streamsChain)
	if err != nil {
		return err
	}
	cfg.FetchChain, cfg.StreamsChain = fetchFam.ID, streamsFam.ID
	counts, err := parseCounts("-streams", streams)
	if err != nil {
		return err
	}
	for _, n := range counts {
		cfg.StreamCounts = append(cfg.StreamCounts, int(min(n, 1<<16)))
	}
	switch fetchSource {
	case "rpc":
		cfg.FetchSource = bench.RPCSource(cfg.FetchChain, cfg.FetchWorkers)
	case "none":
	default:
		return fmt.Errorf("-fetch-source %q: want rpc or none", fetchSource)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Println(bench.Markdown(res, ""))
	if out != "" {
		write := bench.WriteFiles
		if !*latest {
			write = bench.WriteDatedFiles
		}
		paths, err := write(out, res)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintln(os.Stderr, "wrote", p)
		}
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
