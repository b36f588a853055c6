package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/monitor"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
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
	switch cfg.Command {
	case CmdStatus:
		return Summary{Command: CmdStatus}, Status(ctx, cfg, out)
	case CmdMerge:
		return Merge(cfg, out)
	case CmdChecksum:
		return Summary{Command: cfg.Command}, Checksum(ctx, cfg, out)
	case CmdVerify:
		if cfg.Parquet != "" {
			return Summary{Command: cfg.Command}, VerifyParquet(ctx, cfg, out)
		}
		return Summary{Command: cfg.Command}, Verify(ctx, cfg, out)
	case CmdPrune:
		return Summary{Command: cfg.Command}, Prune(ctx, cfg, out, log)
	case CmdRepair:
		return Summary{Command: cfg.Command}, Repair(ctx, cfg, out, log)
	case CmdSnapshot:
		return Summary{Command: cfg.Command}, Snapshot(ctx, cfg, out)
	case CmdRestore:
		return Summary{Command: cfg.Command}, Restore(ctx, cfg, out, log)
	case CmdPublish:
		return Summary{Command: cfg.Command}, Publish(ctx, cfg, out, log)
	case CmdEstimate:
		return Summary{Command: cfg.Command}, Estimate(ctx, cfg, out, log)
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
	sum, err := runJob(ctx, cfg, out, log)
	if err != nil && made != "" {
		if removed, rerr := staging.RemoveUnused(cfg.Staging, made); rerr != nil {
			log.Warn("staging: the store this job made and staged nothing in is left", "dir", cfg.Staging, "err", rerr)
		} else if removed {
			log.Info("staging: removed the store this job made: nothing was staged", "dir", made)
		}
	}
	return sum, err
}

// runJob runs fetch, export, run or follow.
func runJob(ctx context.Context, cfg *Job, out io.Writer, log *slog.Logger) (Summary, error) {
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
		err = checkStagedChain(cfg, store, log)
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

	cmd := cfg.Command
	if cfg.Parquet != "" {
		cmd, err = "", runParquetJob(ctx, &cfg, store, tip, log, &sum, c)
	}
	switch cmd {
	case CmdFetch:
		err = runFetch(ctx, cfg, store, tip, log, &sum, c)
	case CmdExport:
		err = runExport(ctx, cfg, store, nil, log, &sum, c)
	case CmdRun:
		err = runBoth(ctx, cfg, store, tip, log, &sum, c)
	case CmdFollow:
		err = runFollow(ctx, cfg, store, tip, log, &sum, c)
	}
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
// tip), else the source's tip.
func resolveTo(ctx context.Context, cfg *Job, src loader.Source) error {
	tip, err := src.Tip(ctx)
	if err != nil {
		return fmt.Errorf("read chain tip: %w", err)
	}
	if !cfg.ToSet {
		cfg.To, cfg.ToSet = tip, true
		if cfg.To < cfg.From {
			return fmt.Errorf("--from %d is above the chain tip %d", cfg.From, tip)
		}
		return nil
	}
	if cfg.To > tip {
		return fmt.Errorf("range end %d is above the chain tip %d: refusing rather than clamping (lower --to, or wait for the chain)", cfg.To, tip)
	}
	return nil
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
	if err := resolveTo(ctx, cfg, src); err != nil {
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

func exportConfig(cfg *Job, log *slog.Logger, c *counters) export.Config {
	c.m.SetReady(true, "")
	alias := cfg.Alias
	if alias == "" {
		alias = export.DefaultAlias(cfg.From, cfg.To)
	}
	return export.Config{
		Schema:      cfg.Schema,
		SkipIndexes: c.idx.deferred,
		KeylessFill: c.idx.keyless,
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

// runExport exports [from, to] from staging alone; it never builds a source.
func runExport(ctx context.Context, cfg *Job, store *staging.Store, _ func() uint64, log *slog.Logger, sum *Summary, c *counters) error {
	if len(cfg.Replay) > 0 {
		return runReplay(ctx, cfg, store, log, sum, c)
	}
	dec, err := cfg.decoder()
	if err != nil {
		return err
	}
	if err := checkDamage(cfg, store); err != nil {
		return err
	}
	if !cfg.ToSet {
		// Without --to, export what is staged contiguously from --from.
		last, ok, err := store.ContiguousFrom(cfg.From, ^uint64(0))
		if err != nil {
			return err
		}
		if !ok {
			return &export.GapError{Height: cfg.From}
		}
		cfg.To, cfg.ToSet = last, true
	}
	sum.To = cfg.To
	c.m.SetRange(cfg.From, cfg.To) // the summary shows the range also when --to was omitted
	if err := checkStagedRange(cfg, store); err != nil {
		return err
	}
	db, err := dialSession(ctx, cfg, log, c)
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	if err := checkTargetChain(ctx, cfg, db, store, dec, nil, log); err != nil {
		return err
	}
	if err := recordDecoders(ctx, cfg, db); err != nil {
		return err
	}
	if err := prepareIndexes(ctx, cfg, db, dec, log, c); err != nil {
		return err
	}
	ecfg := exportConfig(cfg, log, c)
	n, why, err := planStreams(ctx, cfg, db, ecfg.Stream, 0, log)
	if err != nil {
		return err
	}
	sum.Streams, sum.StreamsWhy = n, why
	sessions, closeSessions, err := streamSessions(ctx, cfg, db, n, log, c)
	defer closeSessions()
	if err != nil {
		return err
	}
	res, err := export.RunStreams(ctx, sessions, store, dec, ecfg)
	closeSessions() // before the index builds dial their connections
	sum.Export = res
	sum.Complete = res.Complete
	return endFill(ctx, cfg, &c.idx, db, sum, log, err)
}

// streamSessions returns db and n - 1 more sessions, and a function that
// closes the ones it dialled (once, however often it is called).
func streamSessions(ctx context.Context, cfg *Job, db *export.Session, n int, log *slog.Logger, c *counters) ([]*export.Session, func(), error) {
	sessions := []*export.Session{db}
	closeAll := func() {
		for _, s := range sessions[1:] {
			s.Close(context.WithoutCancel(ctx))
		}
		sessions = sessions[:1]
	}
	for range n - 1 {
		s, err := dialSession(ctx, cfg, log, c)
		if err != nil {
			return sessions, closeAll, err
		}
		sessions = append(sessions, s)
	}
	return sessions, closeAll, nil
}

// prepareIndexes creates the schema and decides, once for the invocation,
// whether the fill runs without secondary indexes (cfg.DeferIndexes becomes
// always or never): it drops them for a deferred fill, and otherwise builds
// any that an earlier run deferred.
func prepareIndexes(ctx context.Context, cfg *Job, db *export.Session, dec export.Decoder, log *slog.Logger, c *counters) error {
	return db.Do(ctx, "prepare schema "+cfg.Schema, func(ctx context.Context, conn *pgx.Conn) error {
		c.idx = indexPlan{} // decided afresh on every attempt
		workers, why, err := resolveIndexWorkers(ctx, cfg, conn, log)
		if err != nil {
			return err
		}
		c.idx.workers, c.idx.workersWhy = workers, why
		return prepareIndexesOn(ctx, cfg, &c.idx, conn, dec, indexBuildOptions(cfg, &c.idx, db, log))
	})
}

// indexPlan is what a job decided, once, about its tables' indexes: whether
// the fill runs without its secondary indexes (--defer-indexes resolved),
// the token of the primary keys it deferred (export.DeferKeys), and how
// many deferred builds run at once and why (--index-workers resolved).
type indexPlan struct {
	deferred   bool
	keyless    string
	workers    int
	workersWhy string
}

// indexBuildOptions is how the job builds deferred indexes: --index-workers
// at once (export.DefaultIndexWorkers while auto is not yet resolved), the
// connections beyond the session's own dialled as it dials.
func indexBuildOptions(cfg *Job, plan *indexPlan, db *export.Session, log *slog.Logger) export.BuildOptions {
	return export.BuildOptions{Workers: cmp.Or(plan.workers, cfg.IndexWorkers, export.DefaultIndexWorkers), Dial: db.Dialer(), MaintenanceWorkMem: cfg.IndexMemoryMiB << 20, Logger: log}
}

func prepareIndexesOn(ctx context.Context, cfg *Job, plan *indexPlan, conn *pgx.Conn, dec export.Decoder, bo export.BuildOptions) error {
	log := bo.Logger
	deferring, why, err := resolveIndexMode(ctx, cfg, conn, dec)
	if err != nil {
		return err
	}
	plan.deferred = deferring
	tables := cfg.Indexes.Select(dec.Tables())
	if err := export.EnsureSchema(ctx, conn, cfg.Schema, tables, deferring, log); err != nil {
		return err
	}
	if !deferring {
		_, err = export.BuildIndexes(ctx, conn, cfg.Schema, bo)
		return err
	}
	log.Info("filling without secondary indexes", "reason", why)
	if err := export.DeferIndexes(ctx, conn, cfg.Schema, tables, log); err != nil {
		return err
	}
	return prepareKeys(ctx, cfg, plan, conn, tables, bo)
}

// prepareKeys decides whether a deferred fill also runs without the tables'
// primary keys: export.DeferKeys drops them over empty tables, or lets a
// resume of the alias that dropped them go on without them; a run that
// finds them deferred by another builds them before it writes, so that
// rows meet rows through the keys as they always did. follow never drops
// them (its range does not end), nor a fill whose alias is not known yet.
func prepareKeys(ctx context.Context, cfg *Job, plan *indexPlan, conn *pgx.Conn, tables []chain.Table, bo export.BuildOptions) error {
	if cfg.Command != CmdFollow && cfg.ToSet {
		alias := cfg.Alias
		if alias == "" {
			alias = export.DefaultAlias(cfg.From, cfg.To)
		}
		token, err := export.DeferKeys(ctx, conn, cfg.Schema, tables, alias, bo.Logger)
		if err != nil || token != "" {
			plan.keyless = token
			return err
		}
	}
	if pending, err := export.KeysDeferred(ctx, conn, cfg.Schema, ""); err != nil || !pending {
		return err
	}
	bo.Logger.Info("primary keys deferred by another fill: building them before writing, so that the rows it wrote merge")
	_, err := export.BuildKeys(ctx, conn, cfg.Schema, bo)
	return err
}

// resolveIndexMode applies --defer-indexes to this invocation. auto defers
// a bounded fill of empty tables (a fresh rebuild: building each index once
// at the end is cheaper than growing it row by row, and nothing reads the
// tables yet) and carries on a deferral an earlier run left pending; it
// never defers for follow, whose range does not end, nor beside tables that
// already hold rows another stream may be serving.
func resolveIndexMode(ctx context.Context, cfg *Job, conn *pgx.Conn, dec export.Decoder) (bool, string, error) {
	switch cfg.DeferIndexes {
	case IndexesAlways:
		return true, "--defer-indexes=always", nil
	case IndexesNever:
		return false, "", nil
	}
	if cfg.Command == CmdFollow {
		return false, "", nil
	}
	pending, err := export.IndexesDeferred(ctx, conn, cfg.Schema)
	if err != nil || pending {
		return pending, "an earlier run deferred them", err
	}
	empty, err := export.TablesEmpty(ctx, conn, cfg.Schema, dec.Tables())
	return empty, "the tables are empty", err
}

// endFill ends a bounded fill whose fetch and export returned fillErr:
// on failure it settles the deferred indexes and returns fillErr; on
// success it builds them and analyzes what was filled.
func endFill(ctx context.Context, cfg *Job, plan *indexPlan, db *export.Session, sum *Summary, log *slog.Logger, fillErr error) error {
	if fillErr != nil {
		settleIndexes(ctx, cfg, plan, db, sum, log, fillErr)
		return fillErr
	}
	// The tables filled are analyzed by the index builds' workers, each
	// once its own indexes are built, while other tables' still build;
	// what they did not analyze is analyzed after. So are the tables whose
	// deferred builds an earlier, stopped run of the fill left to this one:
	// that run's ANALYZE never came, and this one may fill nothing itself.
	start := time.Now()
	defer func() { sum.AfterFill.Took += time.Since(start) }()
	var tables []string
	if analyzes(cfg, sum) {
		tables = filledTables(sum.Export)
	}
	if sum.Complete && cfg.Command != CmdFollow && plan.deferred {
		var pending []string
		if err := db.Do(ctx, "read deferred indexes", func(ctx context.Context, conn *pgx.Conn) (err error) {
			pending, err = export.PendingTables(ctx, conn, cfg.Schema)
			return err
		}); err != nil {
			return err
		}
		tables = slices.Compact(slices.Sorted(slices.Values(append(tables, pending...))))
	}
	var mu sync.Mutex
	analyzed := map[string]bool{}
	bo := indexBuildOptions(cfg, plan, db, log)
	if !cfg.AnalyzeAfterBuilds {
		bo.Analyze = tables
		bo.OnAnalyze = func(table string, took time.Duration, err error) {
			if err != nil {
				log.Warn("planner statistics not updated beside the index builds; analyzing after them", "table", table, "err", err)
				return
			}
			log.Info("table analyzed", "table", table, "took", took.Round(time.Millisecond))
			mu.Lock()
			analyzed[table] = true
			mu.Unlock()
		}
	}
	if err := finishIndexesWith(ctx, cfg, plan, db, sum, bo); err != nil {
		return err
	}
	mu.Lock()
	var rest []string
	for _, t := range tables {
		if !analyzed[t] {
			rest = append(rest, t)
		}
	}
	sum.AfterFill.Analyzed = len(analyzed)
	mu.Unlock()
	sum.AfterFill.Analyzed += analyzeTables(ctx, cfg, db, rest, log)
	return nil
}

// filledTables are the tables res put rows in, in name order.
func filledTables(res export.Result) []string {
	var out []string
	for t, n := range res.Rows {
		if n > 0 {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// finishIndexes builds the deferred indexes once the range is complete.
func finishIndexes(ctx context.Context, cfg *Job, plan *indexPlan, db *export.Session, sum *Summary, log *slog.Logger) error {
	start := time.Now()
	defer func() { sum.AfterFill.Took += time.Since(start) }()
	return finishIndexesWith(ctx, cfg, plan, db, sum, indexBuildOptions(cfg, plan, db, log))
}

// finishIndexesWith is finishIndexes with the build options bo.
func finishIndexesWith(ctx context.Context, cfg *Job, plan *indexPlan, db *export.Session, sum *Summary, bo export.BuildOptions) error {
	if !plan.deferred || !sum.Complete {
		return nil
	}
	// What was pending before the first attempt less what is left: the
	// builds run GIN and GiST first, so a count of builds alone does not
	// say which were keys. A failure that names nothing left counts none.
	var pending, keys []string
	read := false
	err := db.Do(ctx, "build deferred indexes", func(ctx context.Context, conn *pgx.Conn) error {
		if !read {
			p, err := export.PendingIndexes(ctx, conn, cfg.Schema)
			if err != nil {
				return err
			}
			if keys, err = export.PendingKeys(ctx, conn, cfg.Schema); err != nil {
				return err
			}
			pending, read = p, true
		}
		_, err := export.BuildIndexes(ctx, conn, cfg.Schema, bo)
		return err
	})
	var pe *export.IndexesPendingError
	if errors.As(err, &pe) {
		sum.IndexesPending, sum.KeysPending = pe.Pending, pe.Keys
		sum.IndexesPresent = indexesPresent(ctx, cfg, db, pe.Pending, bo.Logger)
	}
	if err == nil || pe != nil {
		a := &sum.AfterFill
		var left, leftKeys int
		if pe != nil {
			left, leftKeys = len(pe.Pending), len(pe.Keys)
		}
		a.Indexes += len(pending) - len(keys) - (left - leftKeys)
		a.Keys += len(keys) - leftKeys
		if len(pending) > left {
			a.Workers, a.WorkersWhy = bo.Workers, cmp.Or(plan.workersWhy, "--index-workers")
		}
	}
	return err
}

// runBoth fetches and exports at once: export follows the contiguous prefix
// that fetch has staged. A range the alias already completed returns at once
// without contacting the source.
func runBoth(ctx context.Context, cfg *Job, store *staging.Store, tip func() uint64, log *slog.Logger, sum *Summary, c *counters) error {
	// Refuse a foreign target table, a range above the tip or another
	// chain than the target holds before the schema, the backfill row or
	// an index is touched.
	dec, src, db, err := openExportJobChecked(ctx, cfg, tip, log, c, func(db *export.Session, dec export.Decoder, src loader.Source) error {
		if err := checkTargetFamily(ctx, cfg, db, store, src); err != nil {
			return err
		}
		if err := db.Do(ctx, "check tables of "+cfg.Schema, func(ctx context.Context, conn *pgx.Conn) error {
			return export.CheckShapes(ctx, conn, cfg.Schema, dec.Tables())
		}); err != nil {
			return err
		}
		if err := checkRunSource(ctx, cfg, store, src); err != nil {
			return err
		}
		return checkTargetChain(ctx, cfg, db, store, dec, src, log)
	})
	if err != nil {
		return err
	}
	defer closeSource(src)
	defer db.Close(context.WithoutCancel(ctx))
	if err := recordDecoders(ctx, cfg, db); err != nil {
		return err
	}
	if cfg.ToSet {
		ecfg := exportConfig(cfg, log, c)
		cur, err := loadCursor(ctx, db, cfg.Schema, ecfg.Stream)
		if err != nil {
			return err
		}
		if cur.Valid && cur.Height >= cfg.To {
			sum.Complete, sum.Export.Last = true, cur
			log.Info("range already complete", "alias", ecfg.Stream.Alias, "from", cfg.From, "to", cfg.To)
			return endFill(ctx, cfg, &c.idx, db, sum, log, nil)
		}
	}
	if !cfg.ToSet {
		// A backfill without an end stops where the head stream started.
		var start uint64
		var ok bool
		if err := db.Do(ctx, "read head start", func(ctx context.Context, conn *pgx.Conn) (err error) {
			start, ok, err = export.HeadStart(ctx, conn, cfg.Schema)
			return err
		}); err != nil {
			return err
		} else if ok && start > cfg.From {
			cfg.To, cfg.ToSet = start-1, true
			log.Info("backfill runs up to where the head stream started", "to", cfg.To)
		}
	}
	if err := resolveTo(ctx, cfg, src); err != nil {
		return err
	}
	sum.To = cfg.To
	c.m.SetRange(cfg.From, cfg.To) // the summary shows the range also when --to was omitted
	ecfg := exportConfig(cfg, log, c)
	cur, err := loadCursor(ctx, db, cfg.Schema, ecfg.Stream)
	if err != nil {
		return err
	}
	n, why, err := planStreams(ctx, cfg, db, ecfg.Stream, 0, log)
	if err != nil {
		return err
	}
	sum.Streams, sum.StreamsWhy = n, why
	var st loader.Stats
	var res export.Result
	if n > 1 {
		st, res, err = fetchAndExportStreams(ctx, cfg, store, src, db, dec, ecfg, n, log, c)
	} else {
		st, res, err = fetchAndExport(ctx, cfg, store, src, db, dec, ecfg, cur.Next(cfg.From), log, c)
	}
	sum.Fetch, sum.Export, sum.Complete = st, res, res.Complete
	return endFill(ctx, cfg, &c.idx, db, sum, log, err)
}

// fetchAndExport stages [next, ecfg.Stream.To] from src while it exports
// that stream over db, export following the contiguous staged prefix and
// fetch held within the lead of what export has committed. It is run's
// core, and the core of a backfill beside the head stream.
func fetchAndExport(ctx context.Context, cfg *Job, store *staging.Store, src loader.Source, db *export.Session, dec export.Decoder, ecfg export.Config, next uint64, log *slog.Logger, c *counters) (loader.Stats, export.Result, error) {
	to := ecfg.Stream.To
	progress := loader.NewProgress(next, to)
	ecfg.Available = progress.Wait
	gate := newLeadGate(fetchLead(cfg), next)
	onBatch := ecfg.OnBatch
	ecfg.OnBatch = func(b export.BatchStats) {
		if onBatch != nil {
			onBatch(b)
		}
		gate.advance(b.To)
	}
	lcfg := loaderConfig(cfg, log, c)
	lcfg.Gate = gate.wait
	if err := withProver(ctx, cfg, store, src, next, log, &lcfg); err != nil {
		return loader.Stats{}, export.Result{}, err
	}
	var st loader.Stats
	var res export.Result
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		st, err = loader.Fetch(gctx, src, store, next, to, lcfg, progress)
		return err
	})
	g.Go(func() (err error) {
		res, err = export.Run(gctx, db, store, dec, ecfg)
		return err
	})
	err := g.Wait()
	return st, res, err
}

// fetchAndExportStreams is fetchAndExport over n export streams (run's,
// and follow's backfill's): ecfg.Stream is split as export splits it
// (export.RunStreams: one backfill row per sub-range, the seams checked
// against staging before anything commits), and each sub-range is fetched
// beside its own export, as fetchAndExport does a whole range, with an Nth
// of the fetch workers. The blocks on both sides of every seam are staged
// first, so that the seams can be checked before any sub-range starts.
func fetchAndExportStreams(ctx context.Context, cfg *Job, store *staging.Store, src loader.Source, db *export.Session, dec export.Decoder, ecfg export.Config, n int, log *slog.Logger, c *counters) (loader.Stats, export.Result, error) {
	parts := export.SplitRange(ecfg.Stream.From, ecfg.Stream.To, n)
	var mu sync.Mutex // guards fetched
	var fetched loader.Stats
	addStats := func(st loader.Stats) {
		mu.Lock()
		defer mu.Unlock()
		addFetch(&fetched, st)
	}
	lcfg := loaderConfig(cfg, log, c)
	// A chain of trust takes heights in order; the sub-ranges are fetched
	// at once, beside their exports: they are staged unproven, and a
	// verify proves them (docs/trust.md).
	log.Warn("export streams fetch their sub-ranges at once: the history they stage is not proven by the chain of trust; verify proves it")
	for _, p := range parts[1:] {
		st, err := loader.Fetch(ctx, src, store, p[0]-1, p[0], lcfg, nil)
		addStats(st)
		if err != nil {
			return fetched, export.Result{}, err
		}
	}
	sessions, closeSessions, err := streamSessions(ctx, cfg, db, len(parts), log, c)
	defer closeSessions()
	if err != nil {
		return fetched, export.Result{}, err
	}
	pcfg := *cfg
	pcfg.FetchWorkers = max(1, cfg.FetchWorkers/len(parts))
	pcfg.Trust = TrustOff
	ecfg.RunPart = func(ctx context.Context, i int, sess *export.Session, part export.Config) (export.Result, error) {
		cur, err := loadCursor(ctx, sess, cfg.Schema, part.Stream)
		if err != nil {
			return export.Result{}, err
		}
		if next := cur.Next(part.Stream.From); next <= part.Stream.To {
			st, res, err := fetchAndExport(ctx, &pcfg, store, src, sess, dec, part, next, log.With("part", i+1, "of", len(parts)), c)
			addStats(st)
			return res, err
		}
		return export.Run(ctx, sess, store, dec, part) // complete already
	}
	res, err := export.RunStreams(ctx, sessions, store, dec, ecfg)
	return fetched, res, err
}

// analyzeFilled runs ANALYZE on the tables a completed bounded run or
// export filled, so that the first queries after a bulk load are planned
// on the rows that are there (follow leaves it to autovacuum: it adds a
// few rows at a time). A failure is logged, not returned: the range is
// complete and its rows are right, only the planner's statistics are stale.
func analyzeFilled(ctx context.Context, cfg *Job, db *export.Session, sum *Summary, log *slog.Logger) int {
	if !analyzes(cfg, sum) {
		return 0
	}
	return analyzeTables(ctx, cfg, db, filledTables(sum.Export), log)
}

// analyzeTables ANALYZEs the tables named (analyzeFilled) and returns how
// many it analyzed; a failure is logged, not returned.
func analyzeTables(ctx context.Context, cfg *Job, db *export.Session, tables []string, log *slog.Logger) int {
	if len(tables) == 0 {
		return 0
	}
	start := time.Now()
	var done []string
	err := db.Do(ctx, "analyze", func(ctx context.Context, conn *pgx.Conn) (err error) {
		done, err = export.AnalyzeTables(ctx, conn, cfg.Schema, tables)
		return err
	})
	if err != nil {
		log.Warn("planner statistics not updated; run ANALYZE on the tables", "err", err)
		return 0
	}
	log.Info("analyzed the tables filled", "tables", done, "took", time.Since(start).Round(time.Millisecond))
	return len(done)
}

// analyzes reports whether the job ANALYZEs the tables it filled: a
// completed bounded run or export that exported something.
func analyzes(cfg *Job, sum *Summary) bool {
	return sum.Complete && sum.Export.Blocks > 0 && cfg.Command != CmdFollow
}

// openExportJobChecked builds what run and follow need: the decoder, the
// source (which contacts nothing yet), a PostgreSQL session, and the schema
// with its indexes prepared. check, when not nil, runs once connected and
// before the schema is touched: what it refuses leaves nothing behind. The
// caller closes the session.
func openExportJobChecked(ctx context.Context, cfg *Job, tip func() uint64, log *slog.Logger, c *counters, check func(*export.Session, export.Decoder, loader.Source) error) (export.Decoder, loader.Source, *export.Session, error) {
	dec, err := cfg.decoder()
	if err != nil {
		return nil, nil, nil, err
	}
	src, err := newSource(cfg, tip, log)
	if err != nil {
		return nil, nil, nil, err
	}
	db, err := dialSession(ctx, cfg, log, c)
	if err != nil {
		closeSource(src)
		return nil, nil, nil, err
	}
	if check != nil {
		if err := check(db, dec, src); err != nil {
			closeSource(src)
			db.Close(context.WithoutCancel(ctx))
			return nil, nil, nil, err
		}
	}
	if err := prepareIndexes(ctx, cfg, db, dec, log, c); err != nil {
		closeSource(src)
		db.Close(context.WithoutCancel(ctx))
		return nil, nil, nil, err
	}
	return dec, src, db, nil
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
