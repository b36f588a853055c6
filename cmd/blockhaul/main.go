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

	"github.com/blockhaul/blockhaul/internal/crashpoint"
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
  blockhaul repair  [--rpc URL] [--from --to]   refetch what verify finds missing or wrong; salvage a damaged store
  blockhaul snapshot DEST                       consistent copy of --staging to a directory or blob URL
  blockhaul restore SRC                         restore a snapshot into --staging, verified first
  blockhaul estimate --from N --to M [--pg DSN]  heights, bytes and time a job would take; disk room

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
	cl := parseCommandLine(args, os.Environ())
	if cl.help {
		cl.fs.SetOutput(os.Stdout)
		cl.fs.Usage()
		return 0
	}
	if cl.cmd == "" || cl.cfg == nil {
		if len(args) == 0 {
			fmt.Fprint(os.Stderr, strings.TrimSuffix(usage, "Flags (environment variable in brackets):\n"))
			fmt.Fprintln(os.Stderr, "Flags: blockhaul COMMAND --help")
		}
		if len(cl.problems) > 0 {
			fmt.Fprintln(os.Stderr, "blockhaul:", &pipeline.ConfigError{Fields: cl.problems})
		}
		return pipeline.ExitConfig
	}
	cfg := cl.cfg
	cfg.Command = cl.cmd
	cfg.ToSet = cl.fs.Changed("to")
	cfg.FromSet = cl.fs.Changed("from")
	cfg.BelowSet = cl.fs.Changed("below")
	cfg.EnsureDefaults()
	problems := cl.problems
	var ce *pipeline.ConfigError
	if err := cfg.Validate(); errors.As(err, &ce) {
		problems = append(problems, ce.Fields...)
	} else if err != nil {
		problems = append(problems, &pipeline.FieldError{Msg: err.Error()})
	}
	if len(problems) > 0 {
		for _, w := range cl.warnings {
			fmt.Fprintln(os.Stderr, "blockhaul: warning:", w)
		}
		fmt.Fprintln(os.Stderr, "blockhaul:", &pipeline.ConfigError{Fields: problems})
		return pipeline.ExitConfig
	}
	// A test seam for the fault suite: kill this process at a named point
	// of an export (see internal/crashpoint).
	if err := crashpoint.ArmFromEnv(os.Getenv("BLOCKHAUL_CRASHPOINT")); err != nil {
		fmt.Fprintln(os.Stderr, "blockhaul:", err)
		return pipeline.ExitConfig
	}
	setMemoryLimit(*cl.memLimit, cfg.Chain)
	con := monitor.NewConsole(os.Stderr)
	log := newLogger(cfg, con)
	for _, w := range cl.warnings {
		log.Warn(w)
	}
	cfg.Monitor = monitor.New(monitor.Options{Logger: log, Out: con, Interval: cfg.Progress})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	_, err := pipeline.Run(ctx, *cfg, os.Stdout, log)
	code := pipeline.ExitCode(err)
	switch {
	case code == pipeline.ExitInterrupted:
		// A signal is the operator's or the scheduler's doing, not a
		// failure: one steady line, the cause only at debug.
		log.Warn(cmd(cfg)+" interrupted by a signal; the range is resumable", "exit", code)
		log.Debug("interrupted", "err", err)
	case err != nil:
		log.Error(cmd(cfg)+" failed", "err", err, "exit", code)
	}
	return code
}

func cmd(cfg *pipeline.Config) string { return cfg.Command }

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
	fs.Var(&rpcList{urls: &cfg.RPC}, "rpc", "RPC endpoint URL(s), comma separated; empty means the synthetic chain")
	fs.Int64Var(&cfg.SyntheticSeed, "synthetic-seed", d.SyntheticSeed, "seed of the synthetic chain")
	fs.Uint64Var(&cfg.SyntheticTip, "synthetic-tip", 0, "tip height of the synthetic chain (0: --to plus --confirmations when --to is given, else 10000)")
	fs.Float64Var(&cfg.SyntheticTxs, "synthetic-txs", 0, "mean transactions per synthetic block (0: the family's mainnet-like default: cometbft 4.5, evm 150 with 400 logs)")
	fs.BoolVar(&cfg.SyntheticSteady, "synthetic-steady", false, "every synthetic block at the mean density (cometbft: no quiet stretches or bursts)")
	fs.Uint64Var(&cfg.From, "from", d.From, "first height (inclusive)")
	fs.Uint64Var(&cfg.To, "to", 0, "last height (inclusive); default: the chain tip (fetch, run) or the staged prefix (export)")
	fs.Lookup("to").DefValue = "" // not 0, which is no valid end of a range from 1
	fs.StringVar(&cfg.PG, "pg", "", "PostgreSQL DSN (URL or key=value)")
	fs.StringVar(&cfg.Staging, "staging", d.Staging, "staging directory")
	fs.StringVar(&cfg.Schema, "schema", "", "PostgreSQL schema (default: the chain family's name)")
	fs.StringVar(&cfg.Alias, "alias", "", "name of this backfill (default: range-FROM-TO)")
	fs.IntVar(&cfg.FetchWorkers, "fetch-workers", d.FetchWorkers, "concurrent fetches")
	fs.IntVar(&cfg.FetchSpan, "fetch-span", d.FetchSpan, "heights per fetch request")
	fs.Uint64Var(&cfg.FetchLead, "fetch-lead", 0, "run: how many heights fetch may stage ahead of export (0: four export batches)")
	fs.IntVar(&cfg.BatchBlocks, "batch-blocks", d.BatchBlocks, "blocks per export transaction")
	fs.IntVar(&cfg.ExportStreams, "export-streams", d.ExportStreams, "export: split the range into this many contiguous sub-ranges exported at once over as many connections (resume with the same number)")
	fs.Float64Var(&cfg.RPS, "rps", 0, "requests per second per RPC endpoint (0: unlimited)")
	fs.DurationVar(&cfg.RPCTimeout, "rpc-timeout", d.RPCTimeout, "timeout of one RPC request")
	fs.BoolVar(&cfg.SyncCommit, "sync-commit", false, "wait for WAL flush on every batch commit")
	fs.IntVar(&cfg.PGRetries, "pg-retries", d.PGRetries, "retries of a transient PostgreSQL fault (terminated backend, restart, statement timeout, deadlock) since the last committed batch; 0: fail at once")
	fs.DurationVar(&cfg.PGRetryMaxWait, "pg-retry-max-wait", d.PGRetryMaxWait, "longest backoff between PostgreSQL retries (they start at 100ms and double)")
	fs.Uint64Var(&cfg.Confirmations, "confirmations", 0, "follow: export only blocks at least this many below the tip")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", d.PollInterval, "follow: how often to poll the chain tip")
	fs.Uint64Var(&cfg.ReorgWindow, "reorg-window", d.ReorgWindow, "follow: how many exported heights a reorg may roll back before halting")
	cfg.DeferIndexes = d.DeferIndexes
	fs.Var(&cfg.DeferIndexes, "defer-indexes", "drop secondary indexes for the fill and build them when the range completes: auto (when the tables are empty), always (the flag alone) or never")
	fs.Lookup("defer-indexes").NoOptDefVal = string(pipeline.IndexesAlways)
	fs.Var(&cfg.EventEncoding, "event-encoding", "cometbft: how event attributes are written: auto (decided per block from the data), base64 or text")
	fs.StringVar(&cfg.MergeFrom, "merge-from", "", "merge: the staging directory to copy blocks from")
	fs.IntVar(&cfg.Shards, "shards", 0, "fetch: cut the range into this many slices, one per pod of a Kubernetes Indexed Job (needs --to; 0: not sharded)")
	fs.IntVar(&cfg.ShardIndex, "shard-index", 0, "fetch: the slice this process fetches, 0 to --shards-1 (default: JOB_COMPLETION_INDEX)")
	fs.Uint64Var(&cfg.ShardChunk, "shard-chunk", d.ShardChunk, "fetch: shard slices start and end on multiples of this many heights")
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
			def := ""
			if f.DefValue != "" {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(fs.Output(), "  --%-18s %s [%s]%s\n", f.Name, f.Usage, pipeline.EnvName(f.Name), def)
		})
	}
	return fs, cfg
}

// newCommandFlags is newFlags plus the flags that only the process uses.
func newCommandFlags(cmd string) (*pflag.FlagSet, *pipeline.Config, *int64) {
	fs, cfg := newFlags(cmd)
	memLimit := fs.Int64("memory-limit", 0, "soft limit of the Go heap in MiB, so memory stays flat over any range (0: by chain, cometbft 128, evm 448; negative: none; GOMEMLIMIT wins)")
	return fs, cfg, memLimit
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
