package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/pipeline"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// runStreams stages one range of the streams workload and exports it with
// every count of Config.StreamCounts (export.RunStreams, one connection per
// stream, as `blockhaul export --export-streams N` does), each into a fresh
// database, beside the raw-COPY baseline of the same rows. Every load runs
// Rounds times, the order rotating between rounds; the best of each counts.
// Each load's CPU is split between this process (blockhaul), the stream
// backends, PostgreSQL's background writers and everything else, and the
// backends' states are sampled from pg_stat_activity.
func runStreams(ctx context.Context, cfg *Config) (res *StreamsResult, err error) {
	d := streamsDensity(cfg)
	res = &StreamsResult{Chain: d.name, Blocks: d.blocks}
	store, closeStore, err := openScratchStore(cfg, "streams-"+d.name)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, closeStore()) }()
	cfg.Logger.Info("streams: ingest", "chain", d.name, "blocks", d.blocks)
	if _, err := ingest(ctx, cfg, d, store); err != nil {
		return res, err
	}

	// loads[0] is the baseline, then one per stream count.
	counts := slices.Clone(cfg.StreamCounts)
	res.Runs = make([]StreamsRun, len(counts))
	for i, n := range counts {
		res.Runs[i].Streams = n
	}
	loads := len(counts) + 1
	for round := range cfg.Rounds {
		for k := range loads {
			// Rotate the order so that no load always runs first or last.
			l := (k + round) % loads
			if l == 0 {
				cfg.Logger.Info("streams: baseline", "chain", d.name, "round", round+1)
				run, cpu, err := watchedBaseline(ctx, cfg, d, store, false)
				if err != nil {
					return res, err
				}
				if res.Baseline.Seconds == 0 || run.Seconds < res.Baseline.Seconds {
					res.BaselineCPU = cpu
				}
				res.Baseline = best(res.Baseline, run)
				cfg.Logger.Info("streams: baseline done", "rows_per_s", int(run.RowsPerSec))
				continue
			}
			r := &res.Runs[l-1]
			cfg.Logger.Info("streams: export", "chain", d.name, "streams", r.Streams, "round", round+1)
			run, _, cpu, err := exportLoad(ctx, cfg, d, store, r.Streams, false)
			if err != nil {
				return res, err
			}
			if r.Export.Seconds == 0 || run.Seconds < r.Export.Seconds {
				r.CPU = cpu
			}
			r.Export = best(r.Export, run)
			cfg.Logger.Info("streams: export done", "streams", r.Streams, "rows_per_s", int(run.RowsPerSec),
				"backend_busy", round2(cpu.BackendBusy()), "blockhaul_cores", round2(cpu.BlockhaulCores()))
		}
	}
	res.Rows = res.Baseline.Rows
	var one float64
	for _, r := range res.Runs {
		if r.Export.Rows != res.Baseline.Rows {
			return res, fmt.Errorf("bench: streams: %d streams exported %d rows, the baseline copied %d: the loads are not comparable", r.Streams, r.Export.Rows, res.Baseline.Rows)
		}
		if r.Streams == 1 {
			one = r.Export.RowsPerSec
		}
	}
	for i := range res.Runs {
		r := &res.Runs[i]
		if one > 0 {
			r.OverOne = r.Export.RowsPerSec / one
		}
		if res.Baseline.RowsPerSec > 0 {
			r.OverBaseline = r.Export.RowsPerSec / res.Baseline.RowsPerSec
		}
	}
	res.Projection = project(res, cfg.ProjectCores)
	return res, nil
}

// streamsDensity is the workload of the streams section.
func streamsDensity(cfg *Config) density {
	for _, d := range densities(cfg) {
		if d.fam.ID == cfg.StreamsChain {
			d.blocks = cfg.StreamsBlocks
			return d
		}
	}
	panic("bench: streams chain " + cfg.StreamsChain.String() + " has no workload") // Validate refuses it
}

// openScratchStore opens a staging store in a new temporary directory; the
// returned close also removes the directory.
func openScratchStore(cfg *Config, purpose string) (store *staging.Store, closeStore func() error, err error) {
	dir, err := os.MkdirTemp(cfg.WorkDir, "blockhaul-bench-"+purpose+"-")
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	store, err = staging.Open(dir, staging.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return store, func() error {
		err := store.Close()
		os.RemoveAll(dir)
		return err
	}, nil
}

// exportLoad exports the staged range over n streams (export.RunStreams,
// which is export.Run for one) into a fresh database whose tables exist
// beforehand, as the baseline's do, under the heap limit a blockhaul
// process sets for the family and n streams (the baseline, which holds every row at
// once, keeps Go's default). It returns the rows per table and where the
// CPU went; profile writes a CPU profile export-<density>.
func exportLoad(ctx context.Context, cfg *Config, d density, store *staging.Store, n int, profile bool) (run CopyRun, rows map[string]uint64, cpu LoadCPU, err error) {
	purpose := "export_" + d.name
	if n > 1 {
		purpose = fmt.Sprintf("export%d_%s", n, d.name)
	}
	db, err := createDatabase(ctx, cfg.DatabaseURL, purpose)
	if err != nil {
		return run, nil, cpu, err
	}
	defer func() { err = errors.Join(err, db.drop(ctx)) }()
	sessions := make([]*export.Session, n)
	pids := make([]int, n)
	for i := range n {
		conn, err := pgx.Connect(ctx, db.url)
		if err != nil {
			return run, nil, cpu, fmt.Errorf("bench: connect to %s: %w", db.name, err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pids[i]); err != nil {
			return run, nil, cpu, fmt.Errorf("bench: backend pid: %w", err)
		}
		sessions[i] = export.Fixed(conn)
	}
	schema := d.name
	if err := export.EnsureSchema(ctx, sessions[0].Conn(), schema, d.dec.Tables(), false, nil); err != nil {
		return run, nil, cpu, err
	}
	name := d.name
	if n > 1 {
		name = fmt.Sprintf("%s with %d streams", d.name, n)
	}
	settle()
	lm, err := startLoadMonitor(ctx, db.url, pids, cfg.StateInterval)
	if err != nil {
		return run, nil, cpu, err
	}
	sm := startSampler(cfg.SampleInterval)
	stop, err := startProfileIf(profile, cfg, "export-"+d.name)
	if err != nil {
		_, _ = sm.finish()
		_ = lm.finish(ctx)
		return run, nil, cpu, err
	}
	prevLimit := debug.SetMemoryLimit(pipeline.DefaultMemoryLimitMiB(d.fam) * int64(n) << 20) // one limit a stream, as blockhaul sets it
	defer debug.SetMemoryLimit(prevLimit)
	t0 := time.Now()
	res, err := export.RunStreams(ctx, sessions, store, d.dec, export.Config{
		Schema:      schema,
		Stream:      export.Stream{Alias: "bench", From: 1, To: d.blocks},
		BatchBlocks: cfg.BatchBlocks,
		OnBatch: func(b export.BatchStats) {
			rows := 0
			for _, r := range b.Rows {
				rows += r
			}
			sm.add(b.To-b.From+1, uint64(rows))
		},
	})
	sec := time.Since(t0).Seconds()
	debug.SetMemoryLimit(prevLimit)
	stop()
	samples, commits := sm.finish()
	cpu = lm.finish(ctx)
	if err != nil {
		return run, nil, cpu, fmt.Errorf("bench: export %s: %w", name, err)
	}
	if !res.Complete || res.Blocks != d.blocks {
		return run, nil, cpu, fmt.Errorf("bench: export %s: exported %d blocks of %d", name, res.Blocks, d.blocks)
	}
	var total uint64
	for _, r := range res.Rows {
		total += r
	}
	return CopyRun{
		Blocks: res.Blocks, Rows: total, Batches: int(res.Batches), Seconds: sec,
		BlocksPerSec: perSec(res.Blocks, sec), RowsPerSec: perSec(total, sec), Samples: samples, Commits: commits,
	}, res.Rows, cpu, nil
}

// project carries the streams section's figures to a database server of
// cores cores running one stream per core, blockhaul on machines of its
// own, two ways: at the one-stream rate measured here (a floor on a busy
// machine, since contention is in it), and at the server's CPU, each
// backend on a core of its own, at the PostgreSQL CPU per row (backends and
// background writers) of the most parallel load measured. Neither knows the
// server's disks and WAL bandwidth, whose share of the backends' time the
// sampled states show.
func project(res *StreamsResult, cores int) *Projection {
	if cores <= 0 {
		return nil
	}
	one, most := streamsRun(res, 1), (*StreamsRun)(nil)
	for i := range res.Runs {
		if most == nil || res.Runs[i].Streams > most.Streams {
			most = &res.Runs[i]
		}
	}
	if one == nil || most == nil || !most.CPU.Known || most.Export.Rows == 0 {
		return nil
	}
	rows := float64(most.Export.Rows)
	p := &Projection{
		Cores: cores, Streams: cores, FromStreams: most.Streams,
		PerStreamRowsPerSec:      one.Export.RowsPerSec,
		BackendCPUPerRowMicros:   1e6 * most.CPU.Backends / rows,
		WritersCPUPerRowMicros:   1e6 * most.CPU.Writers / rows,
		BlockhaulCPUPerRowMicros: 1e6 * most.CPU.Blockhaul / rows,
	}
	p.StreamsRowsPerSec = float64(p.Streams) * p.PerStreamRowsPerSec
	if pg := p.BackendCPUPerRowMicros + p.WritersCPUPerRowMicros; pg > 0 {
		p.CPURowsPerSec = float64(cores) * 1e6 / pg
		p.CPUOverOneStream = p.CPURowsPerSec / one.Export.RowsPerSec
		p.BlockhaulCores = p.CPURowsPerSec * p.BlockhaulCPUPerRowMicros / 1e6
	}
	return p
}
