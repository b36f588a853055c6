package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/monitor"
)

// scrapeSum adds up every sample of a metric (all its label sets) on
// /metrics.
func scrapeSum(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Errorf("scrape: %v", err)
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

// run's PostgreSQL connection terminated by an operator twice mid-run:
// the job reconnects, completes with the tables of an undisturbed run, and
// counts the retries in /metrics and its summary.
func TestRunRidesOutTerminatedBackend(t *testing.T) {
	ref := pgtest.NewDatabase(t)
	refCfg := testConfig(CmdRun, ref, filepath.Join(t.TempDir(), "ref"), nil, 1, 600)
	mustRunWith(t, refCfg, newCounting(1000))
	dsn := pgtest.NewDatabase(t)
	admin := pgtest.ConnectTo(t, dsn)
	defer admin.Close(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var hits atomic.Int64
	var scraped float64
	restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
		if p != crashpoint.AfterCommit {
			return nil
		}
		switch hits.Add(1) {
		case 3, 6:
			var n int
			if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	WHERE application_name = 'blockhaul' AND datname = current_database()`).Scan(&n); err != nil || n != 1 {
				t.Errorf("terminate: %d backends, %v", n, err)
			}
		case 9:
			scraped = scrapeSum(t, addr, "blockhaul_pg_retries_total")
		}
		return nil
	})
	defer restore()
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 600)
	cfg.Source = newCounting(1000)
	cfg.Monitor = monitor.New(monitor.Options{Logger: quiet, Out: io.Discard, Terminal: new(bool)})
	cfg.HTTPAddr, cfg.PGRetryMaxWait = addr, 500*time.Millisecond
	var out bytes.Buffer
	_, err = Run(context.Background(), cfg, &out, quiet)
	restore()
	if err != nil {
		t.Fatalf("run with terminated backends: %v", err)
	}
	if scraped < 2 {
		t.Fatalf("blockhaul_pg_retries_total = %v after two terminations, want ≥ 2", scraped)
	}
	if !strings.Contains(out.String(), "postgres: ") || !strings.Contains(out.String(), "retries after transient faults") {
		t.Fatalf("summary does not count the retries:\n%s", out.String())
	}
	if got, want := fingerprint(t, dsn), fingerprint(t, ref); got != want {
		t.Fatalf("tables differ from an undisturbed run:\n got %s\nwant %s", got, want)
	}
}

// With --pg-retries 0 a terminated backend ends the job with exit 1,
// naming the cause.
func TestRunWithoutRetriesFailsNamingTheCause(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	admin := pgtest.ConnectTo(t, dsn)
	defer admin.Close(context.Background())
	var hits atomic.Int64
	restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
		if p == crashpoint.AfterCopy && hits.Add(1) == 2 {
			if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'blockhaul' AND datname = current_database()`); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	defer restore()
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 600)
	cfg.Source = newCounting(1000)
	cfg.PGRetries = 0
	_, err := Run(context.Background(), cfg, io.Discard, quiet)
	if ExitCode(err) != ExitFailed || !strings.Contains(err.Error(), "retries are off") || !strings.Contains(err.Error(), "terminating connection") {
		t.Fatalf("exit %d: %v", ExitCode(err), err)
	}
}

func TestPGRetryFlagsAreValidated(t *testing.T) {
	cfg := testConfig(CmdRun, "postgres://x@127.0.0.1/x", t.TempDir(), nil, 1, 10)
	cfg.PGRetries, cfg.PGRetryMaxWait = -1, 0
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "--pg-retries (BLOCKHAUL_PG_RETRIES)") || !strings.Contains(err.Error(), "--pg-retry-max-wait (BLOCKHAUL_PG_RETRY_MAX_WAIT)") {
		t.Fatalf("got %v", err)
	}
}

// run across an immediate-mode restart of its server (a crash: batches
// committed asynchronously may be lost with their checkpoint) completes
// with the tables of an undisturbed run, indexes built.
func TestRunRidesOutServerCrashRestart(t *testing.T) {
	ref := pgtest.NewDatabase(t)
	mustRunWith(t, testConfig(CmdRun, ref, filepath.Join(t.TempDir(), "ref"), nil, 1, 600), newCounting(1000))
	cluster := pgtest.StartCluster(t)
	dsn := cluster.NewDatabase(t, "crash")
	var hits atomic.Int64
	restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
		if p == crashpoint.AfterCommit && hits.Add(1) == 4 {
			if err := cluster.Restart("immediate"); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	defer restore()
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 600)
	cfg.Source = newCounting(1000)
	cfg.PGRetryMaxWait = time.Second
	var out bytes.Buffer
	if _, err := Run(context.Background(), cfg, &out, quiet); err != nil {
		t.Fatalf("run across a crash restart: %v\n%s", err, cluster.Log())
	}
	restore()
	if !strings.Contains(out.String(), "retries after transient faults") {
		t.Fatalf("no retry in the summary:\n%s", out.String())
	}
	if got, want := fingerprint(t, dsn), fingerprint(t, ref); got != want {
		t.Fatalf("tables differ from an undisturbed run:\n got %s\nwant %s", got, want)
	}
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	var valid int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
	JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'cometbft' AND c.relname LIKE '%_idx' AND i.indisvalid`).Scan(&valid); err != nil {
		t.Fatal(err)
	}
	if valid != cometbftIndexes {
		t.Fatalf("%d valid secondary indexes, want %d", valid, cometbftIndexes)
	}
}
