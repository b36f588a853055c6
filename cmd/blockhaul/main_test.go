package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/testbin"
	"github.com/blockhaul/blockhaul/internal/testseed"
	"github.com/jackc/pgx/v5"
)

var binary string

func TestMain(m *testing.M) { testbin.Main(m, &binary) }

// blockhaul runs the binary and returns its exit code and combined output.
func blockhaul(t *testing.T, args ...string) (int, string) {
	t.Helper()
	return blockhaulEnv(t, nil, args...)
}

const seed = "7"

func runArgs(cmd, dsn, staging string, from, to int) []string {
	return []string{cmd, "--pg", dsn, "--staging", staging, "--from", fmt.Sprint(from), "--to", fmt.Sprint(to),
		"--synthetic-seed", seed, "--batch-blocks", "200", "--progress-interval", "0", "--log-level", "warn"}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c := pgtest.ConnectTo(t, dsn)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

var tableKeys = map[string]string{
	"blocks":       "height",
	"transactions": "height, tx_index",
	"events":       "height, event_index",
}

func fingerprint(t *testing.T, dsn string) map[string]string {
	return pgtest.Fingerprint(t, dsn, "cometbft", tableKeys)
}

func sameFingerprint(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for table := range tableKeys {
		if got[table] != want[table] {
			t.Errorf("%s: table %s: %s, want %s", what, table, got[table], want[table])
		}
	}
}

func TestRunMatchesSyntheticChainAndRerunIsNoOp(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "staging")
	const from, to = 1, 3000
	code, out := blockhaul(t, runArgs("run", dsn, stg, from, to)...)
	if code != 0 {
		t.Fatalf("run exited %d:\n%s", code, out)
	}
	// Every height's counts equal the synthetic chain's own.
	src := cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 7})
	c := connect(t, dsn)
	rows, err := c.Query(context.Background(), `
SELECT b.height, b.num_txs,
	(SELECT count(*) FROM cometbft.transactions t WHERE t.height = b.height),
	(SELECT count(*) FROM cometbft.events e WHERE e.height = b.height)
FROM cometbft.blocks b ORDER BY b.height`)
	if err != nil {
		t.Fatal(err)
	}
	want := uint64(from)
	for rows.Next() {
		var h, numTxs, txs, events int64
		if err := rows.Scan(&h, &numTxs, &txs, &events); err != nil {
			t.Fatal(err)
		}
		if uint64(h) != want {
			t.Fatalf("height %d present where %d was expected (gap or duplicate)", h, want)
		}
		wt, we := src.ExpectedCounts(uint64(h))
		if txs != int64(wt) || numTxs != int64(wt) || events != int64(we) {
			t.Fatalf("height %d: %d txs (num_txs %d), %d events; synthetic chain has %d txs, %d events", h, txs, numTxs, events, wt, we)
		}
		want++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want != to+1 {
		t.Fatalf("blocks end at %d, want %d", want-1, to)
	}

	before := fingerprint(t, dsn)
	code, out = blockhaul(t, runArgs("run", dsn, stg, from, to)...)
	if code != 0 {
		t.Fatalf("rerun exited %d:\n%s", code, out)
	}
	sameFingerprint(t, "after rerun", fingerprint(t, dsn), before)

	// Re-export into a second, empty database from staging alone: export
	// never builds a source, so an RPC endpoint that does not exist is
	// irrelevant to it.
	dsn2 := pgtest.NewDatabase(t)
	args := runArgs("export", dsn2, stg, from, to)
	code, out = blockhaul(t, append(args, "--rpc", "http://127.0.0.1:1/unreachable")...)
	if code != 0 {
		t.Fatalf("re-export exited %d:\n%s", code, out)
	}
	sameFingerprint(t, "re-export", fingerprint(t, dsn2), before)
}

// referenceRun is a fresh database that a plain run of heights from-to
// filled, with a staging directory of its own: what a test's disturbed
// runs must end as.
func referenceRun(t *testing.T, from, to int) (dsn string) {
	t.Helper()
	dsn = pgtest.NewDatabase(t)
	if code, out := blockhaul(t, runArgs("run", dsn, filepath.Join(t.TempDir(), "ref"), from, to)...); code != 0 {
		t.Fatalf("reference run exited %d:\n%s", code, out)
	}
	return dsn
}

func TestKilledRunsResumeToIdenticalContents(t *testing.T) {
	const from, to = 1, 4000
	ref := referenceRun(t, from, to)
	want := fingerprint(t, ref)

	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "staging")
	rng := testseed.New(t) // the kill moments; BLOCKHAUL_TEST_SEED replays them
	kills := 0
	for attempt := 0; attempt < 5; attempt++ {
		cmd := exec.Command(binary, append(runArgs("run", dsn, stg, from, to), "--fetch-workers", "2", "--batch-blocks", "100")...)
		cmd.Env = testbin.CleanEnv()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The kill moment is the test's random input, not synchronisation.
		delay := time.Duration(50+rng.IntN(700)) * time.Millisecond
		timer := time.AfterFunc(delay, func() { cmd.Process.Signal(syscall.SIGKILL) })
		err := cmd.Wait()
		timer.Stop()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
			kills++
			t.Logf("killed after %s", delay)
			continue
		}
		if err != nil {
			t.Fatalf("run exited with %v:\n%s", err, out.String())
		}
		break
	}
	if kills == 0 {
		t.Fatal("no run was killed part way; the test proved nothing")
	}
	code, out := blockhaul(t, runArgs("run", dsn, stg, from, to)...)
	if code != 0 {
		t.Fatalf("resume exited %d:\n%s", code, out)
	}
	sameFingerprint(t, fmt.Sprintf("after %d kills and a resume", kills), fingerprint(t, dsn), want)
}

func TestSIGTERMStopsWithInterruptedStatusAndResumes(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "staging")
	const to = 12000
	// One stream, whose row is the checkpoint read below (the resume's
	// auto carries that layout on).
	cmd := exec.Command(binary, append(runArgs("run", dsn, stg, 1, to), "--log-level", "info", "--batch-blocks", "100", "--progress-interval", "100ms", "--export-streams", "1")...)
	cmd.Env = testbin.CleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Signal once the first progress line shows exported heights: the
	// range is then part way.
	sc := bufio.NewScanner(stderr)
	var log strings.Builder
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if i := strings.Index(sc.Text(), "export.done="); i >= 0 && !strings.HasPrefix(sc.Text()[i:], "export.done=0 ") {
			cmd.Process.Signal(syscall.SIGTERM)
			break
		}
	}
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("SIGTERM: %v, want exit status 3\n%s", err, log.String())
	}
	// An interruption is logged as one, at warn, not as a failure.
	if !strings.Contains(log.String(), `level=WARN msg="run interrupted by a signal`) || strings.Contains(log.String(), "level=ERROR") {
		t.Errorf("SIGTERM is not logged as an interruption at warn level:\n%s", log.String())
	}
	// Resumable: the checkpoint is not ahead of its rows, and a second run
	// completes the range.
	c := connect(t, dsn)
	var last, maxHeight, n int64
	err = c.QueryRow(context.Background(), `SELECT coalesce(b.last_height, 0), coalesce((SELECT max(height) FROM cometbft.blocks), 0), (SELECT count(*) FROM cometbft.blocks)
FROM cometbft.blockhaul_backfills b`).Scan(&last, &maxHeight, &n)
	if err != nil {
		t.Fatal(err)
	}
	if last != maxHeight || n != last || last >= to || last == 0 {
		t.Fatalf("after SIGTERM: checkpoint %d, rows up to %d (%d rows); want equal and below %d", last, maxHeight, n, to)
	}
	if code, out := blockhaul(t, runArgs("run", dsn, stg, 1, to)...); code != 0 {
		t.Fatalf("resume exited %d:\n%s", code, out)
	}
}
