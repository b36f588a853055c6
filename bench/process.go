package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// runProcesses runs `blockhaul run` over each range size, smallest first,
// each as a process of its own into a fresh database and staging directory,
// and reads the process's peak RSS from the kernel when it exits. The chain
// is steady (every range has the same density), so that time per block
// shows how the tool scales, not which stretches of the chain a range holds.
func runProcesses(ctx context.Context, cfg *Config) ([]ProcessRun, error) {
	bin, cleanup, err := blockhaulBinary(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	sizes := slices.Clone(cfg.RangeSizes)
	slices.Sort(sizes)
	// Every size runs Rounds times, the sizes taking turns, so that a slow
	// spell of the machine falls on one run rather than on one size; the
	// fastest run of each size counts, and its peak RSS is the highest of
	// its runs.
	out := make([]ProcessRun, len(sizes))
	for round := range cfg.Rounds {
		for i, n := range sizes {
			cfg.Logger.Info("blockhaul run", "blocks", n, "round", round+1)
			r, err := runProcess(ctx, cfg, bin, n)
			if err != nil {
				return nil, err
			}
			cfg.Logger.Info("blockhaul run done", "blocks", n, "seconds", round2(r.Seconds),
				"us_per_block", int(r.MicrosPerBlock), "peak_rss_mib", r.PeakRSSBytes>>20)
			out[i] = bestProcess(out[i], r)
		}
	}
	return out, nil
}

// bestProcess keeps the faster of two runs of one size, with the higher
// peak RSS of the two and the times of every run so far.
func bestProcess(have, run ProcessRun) ProcessRun {
	all := append(have.AllSeconds, run.Seconds)
	peak := max(have.PeakRSSBytes, run.PeakRSSBytes)
	if have.Seconds > 0 && have.Seconds <= run.Seconds {
		run = have
	}
	run.AllSeconds, run.PeakRSSBytes = all, peak
	return run
}

// blockhaulBinary is Config.Blockhaul, or else one built from this module
// into a temporary directory that cleanup removes.
func blockhaulBinary(ctx context.Context, cfg *Config) (bin string, cleanup func(), err error) {
	if cfg.Blockhaul != "" {
		return cfg.Blockhaul, func() {}, nil
	}
	dir, err := os.MkdirTemp(cfg.WorkDir, "blockhaul-bench-bin-")
	if err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	if bin, err = buildBlockhaul(ctx, dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// buildBlockhaul builds the blockhaul command of this module into dir.
func buildBlockhaul(ctx context.Context, dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("bench: building blockhaul needs the go command (or pass the binary): %w", err)
	}
	bin := filepath.Join(dir, "blockhaul")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/blockhaul/blockhaul/cmd/blockhaul")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: go build blockhaul: %w\n%s", err, out)
	}
	return bin, nil
}

func runProcess(ctx context.Context, cfg *Config, bin string, n uint64) (run ProcessRun, err error) {
	db, dir, cleanup, err := scratchRun(ctx, cfg, "run")
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	cmd := exec.CommandContext(ctx, bin, "run",
		"--chain", "cometbft",
		"--from", "1", "--to", strconv.FormatUint(n, 10),
		"--staging", filepath.Join(dir, "staging"),
		"--synthetic-seed", strconv.FormatInt(cfg.Seed, 10),
		"--synthetic-steady",
		"--batch-blocks", strconv.Itoa(cfg.BatchBlocks),
		"--progress-interval", "0",
		"--log-level", "warn")
	// The DSN goes through the environment, not argv, where any user of
	// the machine could read its password.
	cmd.Env = append(childEnv(), "BLOCKHAUL_PG="+db.url)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	spawner := hwm("self")
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return run, fmt.Errorf("bench: start blockhaul: %w", err)
	}
	stopPoll, polled := make(chan struct{}), make(chan int64, 1)
	go func() { polled <- pollHWM(cmd.Process.Pid, stopPoll) }()
	err = cmd.Wait()
	sec := time.Since(t0).Seconds()
	close(stopPoll)
	run = ProcessRun{Blocks: n, Seconds: sec, MicrosPerBlock: sec * 1e6 / float64(n),
		KernelMaxRSSBytes: maxRSS(cmd.ProcessState), PolledHWMBytes: <-polled, SpawnerHWMBytes: spawner}
	if err != nil {
		return run, fmt.Errorf("bench: blockhaul run 1-%d: %w\n%s", n, err, lastLines(out.String(), 20))
	}
	run.PeakRSSBytes = peakRSS(run.KernelMaxRSSBytes, run.SpawnerHWMBytes, run.PolledHWMBytes)
	// The synthetic chain's density drifts over long stretches, so blocks of
	// different ranges carry different numbers of rows; time per row is the
	// comparison that does not depend on where a range falls.
	if run.Rows, err = countRows(ctx, db.url); err != nil {
		return run, err
	}
	if run.Rows > 0 {
		run.MicrosPerRow = sec * 1e6 / float64(run.Rows)
	}
	return run, nil
}

func countRows(ctx context.Context, url string) (uint64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("bench: count rows: %w", err)
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM cometbft.blocks) + (SELECT count(*) FROM cometbft.transactions) + (SELECT count(*) FROM cometbft.events)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("bench: count rows: %w", err)
	}
	return uint64(n), nil
}

// peakRSS picks the child's peak RSS. The kernel's figure (wait4's
// ru_maxrss) is exact but can be no lower than the spawner's own peak: Go
// starts a child with vfork, and exec records the shared memory's high
// water mark as the child's. Below that the child's own VmHWM, polled while
// it ran, is the best figure there is (a lower bound). The kernel updates
// its high water mark lazily, so a polled VmHWM can exceed it slightly.
func peakRSS(kernel, spawner, polled int64) int64 {
	if kernel > spawner {
		return max(kernel, polled)
	}
	return polled
}

// pollHWM reads the VmHWM of process pid every 100ms until stop is closed
// and returns the highest value seen.
func pollHWM(pid int, stop <-chan struct{}) int64 {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var peak int64
	who := strconv.Itoa(pid)
	for {
		peak = max(peak, hwm(who))
		select {
		case <-stop:
			return peak
		case <-t.C:
		}
	}
}

// hwm is the VmHWM (peak RSS) of /proc/<who>/status in bytes, 0 where there
// is none.
func hwm(who string) int64 {
	b, err := os.ReadFile("/proc/" + who + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			kb, _ := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// childEnv is this process's environment without blockhaul's own
// variables, so that a setting left in the shell cannot change what the
// measured process does.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BLOCKHAUL_") {
			env = append(env, kv)
		}
	}
	return env
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
