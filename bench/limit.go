package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/pipeline"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// runLimit measures, for one family, blockhaul's whole export against the
// limit PostgreSQL sets for the same end state, like for like:
//
//   - export: `blockhaul export --export-streams 1` in-process
//     (pipeline.Run, the command's own code): secondary indexes deferred,
//     the fill, the deferred builds, ANALYZE of the tables filled; and the
//     same with 2 streams;
//   - the limit: the rows of that export dumped with binary COPY (untimed),
//     then the tables recreated as pg_dump's pre-data section has them (no
//     primary key, no index), every file COPYed back in one transaction,
//     the post-data section (primary keys, then every secondary index) built
//     on one connection with the server's settings, as pg_restore does,
//     and ANALYZE of every table: the same rows, indexes and statistics.
//
// Each load runs into a fresh database, Rounds times in rotating order; the
// fastest of each counts. Besides the two ratios of whole times the phases
// give the fill-only ratio (the limit's COPY over export's fill).
func runLimit(ctx context.Context, cfg *Config, d density) (res LimitResult, err error) {
	res = LimitResult{Chain: d.name, Blocks: d.blocks}
	dir, err := os.MkdirTemp(cfg.WorkDir, "blockhaul-bench-limit-"+d.name+"-")
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	stagingDir := filepath.Join(dir, "staging")
	if err := stageLimit(ctx, cfg, d, stagingDir); err != nil {
		return res, err
	}
	dumpDir := filepath.Join(dir, "dump")
	var dump *tableDump

	// Loads: 0 and 1 export with 1 and 2 streams, 2 is the limit. The
	// order rotates between rounds; the first round starts with the
	// one-stream export, whose database the limit's rows are dumped from.
	counts := []int{1, 2}
	const loads = 3
	for round := range cfg.Rounds {
		for k := range loads {
			l := (k + round) % loads
			if l == 2 {
				cfg.Logger.Info("limit: restore", "chain", d.name, "round", round+1)
				run, err := restoreLoad(ctx, cfg, d, dump)
				if err != nil {
					return res, err
				}
				res.Limit = bestPhases(res.Limit, run)
				cfg.Logger.Info("limit: restore done", "chain", d.name, "seconds", round2(run.Seconds),
					"copy", round2(run.Fill), "post_data", round2(run.Indexes), "analyze", round2(run.Analyze))
				continue
			}
			n := counts[l]
			var keep func(url string) error
			if dump == nil && n == 1 {
				keep = func(url string) (err error) {
					cfg.Logger.Info("limit: dump", "chain", d.name)
					dump, err = dumpTables(ctx, url, d, dumpDir)
					return err
				}
			}
			cfg.Logger.Info("limit: export", "chain", d.name, "streams", n, "round", round+1)
			run, err := fullExport(ctx, cfg, d, stagingDir, n, keep)
			if err != nil {
				return res, err
			}
			if n == 1 {
				res.Export = bestPhases(res.Export, run)
			} else {
				res.Export2 = bestPhases(res.Export2, run)
			}
			cfg.Logger.Info("limit: export done", "chain", d.name, "streams", n, "seconds", round2(run.Seconds),
				"fill", round2(run.Fill), "indexes", round2(run.Indexes), "analyze", round2(run.Analyze))
		}
	}
	if err := res.compare(d.name); err != nil {
		return res, err
	}
	cfg.Logger.Info("export vs the limit", "chain", d.name, "like_for_like", round2(res.Ratio), "fill_only", round2(res.FillRatio), "two_streams", round2(res.TwoOverOne))
	return res, nil
}

// stageLimit stages the section's blocks into a new store in dir; the
// store is closed after, as pipeline.Run opens it itself, as the command does.
func stageLimit(ctx context.Context, cfg *Config, d density, dir string) error {
	store, err := staging.Open(dir, staging.Options{})
	if err != nil {
		return err
	}
	cfg.Logger.Info("limit: ingest", "chain", d.name, "blocks", d.blocks)
	_, err = ingest(ctx, cfg, d, store)
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	return err
}

// compare checks that the loads hold the same rows and sets the ratios.
func (res *LimitResult) compare(chain string) error {
	res.Rows = res.Export.Rows
	for _, r := range []PhaseRun{res.Export2, res.Limit} {
		if r.Rows != res.Rows {
			return fmt.Errorf("bench: limit %s: the loads hold %d, %d and %d rows: not comparable", chain, res.Export.Rows, res.Export2.Rows, res.Limit.Rows)
		}
	}
	if res.Export.Seconds > 0 {
		res.Ratio = res.Limit.Seconds / res.Export.Seconds
	}
	if res.Export.Fill > 0 {
		res.FillRatio = res.Limit.Fill / res.Export.Fill
	}
	if res.Export2.Seconds > 0 {
		res.TwoOverOne = res.Export.Seconds / res.Export2.Seconds
	}
	return nil
}

// bestPhases keeps the faster of two runs of one load, with the times of
// every run so far.
func bestPhases(have, run PhaseRun) PhaseRun {
	all := append(have.AllSeconds, run.Seconds)
	if have.Seconds > 0 && have.Seconds <= run.Seconds {
		have.AllSeconds = all
		return have
	}
	run.AllSeconds = all
	return run
}

// phaseLog keeps the records of the pipeline's log the phases are read
// from: each deferred index's build time and ANALYZE's.
type phaseLog struct {
	mu     sync.Mutex
	builds []IndexBuild
	took   time.Duration
	beside time.Duration // ANALYZE beside the builds
	next   slog.Handler
}

func (h *phaseLog) Enabled(ctx context.Context, l slog.Level) bool { return true }
func (h *phaseLog) WithAttrs(as []slog.Attr) slog.Handler          { return h }
func (h *phaseLog) WithGroup(string) slog.Handler                  { return h }
func (h *phaseLog) Handle(ctx context.Context, r slog.Record) error {
	switch r.Message {
	case "index built":
		var b IndexBuild
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "index":
				b.Name = a.Value.String()
			case "table":
				b.Table = a.Value.String()
			case "duration":
				b.Seconds = a.Value.Duration().Seconds()
			}
			return true
		})
		h.mu.Lock()
		h.builds = append(h.builds, b)
		h.mu.Unlock()
	case "table analyzed":
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "took" {
				h.mu.Lock()
				h.beside += a.Value.Duration()
				h.mu.Unlock()
			}
			return true
		})
	case "analyzed the tables filled":
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "took" {
				h.mu.Lock()
				h.took = a.Value.Duration()
				h.mu.Unlock()
			}
			return true
		})
	}
	if r.Level >= slog.LevelWarn && h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

// fullExport runs `blockhaul export --export-streams n` over the staged
// range into a fresh database, in this process (pipeline.Run), with the
// heap limit the command sets; keep, if not nil, is given the database
// before it is dropped.
func fullExport(ctx context.Context, cfg *Config, d density, stagingDir string, n int, keep func(url string) error) (run PhaseRun, err error) {
	db, err := createDatabase(ctx, cfg.DatabaseURL, fmt.Sprintf("full%d_%s", n, d.name))
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, db.drop(ctx)) }()
	pc := pipeline.DefaultConfig()
	pc.Command = pipeline.CmdExport
	pc.Chain, pc.ChainSet = d.name, true
	pc.PG = db.url
	pc.Staging = stagingDir
	pc.From, pc.FromSet = 1, true // ingest stages [1, blocks], as the other sections export it
	pc.To, pc.ToSet = d.blocks, true
	pc.ExportStreams = n
	pc.BatchBlocks = cfg.BatchBlocks
	pc.Progress = 0
	pc.MemoryLimitPerStream = pipeline.DefaultMemoryLimitMiB(d.fam) << 20
	pc.Schema = d.name
	if cfg.IndexWorkers > 0 {
		pc.IndexWorkers = cfg.IndexWorkers
	}
	if cfg.IndexMemoryMiB >= 0 {
		pc.IndexMemoryMiB = cfg.IndexMemoryMiB
	}
	logs := &phaseLog{next: cfg.Logger.Handler()}
	settle()
	debug.FreeOSMemory()
	// The heap limit cmd/blockhaul sets, above what this process's runtime
	// already holds of its own (the bench's data, its runtime's memory),
	// which a `blockhaul export` process does not carry. Without it the
	// one-stream export ran its collector back to back (≈330 collections
	// against the command's ≈33 over the same range): its fill took 14.5-18.4 s
	// in this process against 10.6-11.2 s as a command.
	prevLimit := debug.SetMemoryLimit(pc.MemoryLimitPerStream + runtimeHeld())
	defer debug.SetMemoryLimit(prevLimit)
	t0 := time.Now()
	sum, err := pipeline.Run(ctx, pc, io.Discard, slog.New(logs))
	sec := time.Since(t0).Seconds()
	debug.SetMemoryLimit(prevLimit)
	if err != nil {
		return run, fmt.Errorf("bench: export %s with %d streams: %w", d.name, n, err)
	}
	if !sum.Complete || sum.Export.Blocks != d.blocks || len(sum.IndexesPending) > 0 {
		return run, fmt.Errorf("bench: export %s with %d streams: %d blocks of %d, complete %v, indexes pending %v", d.name, n, sum.Export.Blocks, d.blocks, sum.Complete, sum.IndexesPending)
	}
	for _, r := range sum.Export.Rows {
		run.Rows += r
	}
	run.Seconds = sec
	run.Fill = sum.Export.Duration.Seconds()
	run.Analyze = logs.took.Seconds()
	run.AnalyzeBeside = logs.beside.Seconds()
	run.Indexes = max(0, sec-run.Fill-run.Analyze)
	run.Builds = logs.builds
	run.IndexWorkers, run.IndexWorkersWhy = sum.AfterFill.Workers, sum.AfterFill.WorkersWhy
	if keep != nil {
		if err := keep(db.url); err != nil {
			return run, err
		}
	}
	return run, nil
}

// runtimeHeld is the memory this process's runtime holds now and counts
// against a memory limit: everything it has mapped less what it has
// returned to the system.
func runtimeHeld() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// tableDump is an export's end state: each table's rows as a binary COPY
// file, and what pg_dump's post-data section would rebuild.
type tableDump struct {
	schema   string
	tables   []string // with rows, in the decoder's order
	files    map[string]string
	rows     uint64
	postData []postItem // primary keys first, then indexes, as pg_restore runs them
}

type postItem struct {
	name, table string
	key         bool   // a primary key or unique constraint (else an index)
	drop        string // a key's: pre-data has none
	create      string
}

// dumpTables writes every table of d's schema in the database at url to
// dir, with binary COPY, and reads the definitions of their primary keys
// and indexes.
func dumpTables(ctx context.Context, url string, d density, dir string) (*tableDump, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("bench: dump: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	dump := &tableDump{schema: d.name, files: map[string]string{}}
	qs := chain.QuoteIdent(d.name)
	var keys, indexes []postItem
	for _, t := range d.dec.Tables() {
		name := qs + "." + chain.QuoteIdent(t.Name)
		path := filepath.Join(dir, t.Name+".copy")
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("bench: dump: %w", err)
		}
		tag, err := conn.PgConn().CopyTo(ctx, f, "COPY "+name+" TO STDOUT (FORMAT binary)")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("bench: dump %s: %w", name, err)
		}
		if tag.RowsAffected() == 0 {
			continue
		}
		dump.tables = append(dump.tables, t.Name)
		dump.files[t.Name] = path
		dump.rows += uint64(tag.RowsAffected())
		cons, err := namedDefs(ctx, conn, name, "constraints", `SELECT c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c
WHERE c.conrelid = $1::regclass AND c.contype IN ('p', 'u') ORDER BY c.conname`)
		if err != nil {
			return nil, err
		}
		for _, c := range cons {
			keys = append(keys, postItem{name: c.Name, table: t.Name, key: true,
				drop:   "ALTER TABLE " + name + " DROP CONSTRAINT " + chain.QuoteIdent(c.Name),
				create: "ALTER TABLE ONLY " + name + " ADD CONSTRAINT " + chain.QuoteIdent(c.Name) + " " + c.Def})
		}
		ixs, err := namedDefs(ctx, conn, name, "indexes", `SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i
WHERE i.indrelid = $1::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
ORDER BY 1`)
		if err != nil {
			return nil, err
		}
		for _, ix := range ixs {
			short := ix.Name[strings.LastIndex(ix.Name, ".")+1:]
			indexes = append(indexes, postItem{name: short, table: t.Name, create: ix.Def})
		}
	}
	if len(indexes) == 0 {
		return nil, fmt.Errorf("bench: dump %s: the export left no secondary index", d.name)
	}
	dump.postData = append(keys, indexes...)
	return dump, nil
}

// namedDefs runs query, of (name, definition) rows of table, for the dump
// of what it says.
func namedDefs(ctx context.Context, conn *pgx.Conn, table, what, query string) ([]struct{ Name, Def string }, error) {
	rows, err := conn.Query(ctx, query, table)
	if err == nil {
		var defs []struct{ Name, Def string }
		if defs, err = pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Def string }]); err == nil {
			return defs, nil
		}
	}
	return nil, fmt.Errorf("bench: dump %s: %s: %w", table, what, err)
}

// restoreLoad is the limit: a fresh database, the tables as pre-data
// leaves them, then, timed, every dumped file COPYed back in one
// transaction, the post-data section built on the same connection, and
// ANALYZE of every table.
func restoreLoad(ctx context.Context, cfg *Config, d density, dump *tableDump) (run PhaseRun, err error) {
	_, conn, done, err := scratchConn(ctx, cfg, "limit_"+d.name)
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, done()) }()
	// Pre-data: the same tables, without their keys and indexes.
	if err := export.EnsureSchema(ctx, conn, dump.schema, d.dec.Tables(), true, nil); err != nil {
		return run, err
	}
	for _, it := range dump.postData {
		if it.key {
			if _, err := conn.Exec(ctx, it.drop); err != nil {
				return run, fmt.Errorf("bench: limit: pre-data: %s: %w", it.drop, err)
			}
		}
	}
	qs := chain.QuoteIdent(dump.schema)
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = ANY($2)`, dump.schema, dump.tables).Scan(&left); err != nil {
		return run, fmt.Errorf("bench: limit: pre-data: %w", err)
	}
	if left > 0 {
		return run, fmt.Errorf("bench: limit: pre-data: %d indexes left on the tables", left)
	}
	settle()
	t0 := time.Now()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, t := range dump.tables {
			f, err := os.Open(dump.files[t])
			if err != nil {
				return err
			}
			tag, err := tx.Conn().PgConn().CopyFrom(ctx, f, "COPY "+qs+"."+chain.QuoteIdent(t)+" FROM STDIN (FORMAT binary)")
			f.Close()
			if err != nil {
				return fmt.Errorf("copy %s: %w", t, err)
			}
			run.Rows += uint64(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return run, fmt.Errorf("bench: limit %s: %w", d.name, err)
	}
	t1 := time.Now()
	for _, it := range dump.postData {
		s := time.Now()
		if _, err := conn.Exec(ctx, it.create); err != nil {
			return run, fmt.Errorf("bench: limit %s: post-data %s: %w", d.name, it.name, err)
		}
		run.Builds = append(run.Builds, IndexBuild{Name: it.name, Table: it.table, Seconds: time.Since(s).Seconds()})
	}
	t2 := time.Now()
	names := make([]string, len(dump.tables))
	for i, t := range dump.tables {
		names[i] = qs + "." + chain.QuoteIdent(t)
	}
	if _, err := conn.Exec(ctx, "ANALYZE "+strings.Join(names, ", ")); err != nil {
		return run, fmt.Errorf("bench: limit %s: analyze: %w", d.name, err)
	}
	t3 := time.Now()
	run.Seconds = t3.Sub(t0).Seconds()
	run.Fill, run.Indexes, run.Analyze = t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), t3.Sub(t2).Seconds()
	if run.Rows != dump.rows {
		return run, fmt.Errorf("bench: limit %s: copied %d rows back of %d dumped", d.name, run.Rows, dump.rows)
	}
	return run, nil
}

// limitDensity is d with the limit section's range.
func limitDensity(cfg *Config, d density) density {
	if n, ok := map[string]uint64{SectionCometBFT: cfg.LimitCometBFTBlocks, SectionEVM: cfg.LimitEVMBlocks}[d.name]; ok {
		d.blocks = n
	}
	return d
}

// sortedBuilds returns builds slowest first.
func sortedBuilds(bs []IndexBuild) []IndexBuild {
	out := slices.Clone(bs)
	slices.SortStableFunc(out, func(a, b IndexBuild) int {
		switch {
		case a.Seconds > b.Seconds:
			return -1
		case a.Seconds < b.Seconds:
			return 1
		}
		return 0
	})
	return out
}
