package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/jackc/pgx/v5"
)

// pendingLookupTimeout bounds the read of the pending indexes a stopped job
// reports: it runs after the job's context ended.
const pendingLookupTimeout = 10 * time.Second

// settleIndexes runs when a fill that deferred its secondary indexes ends
// without completing its range. A failure (an error, not a signal) rebuilds
// them: nothing the failed run need keep is left changed, and the rows it
// exported are queryable at once; a resumed fill then runs with them in
// place (--defer-indexes=always drops them again). A signal keeps them
// deferred, since the job is to stop now and its resume goes on filling
// without them. Either way what is left unbuilt is named in sum (the
// summary) as status names it.
func settleIndexes(ctx context.Context, cfg *Job, plan *indexPlan, db *export.Session, sum *Summary, log *slog.Logger, fillErr error) {
	if !plan.deferred || sum.Complete {
		return
	}
	if ctx.Err() == nil && !errors.Is(fillErr, context.Canceled) && !errors.Is(fillErr, ErrInterrupted) {
		var n, keys int
		err := db.Do(ctx, "rebuild deferred indexes", func(ctx context.Context, conn *pgx.Conn) (err error) {
			pending, err := export.PendingIndexes(ctx, conn, cfg.Schema)
			if err != nil || len(pending) == 0 {
				return err
			}
			k, err := export.PendingKeys(ctx, conn, cfg.Schema)
			if err != nil {
				return err
			}
			keys = len(k)
			log.Warn("the fill failed: building the indexes it dropped, so that the rows exported are queryable", "indexes", len(pending)-keys, "primary_keys", keys)
			n, err = export.BuildIndexes(ctx, conn, cfg.Schema, indexBuildOptions(cfg, plan, db, log))
			return err
		})
		if err == nil {
			// Keys are built first: those built beyond them are indexes.
			sum.KeysRebuilt = min(n, keys)
			sum.IndexesRebuilt = n - sum.KeysRebuilt
			return
		}
		log.Warn("indexes the failed fill dropped are not rebuilt; the next run builds them", "err", err)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingLookupTimeout)
	defer cancel()
	// A signal may have closed the session's connection mid-statement.
	conn := db.Conn()
	if conn == nil || conn.IsClosed() {
		dial := db.Dialer()
		if dial == nil {
			return
		}
		var err error
		if conn, err = dial(lctx); err != nil {
			log.Warn("cannot read which indexes are still deferred", "err", err)
			return
		}
		defer conn.Close(lctx)
	}
	pending, err := export.PendingIndexes(lctx, conn, cfg.Schema)
	if err == nil {
		sum.KeysPending, err = export.PendingKeys(lctx, conn, cfg.Schema)
	}
	if err == nil {
		sum.IndexesPresent, err = export.IndexesPresent(lctx, conn, cfg.Schema, pending)
	}
	if err != nil {
		log.Warn("cannot read which indexes are still deferred", "err", err)
		return
	}
	sum.IndexesPending = pending
}

// indexesPresent reads from the catalog which of the pending indexes exist
// (export.IndexesPresent) on a connection of its own, the job's context
// having ended (an interrupted build); nil when it cannot.
func indexesPresent(ctx context.Context, cfg *Config, db *export.Session, pending []string, log *slog.Logger) map[string]string {
	dial := db.Dialer()
	if dial == nil || len(pending) == 0 {
		return nil
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingLookupTimeout)
	defer cancel()
	conn, err := dial(lctx)
	if err != nil {
		log.Warn("cannot read which deferred indexes exist", "err", err)
		return nil
	}
	defer conn.Close(lctx)
	present, err := export.IndexesPresent(lctx, conn, cfg.Schema, pending)
	if err != nil {
		log.Warn("cannot read which deferred indexes exist", "err", err)
	}
	return present
}

// writePending says which of the deferred indexes pending (keys among
// them) exist and which do not yet, indexes and primary keys apart, as the
// catalog says (present: export.IndexesPresent), not the build's plan.
func writePending(out io.Writer, pending, keys []string, present map[string]string) {
	var indexes []string
	for _, name := range pending {
		if !slices.Contains(keys, name) {
			indexes = append(indexes, name)
		}
	}
	write := func(what string, names []string) {
		if len(names) == 0 {
			return
		}
		var built, index, not []string
		for _, n := range names {
			switch present[n] {
			case "built":
				built = append(built, n)
			case "index":
				index = append(index, n)
			default:
				not = append(not, n)
			}
		}
		var parts []string
		if len(built) > 0 {
			parts = append(parts, fmt.Sprintf("%d built: %s", len(built), strings.Join(built, ", ")))
		}
		if len(index) > 0 {
			parts = append(parts, fmt.Sprintf("%d with the unique index built, not yet attached as the key: %s", len(index), strings.Join(index, ", ")))
		}
		if len(not) > 0 {
			parts = append(parts, fmt.Sprintf("%d not built yet: %s", len(not), strings.Join(not, ", ")))
		}
		fmt.Fprintf(out, "  %s: %d deferred; %s (the next run finishes them)\n", what, len(names), strings.Join(parts, "; "))
	}
	write("indexes", indexes)
	write("primary keys", keys)
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
