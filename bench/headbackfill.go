package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// runHeadBackfill measures the head stream and a backfill beside it, both
// ways a user can run them over [1, HeadBackfillBlocks] of the synthetic
// CometBFT chain, the head starting half way:
//
//   - one process: `blockhaul follow --from H --to N --backfill-from 1`, one
//     staging store, fetch and metrics shared;
//   - two processes at once: `blockhaul follow --from H --to N` and
//     `blockhaul run --from 1 --to H-1`, each with a staging directory of
//     its own (a Pebble directory belongs to one process).
//
// Both load the same rows into a fresh database with the secondary indexes
// in place (a run beside a live follow must not drop them). Each way runs
// Rounds times, alternating which goes first; the fastest counts.
func runHeadBackfill(ctx context.Context, cfg *Config) (*HeadBackfillResult, error) {
	bin, cleanup, err := blockhaulBinary(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	n := cfg.HeadBackfillBlocks
	res := &HeadBackfillResult{Blocks: n, HeadFrom: n/2 + 1}
	for round := range cfg.Rounds {
		for step := range 2 {
			one := (step == 0) == (round%2 == 0)
			cfg.Logger.Info("head and backfill", "one_process", one, "round", round+1)
			run, err := headBackfillOnce(ctx, cfg, bin, res.HeadFrom, one)
			if err != nil {
				return res, err
			}
			cfg.Logger.Info("head and backfill done", "one_process", one, "seconds", round2(run.Seconds), "cpu_s", round2(run.CPUSeconds))
			if one {
				res.OneProcess = bestHeadBackfill(res.OneProcess, run)
			} else {
				res.TwoProcesses = bestHeadBackfill(res.TwoProcesses, run)
			}
		}
	}
	if res.OneProcess.Rows != res.TwoProcesses.Rows {
		return res, fmt.Errorf("bench: head and backfill: one process loaded %d rows, two processes %d", res.OneProcess.Rows, res.TwoProcesses.Rows)
	}
	res.Rows = res.OneProcess.Rows
	if res.OneProcess.Seconds > 0 {
		res.TwoOverOne = res.TwoProcesses.Seconds / res.OneProcess.Seconds
	}
	return res, nil
}

func bestHeadBackfill(have, run HeadBackfillRun) HeadBackfillRun {
	all := append(have.AllSeconds, run.Seconds)
	if have.Seconds > 0 && have.Seconds <= run.Seconds {
		run = have
	}
	run.AllSeconds = all
	return run
}

// headBackfillOnce runs one way into a fresh database and returns its wall
// time (until every process has exited), the processes' CPU and peak RSS,
// and the rows loaded.
func headBackfillOnce(ctx context.Context, cfg *Config, bin string, headFrom uint64, one bool) (run HeadBackfillRun, err error) {
	db, dir, cleanup, err := scratchRun(ctx, cfg, "headbackfill")
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	n := strconv.FormatUint(cfg.HeadBackfillBlocks, 10)
	common := func(staging string) []string {
		return []string{"--chain", "cometbft", "--staging", filepath.Join(dir, staging),
			"--synthetic-seed", strconv.FormatInt(cfg.Seed, 10), "--synthetic-steady", "--synthetic-tip", n,
			"--batch-blocks", strconv.Itoa(cfg.BatchBlocks), "--progress-interval", "0", "--log-level", "warn"}
	}
	follow := append([]string{"follow", "--from", strconv.FormatUint(headFrom, 10), "--to", n, "--poll-interval", "100ms"}, common("head")...)
	var argvs [][]string
	if one {
		argvs = [][]string{append(follow, "--backfill-from", "1", "--alias", "bench-backfill")}
	} else {
		backfill := append([]string{"run", "--from", "1", "--to", strconv.FormatUint(headFrom-1, 10), "--alias", "bench-backfill",
			"--defer-indexes=never"}, common("backfill")...)
		argvs = [][]string{follow, backfill}
	}
	cmds := make([]*exec.Cmd, len(argvs))
	outs := make([]*bytes.Buffer, len(argvs))
	t0 := time.Now()
	for i, argv := range argvs {
		cmd := exec.CommandContext(ctx, bin, argv...)
		cmd.Env = append(childEnv(), "BLOCKHAUL_PG="+db.url)
		outs[i] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			for _, c := range cmds[:i] {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			return run, fmt.Errorf("bench: start blockhaul %s: %w", argv[0], err)
		}
		cmds[i] = cmd
	}
	var errs []error
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("bench: blockhaul %s: %w\n%s", argvs[i][0], err, lastLines(outs[i].String(), 20)))
		}
	}
	run.Seconds = time.Since(t0).Seconds()
	run.Processes = len(cmds)
	for _, cmd := range cmds {
		if st := cmd.ProcessState; st != nil {
			run.CPUSeconds += (st.UserTime() + st.SystemTime()).Seconds()
			run.PeakRSSBytes += maxRSS(st)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return run, err
	}
	var blocks uint64
	if blocks, run.Rows, err = countBlocksAndRows(ctx, db.url); err != nil {
		return run, err
	}
	if blocks != cfg.HeadBackfillBlocks {
		return run, fmt.Errorf("bench: head and backfill: %d blocks in PostgreSQL, want %d", blocks, cfg.HeadBackfillBlocks)
	}
	return run, nil
}

// countBlocksAndRows counts the blocks, and the rows of every table, of the
// cometbft schema.
func countBlocksAndRows(ctx context.Context, url string) (blocks, rows uint64, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: count rows: %w", err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM cometbft.blocks`).Scan(&blocks); err != nil {
		return 0, 0, fmt.Errorf("bench: count blocks: %w", err)
	}
	r, err := conn.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
WHERE table_schema = 'cometbft' AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'blockhaul\_%'`)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: count rows: %w", err)
	}
	tables, err := pgx.CollectRows(r, pgx.RowTo[string])
	if err != nil {
		return 0, 0, fmt.Errorf("bench: count rows: %w", err)
	}
	for _, t := range tables {
		var c uint64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM cometbft."+t).Scan(&c); err != nil {
			return 0, 0, fmt.Errorf("bench: count rows of %s: %w", t, err)
		}
		rows += c
	}
	return blocks, rows, nil
}
