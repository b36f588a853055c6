package pipeline

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// A bounded fill — run, export, follow's backfill — is a table of stages
// (runStages, exportStages, backfillStages) run in order by one driver
// (fill.run) over the parts they share (fill), as erigon's staged sync is a
// table of stages rather than a function per combination. The driver owns
// what every fill does the same way: the range split into export streams
// once (export.Parts), the seams, a session per stream, each stream's
// checkpoint read before it starts, fetch held within the lead of export
// (leadGate), the progress the monitor shows, and the end of the fill
// (deferred index builds and ANALYZE, or their settlement when it failed).
// To add a stage (an output beside PostgreSQL, a verification) is to write
// its func and put it in the tables of the commands that run it
// (docs/layout.md, "Adding a stage").

// fill is what the stages of one bounded fill share: made by the command
// that runs it (openFill), read by its stages, which record what they
// decide (the stream, the number of streams) and what they did.
type fill struct {
	job   *Job
	store *staging.Store
	src   loader.Source // nil: the fill reads staging alone (export)
	dec   export.Decoder
	db    *export.Session
	plan  *indexPlan
	log   *slog.Logger
	c     *counters

	ecfg export.Config // the stream filled and the export's hooks: set by a range stage
	n    int           // export streams: set by the streams stage, and why
	why  string
	// done: a stage found the range complete already; the rest are skipped.
	done bool
	next uint64 // the first height the fill exports, when a stage read it

	mu       sync.Mutex // guards fetched while the parts copy
	fetched  loader.Stats
	exported export.Result
}

// stage is one step of a fill.
type stage struct {
	name string
	// writes marks a stage that writes rows: once it has started, the fill
	// ends with its after-fill step whatever happens (the indexes it
	// deferred are settled on a failure).
	writes bool
	run    func(ctx context.Context, f *fill) error
}

// The stages of each bounded command, in order.
var (
	runStages      = []stage{{name: "range", run: rangeFromSource}, {name: "streams", run: planFillStreams}, {name: "copy", writes: true, run: copyStreams}}
	exportStages   = []stage{{name: "range", run: rangeFromStaging}, {name: "streams", run: planFillStreams}, {name: "copy", writes: true, run: copyStreams}}
	backfillStages = []stage{{name: "range", run: rangeOfBackfill}, {name: "streams", run: backfillStreams}, {name: "copy", writes: true, run: copyStreams}}
)

// run runs stages over f in order until one fails or finds the range
// complete, then after (nil: none) with the error of the stages, once a
// stage that writes has started or none failed. A stage failing before any
// writes returns its error as it is: nothing was written.
func (f *fill) run(ctx context.Context, stages []stage, after func(context.Context, *fill, error) error) error {
	wrote := false
	var err error
	for _, s := range stages {
		if f.done {
			break
		}
		wrote = wrote || s.writes
		if err = s.run(ctx, f); err != nil {
			if !wrote {
				return err
			}
			break
		}
	}
	if after == nil {
		return err
	}
	return after(ctx, f, err)
}

// endFillStage is the after-fill step of run and export: the job's summary
// takes what the copy did, and the deferred indexes are built and the
// tables analyzed (or, after a failure, the indexes settled: endFill).
func endFillStage(sum *Summary) func(context.Context, *fill, error) error {
	return func(ctx context.Context, f *fill, err error) error {
		sum.Fetch, sum.Export, sum.Complete = f.fetched, f.exported, f.exported.Complete
		sum.To, sum.Streams, sum.StreamsWhy = f.job.To, f.n, f.why
		return endFill(ctx, f.job, f.plan, f.db, sum, f.log, err)
	}
}

// openFill builds what run and follow need: the decoder, the source
// (which contacts nothing yet), a PostgreSQL session, and the schema with
// its indexes prepared. check, when not nil, runs once connected and before
// the schema is touched: what it refuses leaves nothing behind. The caller
// closes f (f.close).
func openFill(ctx context.Context, cfg *Job, store *staging.Store, tip func() uint64, log *slog.Logger, c *counters, check func(*fill) error) (*fill, error) {
	dec, err := cfg.decoder()
	if err != nil {
		return nil, err
	}
	src, err := newSource(cfg, tip, log)
	if err != nil {
		return nil, err
	}
	db, err := dialSession(ctx, cfg, log, c)
	if err != nil {
		closeSource(src)
		return nil, err
	}
	f := &fill{job: cfg, store: store, src: src, dec: dec, db: db, plan: &c.idx, log: log, c: c}
	if check != nil {
		if err := check(f); err != nil {
			f.close(ctx)
			return nil, err
		}
	}
	if err := prepareIndexes(ctx, f.job, db, dec, log, c); err != nil {
		f.close(ctx)
		return nil, err
	}
	return f, nil
}

// close releases the fill's source and session.
func (f *fill) close(ctx context.Context) {
	if f.src != nil {
		closeSource(f.src)
	}
	f.db.Close(context.WithoutCancel(ctx))
}

// runBoth fetches and exports at once (run): export follows the contiguous
// prefix that fetch has staged. A range the alias already completed returns
// at once without contacting the source.
func runBoth(ctx context.Context, cfg *Job, store *staging.Store, tip func() uint64, log *slog.Logger, sum *Summary, c *counters) error {
	// Refuse a foreign target table, a range above the tip or another
	// chain than the target holds before the schema, the backfill row or
	// an index is touched.
	f, err := openFill(ctx, cfg, store, tip, log, c, func(f *fill) error {
		if err := checkTargetFamily(ctx, cfg, f.db, store, f.src); err != nil {
			return err
		}
		if err := f.db.Do(ctx, "check tables of "+cfg.Schema, func(ctx context.Context, conn *pgx.Conn) error {
			return export.CheckShapes(ctx, conn, cfg.Schema, f.dec.Tables())
		}); err != nil {
			return err
		}
		if err := checkRunSource(ctx, cfg, store, f.src); err != nil {
			return err
		}
		return checkTargetChain(ctx, cfg, f.db, store, f.dec, f.src, log)
	})
	if err != nil {
		return err
	}
	defer f.close(ctx)
	if err := recordDecoders(ctx, cfg, f.db); err != nil {
		return err
	}
	return f.run(ctx, runStages, endFillStage(sum))
}

// runExport exports [from, to] from staging alone (export); it never builds
// a source.
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
		cfg = cfg.withRange(cfg.From, last)
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
	f := &fill{job: cfg, store: store, dec: dec, db: db, plan: &c.idx, log: log, c: c}
	defer f.close(ctx)
	if err := checkTargetChain(ctx, cfg, db, store, dec, nil, log); err != nil {
		return err
	}
	if err := recordDecoders(ctx, cfg, db); err != nil {
		return err
	}
	if err := prepareIndexes(ctx, cfg, db, dec, log, c); err != nil {
		return err
	}
	return f.run(ctx, exportStages, endFillStage(sum))
}

// rangeFromSource is run's range stage: the range end (--to, else where
// the head stream started, else the chain's tip, refused when above it),
// and nothing more to do when the alias completed it already.
func rangeFromSource(ctx context.Context, f *fill) error {
	cfg := f.job
	if cfg.ToSet {
		done, err := f.complete(ctx, exportConfig(cfg, f.plan, f.log, f.c).Stream)
		if err != nil || done {
			return err
		}
	}
	if !cfg.ToSet {
		// A backfill without an end stops where the head stream started.
		var start uint64
		var ok bool
		if err := f.db.Do(ctx, "read head start", func(ctx context.Context, conn *pgx.Conn) (err error) {
			start, ok, err = export.HeadStart(ctx, conn, cfg.Schema)
			return err
		}); err != nil {
			return err
		} else if ok && start > cfg.From {
			cfg = cfg.withRange(cfg.From, start-1)
			f.log.Info("backfill runs up to where the head stream started", "to", cfg.To)
		}
	}
	cfg, err := resolveTo(ctx, cfg, f.src)
	if err != nil {
		return err
	}
	f.job = cfg
	f.c.m.SetRange(cfg.From, cfg.To) // the summary shows the range also when --to was omitted
	f.ecfg = exportConfig(cfg, f.plan, f.log, f.c)
	return nil
}

// complete reports whether stream s is complete already, and marks f done
// with its checkpoint as what was exported when it is.
func (f *fill) complete(ctx context.Context, s export.Stream) (bool, error) {
	cur, err := loadCursor(ctx, f.db, f.job.Schema, s)
	if err != nil || !cur.Valid || cur.Height < s.To {
		return false, err
	}
	f.done, f.exported.Last, f.exported.Complete = true, cur, true
	f.log.Info("range already complete", "alias", s.Alias, "from", s.From, "to", s.To)
	return true, nil
}

// rangeFromStaging is export's range stage: the range was fixed from
// staging before the session opened (runExport).
func rangeFromStaging(_ context.Context, f *fill) error {
	f.ecfg = exportConfig(f.job, f.plan, f.log, f.c)
	return nil
}

// planFillStreams is the streams stage: how many export streams the range
// is split into, and why (planStreams).
func planFillStreams(ctx context.Context, f *fill) error {
	beside := 0
	if f.job.Command == CmdFollow {
		beside = 1 // the head stream
	}
	n, why, err := planStreams(ctx, f.job, f.db, f.ecfg.Stream, beside, f.log)
	if err != nil {
		return err
	}
	f.n, f.why = n, why
	return nil
}

// copyStreams is the copy stage: f.ecfg.Stream split once into f.n parts
// (export.Parts), each exported on a session of its own, fetched beside its
// export when the fill has a source. With more than one part the parent
// stream is registered and its seams checked first (their blocks staged
// first when fetching), and marked complete once every part is.
func copyStreams(ctx context.Context, f *fill) error {
	parts := export.Parts(f.ecfg.Stream, f.n)
	if len(parts) == 1 {
		res, err := f.copyPart(ctx, f.db, f.job, f.ecfg)
		f.exported = res
		return err
	}
	start := time.Now()
	// The fill's time is the parts' together, as export.RunStreams gives
	// it (the summary's export time, the bench's fill).
	defer func() { f.exported.Duration = time.Since(start) }()
	if f.src != nil {
		lcfg := loaderConfig(f.job, f.log, f.c)
		for _, p := range parts[1:] {
			st, err := loader.Fetch(ctx, f.src, f.store, p.From-1, p.From, lcfg, nil)
			addFetch(&f.fetched, st)
			if err != nil {
				return err
			}
		}
	}
	sessions, closeSessions, err := streamSessions(ctx, f.job, f.db, len(parts), f.log, f.c)
	defer closeSessions() // before the index builds dial their connections
	if err != nil {
		return err
	}
	done, res, err := export.OpenStreams(ctx, f.db, f.store, f.dec, f.ecfg, parts)
	if err != nil || done {
		f.exported = res
		return err
	}
	// Each part fetches with its share of the workers.
	pj := *f.job
	pj.FetchWorkers = max(1, f.job.FetchWorkers/len(parts))
	if f.src != nil {
		// A chain of trust takes heights in order; the sub-ranges are
		// fetched at once, beside their exports: they are staged unproven,
		// and a verify proves them (docs/trust.md).
		f.log.Warn("export streams fetch their sub-ranges at once: the history they stage is not proven by the chain of trust; verify proves it")
		pj.Trust = TrustOff
	}
	res, err = export.RunParts(ctx, f.dec, f.ecfg, parts, func(ctx context.Context, i int, pc export.Config) (export.Result, error) {
		return f.copyPart(ctx, sessions[i], &pj, pc)
	})
	if err == nil {
		res, err = export.CloseStreams(ctx, f.db, f.ecfg, parts, res)
	}
	f.exported = res
	return err
}

// copyPart copies one part (ecfg.Stream) over sess: from its checkpoint,
// fetched beside its export when the fill has a source (fetchAndExport),
// else exported from staging.
func (f *fill) copyPart(ctx context.Context, sess *export.Session, j *Job, ecfg export.Config) (export.Result, error) {
	if f.src == nil {
		return export.Run(ctx, sess, f.store, f.dec, ecfg)
	}
	cur, err := loadCursor(ctx, sess, j.Schema, ecfg.Stream)
	if err != nil {
		return export.Result{}, err
	}
	next := cur.Next(ecfg.Stream.From)
	if next > ecfg.Stream.To {
		return export.Run(ctx, sess, f.store, f.dec, ecfg) // complete already
	}
	st, res, err := fetchAndExport(ctx, j, f.store, f.src, sess, f.dec, ecfg, next, ecfg.Logger, f.c)
	f.mu.Lock()
	addFetch(&f.fetched, st)
	f.mu.Unlock()
	return res, err
}

// fetchAndExport stages [next, ecfg.Stream.To] from src while it exports
// that stream over db, export following the contiguous staged prefix and
// fetch held within the lead of what export has committed.
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
