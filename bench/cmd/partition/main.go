// Command partition measures export into plain tables against tables
// partitioned by height range (bench.RunPartition) on the PostgreSQL server
// of $DATABASE_URL, and prints the table of ratios (and, with -json, the
// result as JSON):
//
//	go run ./bench/cmd/partition -chain cometbft -blocks 10000 -partition-blocks 1000
//
// scripts/partition-bench.sh runs it for both families.
package main

import (
	"context"
	"encoding/json"
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
		fmt.Fprintln(os.Stderr, "partition:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg bench.PartitionConfig
	var chainName, streams, jsonOut string
	fs := flag.NewFlagSet("partition", flag.ContinueOnError)
	fs.StringVar(&cfg.DatabaseURL, "db", os.Getenv("DATABASE_URL"), "PostgreSQL server URL (default $DATABASE_URL)")
	fs.StringVar(&chainName, "chain", "cometbft", "chain family of the workload: cometbft or evm")
	fs.Uint64Var(&cfg.Blocks, "blocks", 0, "blocks staged and exported (default 10000 cometbft, 2000 evm)")
	fs.Uint64Var(&cfg.PartitionBlocks, "partition-blocks", 0, "heights per partition (default: a tenth of -blocks)")
	fs.StringVar(&streams, "streams", "1,2", "export stream counts, each into both layouts")
	fs.IntVar(&cfg.Rounds, "rounds", 2, "rounds of every load, the order rotating; the best counts")
	fs.IntVar(&cfg.BatchBlocks, "batch-blocks", 500, "blocks per export transaction")
	fs.IntVar(&cfg.IndexWorkers, "index-workers", 1, "deferred indexes built at once after the one-stream loads")
	fs.IntVar(&cfg.ParallelIndexWorkers, "parallel-index-workers", 0, "connections of the second index build (default: the machine's CPUs)")
	fs.StringVar(&cfg.BigMaintenanceMem, "big-maintenance-mem", "640MB", "maintenance_work_mem of the third index build")
	fs.IntVar(&cfg.Lookups, "lookups", 300, "queries of each kind timed")
	fs.IntVar(&cfg.ManyPartitions, "many-partitions", 200, "partitions (the extra ones empty) of the last by-hash lookup")
	fs.StringVar(&cfg.WorkDir, "workdir", "", "directory for the staging store (default: the system's temporary directory)")
	fs.StringVar(&jsonOut, "json", "", "also write the result as JSON to this file")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fam, err := family.Lookup(chainName)
	if err != nil {
		return err
	}
	cfg.Chain = fam.ID
	for _, f := range strings.Split(streams, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 {
			return fmt.Errorf("-streams: %q is not a stream count from 1 to 64", f)
		}
		cfg.Streams = append(cfg.Streams, n)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.RunPartition(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Print(res.Markdown())
	if jsonOut != "" {
		data, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(jsonOut, append(data, '\n'), 0o644)
	}
	return nil
}
