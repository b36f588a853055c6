package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/monitor"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// Exit statuses, documented in docs/exit-status.md. A Kubernetes Job retries any
// non-zero status; the distinction tells an operator what happened. Each is
// the status of one fault class (internal/fault), which an error carries
// from where it was made.
const (
	ExitComplete    = fault.ExitComplete    // the requested range is complete
	ExitFailed      = fault.ExitFailed      // a runtime failure (network, database, source)
	ExitConfig      = fault.ExitConfig      // invalid configuration; nothing was started
	ExitInterrupted = fault.ExitInterrupted // stopped by a signal part way; resumable
	ExitData        = fault.ExitData        // fatal data error: continuity break, corrupt record, wrong chain
)

// ErrIncomplete is returned when a job ended without completing its range.
var ErrIncomplete = errors.New("range not complete")

// ExitCode maps a job's error to the process exit status: the status of
// the fault class the error was marked with where it was made.
func ExitCode(err error) int { return fault.ExitStatus(err) }

// ErrInterrupted is returned when a signal stopped a job part way.
var ErrInterrupted = fault.Mark(errors.New("interrupted"), fault.Interrupted)

// Summary is what a job did.
type Summary struct {
	Command  string
	From, To uint64
	Fetch    loader.Stats
	Export   export.Result
	Complete bool
	Reorgs   uint64 // reorganisations the head stream repaired
	// Backfill is follow's backfill beside the head (--backfill-from), if
	// any: Complete is the head's, and the job is complete when both are.
	Backfill *BackfillSummary
	// IndexesPending names the deferred indexes the job left unbuilt (it
	// was stopped or failed while building them): the range's rows are all
	// in PostgreSQL but the job is not done.
	IndexesPending []string
	// KeysPending names those of IndexesPending that are primary keys
	// (deferred for a fresh fill).
	KeysPending []string
	// IndexesPresent says which of IndexesPending exist in the catalog
	// already (export.IndexesPresent).
	IndexesPresent map[string]string
	// IndexesRebuilt counts the deferred indexes a failed fill built again
	// before it exited, and KeysRebuilt the primary keys.
	IndexesRebuilt, KeysRebuilt int
	// Streams is the export streams the range was split into, and
	// StreamsWhy why that many (planStreams); 0 when not decided.
	Streams    int
	StreamsWhy string
	// AfterFill is what a fill did once its range was complete: the
	// deferred indexes it built and the tables it analyzed.
	AfterFill AfterFill
	// Parquet is what a job with --parquet wrote (nil without).
	Parquet  *ParquetSummary
	Duration time.Duration
}

// AfterFill is the work of a fill after its rows: the deferred indexes and
// primary keys built (Workers at once, WorkersWhy why that many), the tables
// analyzed, and the time it all took.
type AfterFill struct {
	Indexes, Keys int
	Workers       int
	WorkersWhy    string
	Analyzed      int
	Took          time.Duration
}

// write prints a's line of the summary, if the fill did any of it.
func (a AfterFill) write(out io.Writer) {
	if a.Indexes+a.Keys+a.Analyzed == 0 {
		return
	}
	var parts []string
	if a.Indexes+a.Keys > 0 {
		built := fmt.Sprintf("%d deferred indexes built", a.Indexes)
		if a.Keys > 0 {
			built = fmt.Sprintf("%d deferred indexes and %d primary keys built", a.Indexes, a.Keys)
		}
		parts = append(parts, fmt.Sprintf("%s, %d at once (%s)", built, a.Workers, a.WorkersWhy))
	}
	if a.Analyzed > 0 {
		parts = append(parts, fmt.Sprintf("%d tables analyzed", a.Analyzed))
	}
	fmt.Fprintf(out, "  after the fill: %s, in %s\n", strings.Join(parts, "; "), a.Took.Round(100*time.Millisecond))
}

// Run resolves cfg (Resolve) and runs its command (Job.Run): the returned
// error maps to an exit status through ExitCode. out receives the summary.
func Run(ctx context.Context, cfg Config, out io.Writer, log *slog.Logger) (Summary, error) {
	j, err := Resolve(cfg)
	if err != nil {
		return Summary{}, err
	}
	return j.Run(ctx, out, log)
}

// Run runs the job's command; the returned error maps to an exit status
// through ExitCode. out receives the summary.
func (j *Job) Run(ctx context.Context, out io.Writer, log *slog.Logger) (Summary, error) {
	cfg := j
	if err := checkStagingDirs(cfg); err != nil {
		return Summary{}, err
	}
	cmd := commandNamed(cfg.Command)
	if cmd.run != nil {
		return cmd.run(ctx, cfg, out, log)
	}
	if cfg.Shards > 0 {
		from, to := cfg.From, cfg.To
		var ok bool
		if cfg, ok = cfg.shardSlice(); !ok {
			fmt.Fprintf(out, "blockhaul %s: shard %d of %d has no heights of %d..%d (slices of whole %d-height chunks): nothing to do\n",
				cfg.Command, cfg.ShardIndex, cfg.Shards, from, to, cfg.ShardChunk)
			return Summary{Command: cfg.Command, From: from, To: to, Complete: true}, nil
		}
		log = log.With("shard", cfg.ShardIndex, "shards", cfg.Shards)
		log.Info("fetching this shard's slice", "from", cfg.From, "to", cfg.To, "range_from", from, "range_to", to)
	}
	// A job that fails before it stages anything leaves no staging
	// directory it made.
	made := staging.ToMake(cfg.Staging)
	sum, err := runJob(ctx, cfg, cmd, out, log)
	if err != nil && made != "" {
		if removed, rerr := staging.RemoveUnused(cfg.Staging, made); rerr != nil {
			log.Warn("staging: the store this job made and staged nothing in is left", "dir", cfg.Staging, "err", rerr)
		} else if removed {
			log.Info("staging: removed the store this job made: nothing was staged", "dir", made)
		}
	}
	return sum, err
}

// runJob runs a command that stages and exports (fetch, export, run,
// follow: cmd.job) in the frame they share.
func runJob(ctx context.Context, cfg *Job, cmd *command, out io.Writer, log *slog.Logger) (Summary, error) {
	if (cfg.NodeHome != "" || cfg.Archive != "") && cfg.Source == nil {
		src, err := openNodeHome(ctx, cfg)
		if err != nil {
			return Summary{Command: cfg.Command, From: cfg.From, To: cfg.To}, err
		}
		defer closeSource(src)
	}
	start := time.Now()
	sum := Summary{Command: cfg.Command, From: cfg.From, To: cfg.To}
	tip := syntheticTipFunc(cfg)
	ln, err := listenHTTP(cfg)
	if err != nil {
		return sum, err
	}
	// export only reads staging: it names damage and leaves it to repair.
	store, err := staging.Open(cfg.Staging, staging.Options{Logger: log, KeepDamage: cfg.Command == CmdExport})
	if held := (*staging.InUseError)(nil); errors.As(err, &held) && !held.Reader && cfg.Command == CmdExport && len(cfg.Replay) > 0 {
		// A running follow holds it: it runs the replay. (A reader runs
		// none: the store's refusal is the answer.)
		if ln != nil {
			ln.Close()
		}
		return requestReplay(ctx, cfg, held, out, log)
	}
	if err == nil {
		defer store.Close()
		var held *Job
		if held, err = checkStagedChain(cfg, store, log); err == nil {
			cfg = held
		}
	}
	if err == nil && cfg.Command != CmdExport {
		err = checkSyntheticMatches(ctx, cfg, store, tip, log)
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return sum, err
	}

	m := cfg.Monitor
	if m == nil {
		// The sources built below report to it: the job with it.
		m = monitor.New(monitor.Options{Logger: log, Out: io.Discard, Terminal: new(bool), Interval: cfg.Progress})
		n := *cfg
		n.Monitor = m
		cfg = &n
	}
	c := &counters{m: m}
	m.PublishRetryReasons(jsonrpc.RetryReasons...)
	m.PublishPGRetryCauses(export.TransientCauses...)
	if dec, err := cfg.decoder(); err == nil {
		names := make([]string, 0)
		for _, t := range dec.Tables() {
			names = append(names, t.Name)
		}
		m.SetTables(names)
	}
	if cfg.ToSet {
		m.SetRange(cfg.From, cfg.To)
	}
	if cfg.Command == CmdFollow {
		m.SetFollow(cfg.Confirmations)
	}
	if cfg.Progress > 0 {
		m.Start(ctx)
	}
	defer m.Stop()
	// status, snapshot, verify and export --replay, run beside this job,
	// ask it on its store's endpoint.
	defer startEndpoint(cfg, store, c, log)()
	if ln != nil {
		hctx, stopHTTP := context.WithCancel(context.WithoutCancel(ctx))
		served := make(chan error, 1)
		go func() { served <- m.ServeListener(hctx, ln) }()
		// With --http :0 this is where the port chosen is told.
		log.Info("serving /metrics, /healthz and /readyz", "addr", ln.Addr().String())
		defer func() {
			stopHTTP()
			if err := <-served; err != nil {
				log.Warn("http server", "err", err)
			}
		}()
	}

	run := cmd.job
	if cfg.Parquet != "" {
		run = runParquetJob // the tables as Parquet segments in place of PostgreSQL
	}
	err = run(ctx, cfg, store, tip, log, &sum, c)
	sum.Duration = time.Since(start)
	if err != nil {
		m.SetReady(false, err.Error())
	}
	m.Stop()
	if ferr := store.Flush(); ferr != nil && err == nil {
		err = ferr
	}
	if sum.Backfill != nil && !sum.Backfill.Complete {
		sum.Complete = false
	}
	if err != nil && fault.Is(err, fault.Config) {
		out = io.Discard // a refused job changed nothing: its error alone is the news, no summary before it
	}
	ms := m.Summary()
	ms.Command, ms.Complete = cfg.Command, sum.Complete && len(sum.IndexesPending) == 0
	if len(cfg.Replay) > 0 {
		ms.Replayed = cfg.Decoding.Tables
	}
	ms.WriteText(out)
	writePending(out, sum.IndexesPending, sum.KeysPending, sum.IndexesPresent)
	if sum.IndexesRebuilt > 0 {
		fmt.Fprintf(out, "  indexes: %d dropped for the fill, rebuilt after it failed\n", sum.IndexesRebuilt)
	}
	if sum.KeysRebuilt > 0 {
		fmt.Fprintf(out, "  primary keys: %d dropped for the fill, rebuilt after it failed\n", sum.KeysRebuilt)
	}
	sum.AfterFill.write(out)
	sum.Parquet.write(out)
	if sum.Streams > 0 {
		fmt.Fprintf(out, "  export streams: %d (%s)\n", sum.Streams, sum.StreamsWhy)
	}
	if sum.Reorgs > 0 {
		fmt.Fprintf(out, "  reorgs repaired: %d\n", sum.Reorgs)
	}
	if sum.Backfill != nil {
		writeBackfill(out, sum.Backfill)
	}
	if size, serr := store.Size(); serr != nil {
		fmt.Fprintf(out, "  staging: %s, size unknown: %v\n", store.Dir(), serr)
	} else {
		fmt.Fprintf(out, "  staging: %s, %s\n", store.Dir(), size)
	}
	if err == nil && !sum.Complete {
		if ctx.Err() != nil {
			err = ErrInterrupted
		} else {
			err = ErrIncomplete
		}
	}
	if err != nil && ctx.Err() != nil && ExitCode(err) == ExitFailed {
		err = fmt.Errorf("%w: %v", ErrInterrupted, err)
	}
	return sum, err
}

// syntheticTip is the tip of the synthetic chain: --synthetic-tip when
// given; else --to (plus --confirmations, so that follow can confirm it),
// since the generator renders any height a range asks for; else
// DefaultSyntheticTip, so that a range without --to ends where a user trying
// the tool expects a job to end, not at a height no machine reaches.
func syntheticTip(cfg *Job) uint64 {
	switch {
	case cfg.SyntheticTip > 0:
		return cfg.SyntheticTip
	case cfg.ToSet:
		if cfg.To > ^uint64(0)-cfg.Confirmations {
			return ^uint64(0)
		}
		return cfg.To + cfg.Confirmations
	}
	return DefaultSyntheticTip
}

// resolveTo fixes the range end: --to if given (refused when above the
// tip), else the source's tip. It returns cfg over that range.
func resolveTo(ctx context.Context, cfg *Job, src loader.Source) (*Job, error) {
	tip, err := src.Tip(ctx)
	if err != nil {
		return nil, fmt.Errorf("read chain tip: %w", err)
	}
	if !cfg.ToSet {
		if tip < cfg.From {
			return nil, fmt.Errorf("--from %d is above the chain tip %d", cfg.From, tip)
		}
		return cfg.withRange(cfg.From, tip), nil
	}
	if cfg.To > tip {
		return nil, fmt.Errorf("range end %d is above the chain tip %d: refusing rather than clamping (lower --to, or wait for the chain)", cfg.To, tip)
	}
	return cfg, nil
}

func runFetch(ctx context.Context, cfg *Job, store *staging.Store, tip func() uint64, log *slog.Logger, sum *Summary, c *counters) error {
	src, err := newSource(cfg, tip, log)
	if err != nil {
		return err
	}
	defer closeSource(src)
	if cfg.ToSet {
		if m, err := store.Missing(cfg.From, cfg.To); err == nil && len(m) == 0 {
			if id, ok := store.Identity(); ok && cfg.Family != nil && id.Family == cfg.Family.ID {
				sum.Complete, sum.To = true, cfg.To
				log.Info("range already staged", "from", cfg.From, "to", cfg.To)
				return nil
			}
		}
	}
	cfg, err = resolveTo(ctx, cfg, src)
	if err != nil {
		return err
	}
	sum.To = cfg.To
	c.m.SetRange(cfg.From, cfg.To) // the summary shows the range also when --to was omitted
	lc := loaderConfig(cfg, log, c)
	if err := withProver(ctx, cfg, store, src, cfg.From, log, &lc); err != nil {
		return err
	}
	st, err := loader.Fetch(ctx, src, store, cfg.From, cfg.To, lc, nil)
	sum.Fetch = st
	if err != nil {
		return err
	}
	m, err := store.Missing(cfg.From, cfg.To)
	if err != nil {
		return err
	}
	sum.Complete = len(m) == 0
	return nil
}

// counters hands the engines' hooks to the job's monitor.
type counters struct {
	m *monitor.Monitor
	// endpoint holds the routes of the store's endpoint while a job runs
	// (startEndpoint); a follow adds its replays' (serveReplays).
	endpoint *http.ServeMux
	// idx is what the job decided of its tables' indexes
	// (prepareIndexes), once, before any stream writes.
	idx    indexPlan
	reorgs uint64 // reorgs of the job's Summary already counted in m
}

// reorgsRepaired counts in the monitor the reorgs sum holds that it has
// not counted yet.
func (c *counters) reorgsRepaired(sum *Summary) {
	for ; c.reorgs < sum.Reorgs; c.reorgs++ {
		c.m.ReorgRepaired()
	}
}

func loaderConfig(cfg *Job, log *slog.Logger, c *counters) loader.Config {
	m := c.m
	m.SetReady(true, "")
	return loader.Config{
		Verify:    newVerifier(cfg.Family, cfg.VerifyBlocks),
		Workers:   cfg.FetchWorkers,
		Span:      cfg.FetchSpan,
		DownAfter: cfg.RPCDownAfter,
		Logger:    log,
		OnPlan:    m.FetchPlanned,
		OnFetched: m.Fetched,
		OnCommit: func(s loader.CommitStats) {
			m.Staged(s.Blocks, s.RawBytes, s.StoredBytes, s.Duration)
		},
		OnRetry: func(staging.Range, error) { m.Retry("", monitor.RetrySpan) },
	}
}

func exportConfig(cfg *Job, plan *indexPlan, log *slog.Logger, c *counters) export.Config {
	c.m.SetReady(true, "")
	alias := cfg.Alias
	if alias == "" {
		alias = export.DefaultAlias(cfg.From, cfg.To)
	}
	return export.Config{
		Schema:      cfg.Schema,
		SkipIndexes: plan.deferred,
		KeylessFill: plan.keyless,
		Indexes:     cfg.Indexes,
		Stream:      export.Stream{Alias: alias, From: cfg.From, To: cfg.To},
		BatchBlocks: cfg.BatchBlocks,
		SyncCommit:  cfg.SyncCommit,
		IndexMemory: cfg.IndexMemoryMiB << 20,
		Logger:      log,
		OnBatch: func(b export.BatchStats) {
			c.m.Exported(b.From, b.To, b.Rows, b.Commit, b.Conflicted)
		},
		OnStart: func(s export.Stream, next uint64) {
			if !s.Head {
				c.m.ExportStream(s.From, s.To, next)
			}
		},
	}
}

// loadCursor reads a stream's cursor through db, riding out transient
// faults.
func loadCursor(ctx context.Context, db *export.Session, schema string, s export.Stream) (cur export.Cursor, err error) {
	err = db.Do(ctx, "read checkpoint of "+s.Name(), func(ctx context.Context, conn *pgx.Conn) error {
		cur, err = export.LoadCursor(ctx, conn, schema, s)
		return err
	})
	return cur, err
}

// Merge copies the blocks staged in --merge-from (within --from and --to,
// either alone bounding one side) into --staging: disjoint ranges fetched
// by separate processes become one store that export can read.
func Merge(cfg *Job, out io.Writer) (Summary, error) {
	sum := Summary{Command: CmdMerge, From: cfg.From, To: cfg.To}
	if err := needStore("merge-from", cfg.MergeFrom); err != nil {
		return sum, err
	}
	src, err := staging.Open(cfg.MergeFrom, staging.Options{ReadOnly: true})
	if err != nil {
		return sum, err
	}
	defer src.Close()
	dst, err := staging.Open(cfg.Staging, staging.Options{})
	if err != nil {
		return sum, err
	}
	defer dst.Close()
	from, to, _ := cfg.archiveRange()
	n, err := dst.MergeFrom(src, from, to)
	if err == nil {
		err = dst.Flush()
	}
	sum.Complete = err == nil
	switch {
	case err == nil:
		fmt.Fprintf(out, "blockhaul merge: %d blocks copied from %s into %s\n", n, src.Dir(), dst.Dir())
	case n > 0:
		// A refused merge copied nothing and says only why; one that
		// failed part way says what it had copied.
		fmt.Fprintf(out, "blockhaul merge: failed after %d blocks copied from %s into %s\n", n, src.Dir(), dst.Dir())
	}
	return sum, err
}
