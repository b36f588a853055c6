package pipeline

import (
	"context"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// Every exit path leaves nothing running: a completed run, a run that fails
// part way and a run cancelled part way all return with no goroutine of
// theirs alive (Pebble, pgx, the monitor, the loader and the exporter all
// finished).
func TestNoGoroutineOutlivesAJob(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	before := goroutines()

	mustRunWith(t, testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "a"), nil, 1, 300), newCounting(1000))
	if _, err := runWith(t, testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "b"), nil, 1, 5000), newCounting(100)); err == nil {
		t.Fatal("a range past the tip succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	src := newCounting(100000)
	src.onFetch = func(from uint64) {
		if from > 2000 {
			cancel()
		}
	}
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "c"), nil, 1, 50000)
	cfg.Source = src
	if _, err := Run(ctx, cfg, io.Discard, quiet); ExitCode(err) != ExitInterrupted {
		t.Fatalf("cancelled run: %v (exit %d), want exit %d", err, ExitCode(err), ExitInterrupted)
	}

	// pgconn closes a cancelled connection and Pebble stops its disk-health
	// ticker asynchronously, after the calls that own them have returned;
	// such goroutines are gone within milliseconds. A leak stays.
	for deadline := time.Now().Add(5 * time.Second); goroutines() > before && time.Now().Before(deadline); {
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond)
	}
	if n := goroutines(); n > before {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines before the jobs, %d after:\n%s", before, n, leaked(string(buf)))
	}
}

func goroutines() int { return runtime.NumGoroutine() }

// leaked keeps the stacks that mention blockhaul, pebble or pgx.
func leaked(dump string) string {
	var out []string
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "blockhaul/") || strings.Contains(g, "pebble") || strings.Contains(g, "pgx") {
			if !strings.Contains(g, "TestNoGoroutineOutlivesAJob") {
				out = append(out, g)
			}
		}
	}
	return strings.Join(out, "\n\n")
}
