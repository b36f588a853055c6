// Command blockhaul rebuilds blockchain history into PostgreSQL.
//
//	blockhaul run|fetch|export|status [flags]
//
// Every flag can also be set through an environment variable
// (BLOCKHAUL_<FLAG>, see --help); flags win over the environment.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/blockhaul/blockhaul/monitor"
	"github.com/blockhaul/blockhaul/pipeline"
	"github.com/spf13/pflag"
)

const usage = `blockhaul rebuilds blockchain history into PostgreSQL.

Usage:
  blockhaul run     --pg DSN --from N --to M   fetch and export at once
  blockhaul fetch   --from N --to M            stage blocks only
  blockhaul export  --pg DSN --from N --to M   export staged blocks; no network but the database
  blockhaul follow  --pg DSN [--from N]        the head stream: tail the chain tip
  blockhaul merge   --merge-from DIR            copy another staging directory's blocks into --staging
  blockhaul status  [--pg DSN]                 staged ranges, gaps and checkpoints
  blockhaul checksum --pg DSN [--against DSN2]  digest every exported row; compare two databases
  blockhaul verify  [--deep] [--pg DSN]         check every staged record, the chain, and PostgreSQL against it
  blockhaul prune   --below H [--force]         delete staged blocks every target has exported

With no --rpc, blocks come from a deterministic synthetic chain (--synthetic-seed).

Exit status: 0 range complete (or check clean); 1 runtime failure; 2 invalid configuration;
3 interrupted part way (resumable); 4 fatal data error (continuity break,
corrupt record, wrong chain, a check that found the data wrong).

Flags (environment variable in brackets):
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fs, _ := newFlags("run")
			fs.SetOutput(os.Stdout)
			fs.Usage()
			return 0
		}
		fmt.Fprint(os.Stderr, strings.TrimSuffix(usage, "Flags (environment variable in brackets):\n"))
		fmt.Fprintln(os.Stderr, "Flags: blockhaul COMMAND --help")
		return pipeline.ExitConfig
	}
	cmd := args[0]
	fs, cfg := newFlags(cmd)
	memLimit := fs.Int64("memory-limit", 0, "soft limit of the Go heap in MiB, so memory stays flat over any range (0: by chain, cometbft 128, evm 448; negative: none; GOMEMLIMIT wins)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "blockhaul:", err)
		return pipeline.ExitConfig
	}
	if err := applyEnv(fs); err != nil {
		fmt.Fprintln(os.Stderr, "blockhaul:", err)
		return pipeline.ExitConfig
	}
	cfg.Command = cmd
	cfg.ToSet = fs.Changed("to")
	cfg.FromSet = fs.Changed("from")
	cfg.BelowSet = fs.Changed("below")
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "blockhaul:", err)
		return pipeline.ExitConfig
	}
	setMemoryLimit(*memLimit, cfg.Chain)
	con := monitor.NewConsole(os.Stderr)
	log := newLogger(cfg, con)
	cfg.Monitor = monitor.New(monitor.Options{Logger: log, Out: con, Interval: cfg.Progress})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	_, err := pipeline.Run(ctx, *cfg, os.Stdout, log)
	code := pipeline.ExitCode(err)
	if err != nil {
		log.Error(cmd+" failed", "err", err, "exit", code)
	}
	return code
}

func newLogger(cfg *pipeline.Config, w io.Writer) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With("cmd", cfg.Command, "chain", cfg.Chain)
}

func newFlags(cmd string) (*pflag.FlagSet, *pipeline.Config) {
	cfg := &pipeline.Config{}
	d := pipeline.DefaultConfig()
	fs := pflag.NewFlagSet("blockhaul "+cmd, pflag.ContinueOnError)
	fs.StringVar(&cfg.Chain, "chain", d.Chain, "chain family: cometbft or evm")
	fs.StringSliceVar(&cfg.RPC, "rpc", nil, "RPC endpoint URL(s), comma separated; empty means the synthetic chain")
	fs.Int64Var(&cfg.SyntheticSeed, "synthetic-seed", d.SyntheticSeed, "seed of the synthetic chain")
	fs.Uint64Var(&cfg.SyntheticTip, "synthetic-tip", 0, "tip height of the synthetic chain (0: --to plus --confirmations when --to is given, else 10000)")
	fs.Float64Var(&cfg.SyntheticTxs, "synthetic-txs", 0, "mean transactions per synthetic block (0: the family's mainnet-like default: cometbft 4.5, evm 150 with 400 logs)")
	fs.BoolVar(&cfg.SyntheticSteady, "synthetic-steady", false, "every synthetic block at the mean density (cometbft: no quiet stretches or bursts)")
	fs.Uint64Var(&cfg.From, "from", d.From, "first height (inclusive)")
	fs.Uint64Var(&cfg.To, "to", 0, "last height (inclusive); default: the chain tip (fetch, run) or the staged prefix (export)")
	fs.StringVar(&cfg.PG, "pg", "", "PostgreSQL DSN (URL or key=value)")
	fs.StringVar(&cfg.Staging, "staging", d.Staging, "staging directory")
	fs.StringVar(&cfg.Schema, "schema", "", "PostgreSQL schema (default: the chain family's name)")
	fs.StringVar(&cfg.Alias, "alias", "", "name of this backfill (default: range-FROM-TO)")
	fs.IntVar(&cfg.FetchWorkers, "fetch-workers", d.FetchWorkers, "concurrent fetches")
	fs.IntVar(&cfg.FetchSpan, "fetch-span", d.FetchSpan, "heights per fetch request")
	fs.Uint64Var(&cfg.FetchLead, "fetch-lead", 0, "run: how many heights fetch may stage ahead of export (0: four export batches)")
	fs.IntVar(&cfg.BatchBlocks, "batch-blocks", d.BatchBlocks, "blocks per export transaction")
	fs.Float64Var(&cfg.RPS, "rps", 0, "requests per second per RPC endpoint (0: unlimited)")
	fs.DurationVar(&cfg.RPCTimeout, "rpc-timeout", d.RPCTimeout, "timeout of one RPC request")
	fs.BoolVar(&cfg.SyncCommit, "sync-commit", false, "wait for WAL flush on every batch commit")
	fs.Uint64Var(&cfg.Confirmations, "confirmations", 0, "follow: export only blocks at least this many below the tip")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", d.PollInterval, "follow: how often to poll the chain tip")
	fs.Uint64Var(&cfg.ReorgWindow, "reorg-window", d.ReorgWindow, "follow: how many exported heights a reorg may roll back before halting")
	cfg.DeferIndexes = d.DeferIndexes
	fs.Var(&cfg.DeferIndexes, "defer-indexes", "drop secondary indexes for the fill and build them when the range completes: auto (when the tables are empty), always (the flag alone) or never")
	fs.Lookup("defer-indexes").NoOptDefVal = string(pipeline.IndexesAlways)
	fs.Var(&cfg.EventEncoding, "event-encoding", "cometbft: how event attributes are written: auto (decided per block from the data), base64 or text")
	fs.StringVar(&cfg.MergeFrom, "merge-from", "", "merge: the staging directory to copy blocks from")
	fs.BoolVar(&cfg.JSON, "json", false, "checksum, verify, prune: print the report as JSON")
	fs.StringVar(&cfg.Against, "against", "", "checksum: DSN of a second database to compare with (exit 4 when they differ)")
	fs.StringVar(&cfg.AgainstSchema, "against-schema", "", "checksum: schema in the --against database (default: --schema)")
	fs.Uint64Var(&cfg.Chunk, "chunk", d.Chunk, "checksum: heights per digest chunk")
	fs.BoolVar(&cfg.Deep, "deep", false, "verify: also decompress and decode every record")
	fs.Uint64Var(&cfg.Below, "below", 0, "prune: delete staged heights below this one")
	fs.BoolVar(&cfg.Force, "force", false, "prune: even when a target has not exported below --below")
	fs.StringVar(&cfg.HTTPAddr, "http", "", "serve /healthz, /readyz and Prometheus /metrics on this address (e.g. 127.0.0.1:9464)")
	fs.StringVar(&cfg.LogFormat, "log-format", d.LogFormat, "log format: text or json")
	fs.StringVar(&cfg.LogLevel, "log-level", d.LogLevel, "log level: debug, info, warn, error")
	fs.DurationVar(&cfg.Progress, "progress-interval", d.Progress, "interval of progress log lines (0: none)")
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.VisitAll(func(f *pflag.Flag) {
			fmt.Fprintf(fs.Output(), "  --%-18s %s [%s] (default %q)\n", f.Name, f.Usage, pipeline.EnvName(f.Name), f.DefValue)
		})
	}
	return fs, cfg
}

// applyEnv sets every flag not given on the command line from its
// environment variable. A value that does not parse is an error naming both.
func applyEnv(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		v, ok := os.LookupEnv(pipeline.EnvName(f.Name))
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("--%s (%s): %q: %v", f.Name, pipeline.EnvName(f.Name), redactValue(f.Name, v), err))
		}
	})
	return errors.Join(errs...)
}

func redactValue(flag, v string) string {
	if flag == "pg" || flag == "rpc" {
		return "<redacted>"
	}
	return v
}

// setMemoryLimit caps the Go heap softly (see pipeline.DefaultMemoryLimitMiB).
// GOMEMLIMIT, when set, takes precedence; a negative limit means none.
func setMemoryLimit(mib int64, chainName string) {
	if mib < 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if mib == 0 {
		mib = pipeline.DefaultMemoryLimitMiB(chainName)
	}
	debug.SetMemoryLimit(mib << 20)
}
