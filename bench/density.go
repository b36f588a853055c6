package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// runDensity stages one workload, exports it into a fresh database and
// COPYs the same rows into another: ingest, export and baseline, in that
// order, from one staging store.
func runDensity(ctx context.Context, cfg *Config, d density) (res DensityResult, err error) {
	res = DensityResult{Name: d.name, Blocks: d.blocks}
	dir, err := os.MkdirTemp(cfg.WorkDir, "blockhaul-bench-"+d.name+"-")
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	store, err := staging.Open(dir, staging.Options{})
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := store.Close(); err == nil {
			err = cerr
		}
	}()

	cfg.Logger.Info("ingest", "density", d.name, "blocks", d.blocks)
	if res.Ingest, err = ingest(ctx, cfg, d, store); err != nil {
		return res, err
	}
	cfg.Logger.Info("ingest done", "density", d.name, "blocks_per_s", int(res.Ingest.BlocksPerSec),
		"raw_mb_per_s", int(res.Ingest.RawMBPerSec), "ratio", round2(res.Ingest.Ratio))

	// Export and baseline alternate (export first in even rounds, baseline
	// first in odd ones), each into a database of its own, and the best
	// round of each counts: whatever the machine does meanwhile (writeback
	// of the staging files, autovacuum, another process) is charged to both
	// sides alike.
	for round := range cfg.Rounds {
		exportFirst := round%2 == 0
		for step := range 2 {
			if (step == 0) == exportFirst {
				cfg.Logger.Info("export", "density", d.name, "round", round+1)
				run, rows, cpu, err := exportStaged(ctx, cfg, d, store, round == 0)
				if err != nil {
					return res, err
				}
				if res.Export.Seconds == 0 || run.Seconds < res.Export.Seconds {
					res.ExportCPU = cpu
				}
				res.Export = best(res.Export, run)
				res.Rows = rows
				cfg.Logger.Info("export done", "density", d.name, "blocks_per_s", int(run.BlocksPerSec), "rows_per_s", int(run.RowsPerSec))
			} else {
				cfg.Logger.Info("baseline", "density", d.name, "round", round+1)
				run, cpu, err := watchedBaseline(ctx, cfg, d, store, round == 0)
				if err != nil {
					return res, err
				}
				if res.Baseline.Seconds == 0 || run.Seconds < res.Baseline.Seconds {
					res.BaselineCPU = cpu
				}
				res.Baseline = best(res.Baseline, run)
				cfg.Logger.Info("baseline done", "density", d.name, "blocks_per_s", int(run.BlocksPerSec), "rows_per_s", int(run.RowsPerSec))
			}
		}
	}
	if res.Baseline.Rows != res.Export.Rows {
		return res, fmt.Errorf("bench: %s: baseline copied %d rows, export %d: the two loads are not comparable", d.name, res.Baseline.Rows, res.Export.Rows)
	}
	if res.Export.Seconds > 0 {
		res.Ratio = res.Baseline.Seconds / res.Export.Seconds
	}
	if d.blocks > 0 {
		res.RowsPerBlock = float64(res.Export.Rows) / float64(d.blocks)
	}
	cfg.Logger.Info("export vs baseline", "density", d.name, "export_over_baseline", round2(res.Ratio))
	return res, nil
}

// best keeps the faster of two runs of the same load, and the times of
// every run so far.
func best(have, run CopyRun) CopyRun {
	all := append(have.AllSeconds, run.Seconds)
	if have.Seconds > 0 && have.Seconds <= run.Seconds {
		have.AllSeconds = all
		return have
	}
	run.AllSeconds = all
	return run
}

// ingest stages [1, blocks] of the synthetic chain through the loader, as
// `blockhaul fetch` does, and times it up to the final flush. The records
// are rendered before the clock starts (as the baseline's rows are decoded
// before its clock starts): the figure is the loader and staging, not the
// generator, whose rate is measured on its own.
func ingest(ctx context.Context, cfg *Config, d density, store *staging.Store) (IngestResult, error) {
	src, err := render(ctx, d.source, 1, d.blocks, runtime.GOMAXPROCS(0), cfg.IngestSpan)
	if err != nil {
		return IngestResult{}, err
	}
	settle()
	stop, err := startProfile(cfg, "ingest-"+d.name)
	if err != nil {
		return IngestResult{}, err
	}
	t0 := time.Now()
	st, err := loader.Fetch(ctx, src, store, 1, d.blocks, loader.Config{Workers: cfg.IngestWorkers, Span: cfg.IngestSpan}, nil)
	if err == nil {
		err = store.Flush()
	}
	sec := time.Since(t0).Seconds()
	stop()
	if err != nil {
		return IngestResult{}, fmt.Errorf("bench: ingest %s: %w", d.name, err)
	}
	if st.Blocks != d.blocks {
		return IngestResult{}, fmt.Errorf("bench: ingest %s: staged %d blocks of %d (store not empty?)", d.name, st.Blocks, d.blocks)
	}
	r := IngestResult{
		Blocks: st.Blocks, Seconds: sec, BlocksPerSec: perSec(st.Blocks, sec),
		RawBytes: st.RawBytes, StoredBytes: st.StoredBytes,
		RawMBPerSec: float64(st.RawBytes) / 1e6 / sec, StoredMBPerSec: float64(st.StoredBytes) / 1e6 / sec,
		DiskBytes: store.DiskUsage().Bytes,
	}
	if st.StoredBytes > 0 {
		r.Ratio = float64(st.RawBytes) / float64(st.StoredBytes)
	}
	if want := src.rawBytes(); uint64(st.RawBytes) != want {
		return r, fmt.Errorf("bench: ingest %s: staged %d raw bytes, rendered %d", d.name, st.RawBytes, want)
	}
	src = nil
	runtime.GC()
	r.SourceBlocksPerSec, err = sourceRate(ctx, d.source, min(d.blocks, 5000), cfg.IngestWorkers, cfg.IngestSpan)
	return r, err
}

// sourceRate is the synthetic source alone over [1, n] with the loader's
// concurrency and span, keeping nothing.
func sourceRate(ctx context.Context, src loader.Source, n uint64, workers, span int) (float64, error) {
	settle()
	t0 := time.Now()
	if err := fetchSpans(ctx, src, 1, n, workers, span, nil); err != nil {
		return 0, fmt.Errorf("bench: source alone: %w", err)
	}
	return perSec(n, time.Since(t0).Seconds()), nil
}

// exportStaged runs export.Run over the staged range into a fresh database
// whose tables were created beforehand, exactly as the baseline's are.
func exportStaged(ctx context.Context, cfg *Config, d density, store *staging.Store, profile bool) (CopyRun, map[string]uint64, LoadCPU, error) {
	return exportLoad(ctx, cfg, d, store, 1, profile)
}

// decodedBatch is one export batch's rows, decoded ahead of the baseline.
type decodedBatch struct {
	from, to uint64
	rows     *chain.Rows
}

// decodeBatches decodes the staged range into rows held in memory, cut into
// the export's batches, one batch per CPU at a time.
func decodeBatches(ctx context.Context, store *staging.Store, dec export.Decoder, from, to uint64, batchBlocks int) ([]decodedBatch, error) {
	tables := dec.Tables()
	var out []decodedBatch
	for lo := from; lo <= to; lo += uint64(batchBlocks) {
		out = append(out, decodedBatch{from: lo, to: min(lo+uint64(batchBlocks)-1, to), rows: chain.NewRows(tables)})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for _, b := range out {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return decodeRange(store, dec, b.from, b.to, b.rows)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func decodeRange(store *staging.Store, dec export.Decoder, from, to uint64, rows *chain.Rows) error {
	it, err := store.Scan(from, to)
	if err != nil {
		return err
	}
	defer it.Close()
	want := from
	for it.Next() {
		b := it.Block()
		if b.Height != want {
			break
		}
		if err := dec.Decode(b.Height, b.Raw, rows); err != nil {
			return fmt.Errorf("bench: baseline: decode %d: %w", b.Height, err)
		}
		want++
	}
	if err := it.Err(); err != nil {
		return err
	}
	if want != to+1 {
		return fmt.Errorf("bench: baseline: height %d missing from staging", want)
	}
	return nil
}

// baseline is the limit export is judged against: the same rows, decoded
// before the clock starts, COPYed with pgx's binary COPY into identical
// empty tables of a fresh database, in the same batches and transactions
// (synchronous_commit off but for the last, as export does). Only
// blockhaul's own work is missing: reading staging, decoding, checking
// continuity and the checkpoint upsert.
func baseline(ctx context.Context, cfg *Config, d density, store *staging.Store, profile bool) (run CopyRun, err error) {
	return baselineWith(ctx, cfg, d, store, profile, nil)
}

// watchedBaseline is baseline with its CPU split like an export's.
func watchedBaseline(ctx context.Context, cfg *Config, d density, store *staging.Store, profile bool) (CopyRun, LoadCPU, error) {
	var cpu LoadCPU
	run, err := baselineWith(ctx, cfg, d, store, profile, func(ctx context.Context, url string, pid int) (func(), error) {
		lm, err := startLoadMonitor(ctx, url, []int{pid}, cfg.StateInterval)
		if err != nil {
			return nil, err
		}
		return func() { cpu = lm.finish(ctx) }, nil
	})
	return run, cpu, err
}

// loadWatch, when a load is about to start, starts watching the load's one
// connection (its database URL and backend PID); the returned stop ends it.
type loadWatch func(ctx context.Context, url string, pid int) (stop func(), err error)

// baselineWith is baseline, with watch (if not nil) watching the COPYs
// from just before the clock starts to just after it stops.
func baselineWith(ctx context.Context, cfg *Config, d density, store *staging.Store, profile bool, watch loadWatch) (run CopyRun, err error) {
	batches, err := decodeBatches(ctx, store, d.dec, 1, d.blocks, cfg.BatchBlocks)
	if err != nil {
		return run, err
	}
	db, conn, done, err := scratchConn(ctx, cfg, "baseline_"+d.name)
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, done()) }()
	schema := d.name
	tables := d.dec.Tables()
	if err := export.EnsureSchema(ctx, conn, schema, tables, false, nil); err != nil {
		return run, err
	}
	columns := make([][]string, len(tables))
	for i, t := range tables {
		columns[i] = t.ColumnNames()
	}
	settle()
	unwatch := func() {}
	if watch != nil {
		var pid int
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			return run, fmt.Errorf("bench: backend pid: %w", err)
		}
		if unwatch, err = watch(ctx, db.url, pid); err != nil {
			return run, err
		}
	}
	sm := startSampler(cfg.SampleInterval)
	stop, err := startProfileIf(profile, cfg, "baseline-"+d.name)
	if err != nil {
		_, _ = sm.finish()
		unwatch()
		return run, err
	}
	t0 := time.Now()
	for i, b := range batches {
		last := i == len(batches)-1
		var n int64
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if !last {
				if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
					return err
				}
			}
			for ti, t := range tables {
				rows := b.rows.Table(ti)
				if len(rows) == 0 {
					continue
				}
				c, err := tx.CopyFrom(ctx, pgx.Identifier{schema, t.Name}, columns[ti], pgx.CopyFromRows(rows))
				if err != nil {
					return fmt.Errorf("copy %s: %w", t.Name, err)
				}
				n += c
			}
			return nil
		})
		if err != nil {
			break
		}
		sm.add(b.to-b.from+1, uint64(n))
		run.Rows += uint64(n)
		run.Blocks += b.to - b.from + 1
		run.Batches++
	}
	sec := time.Since(t0).Seconds()
	unwatch()
	stop()
	run.Samples, run.Commits = sm.finish()
	if err != nil {
		return run, fmt.Errorf("bench: baseline %s: %w", d.name, err)
	}
	run.Seconds, run.BlocksPerSec, run.RowsPerSec = sec, perSec(run.Blocks, sec), perSec(run.Rows, sec)
	return run, nil
}
