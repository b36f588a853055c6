//go:build faults

package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestDatabaseFaults runs jobs against a throwaway cluster while the
// database fails under them: backends terminated again and again, an
// immediate-mode (crash) restart, statements timing out while a lock is
// held. Each is transient: the job must retry in-process and end with
// tables identical to a run that saw no fault, the checkpoint never ahead
// of its rows. A statement timeout too short for any batch is permanent:
// the job must exit 1, in bounded time, naming it.
func TestDatabaseFaults(t *testing.T) {
	to := uint64(3000)
	terminations := 10
	if campaign {
		to, terminations = 6000, 12
	}
	ref := newJob(t)
	mustRun(t, "reference run", ref.args("run", 1, to)...)
	want := digest(t, ref.dsn, "cometbft")
	c := pgtest.StartCluster(t)
	ctx := context.Background()

	var lines, bad []string
	check := func(name string, j job, code int, out string, s *sampler) {
		s.close()
		d := diffDigests(digest(t, j.dsn, "cometbft"), want, nil)
		switch {
		case code != 0:
			bad = append(bad, fmt.Sprintf("%s: exit %d: %s", name, code, errorLine(out)))
		case len(d) > 0:
			bad = append(bad, fmt.Sprintf("%s: tables differ: %s", name, strings.Join(d, "; ")))
		}
		if s.ahead.Load() > 0 {
			bad = append(bad, fmt.Sprintf("%s: checkpoint ahead of its rows in %s samples: %v", name, s, s.first.Load()))
		}
	}
	newJobOn := func(name string) job {
		return job{dsn: c.NewDatabase(t, name), staging: filepath.Join(t.TempDir(), "staging"), batch: 100}
	}

	// Backend terminations, each once a batch has been exported since the
	// last (so every one lands on a working job).
	{
		j := newJobOn("terminate")
		s := startSampler(t, j.dsn, "cometbft")
		p := startProc(t, nil, append(j.args("run", 1, to), "--progress-interval", "100ms")...)
		admin, err := pgx.Connect(ctx, c.URL())
		if err != nil {
			t.Fatal(err)
		}
		landed := 0
		for line := range p.lines {
			if landed >= terminations {
				continue // drain
			}
			if !strings.Contains(line, "export.done=") || strings.Contains(line, "export.done=0 ") {
				continue
			}
			var n int
			if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = 'terminate' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				landed++
			}
		}
		admin.Close(ctx)
		code := p.wait(t, 5*time.Minute)
		check("terminate", j, code, p.out.String(), s)
		lines = append(lines, fmt.Sprintf("%d backend terminations → exit %d", landed, code))
		if landed < terminations {
			bad = append(bad, fmt.Sprintf("terminate: only %d of %d terminations landed while the job ran", landed, terminations))
		}
	}

	// An immediate-mode restart once the export is under way.
	{
		j := newJobOn("restart")
		s := startSampler(t, j.dsn, "cometbft")
		p := startProc(t, nil, append(j.args("run", 1, to), "--progress-interval", "100ms")...)
		restarted := false
		for line := range p.lines {
			if !restarted && strings.Contains(line, "export.done=") && !strings.Contains(line, "export.done=0 ") {
				if err := c.Restart("immediate"); err != nil {
					t.Fatal(err)
				}
				restarted = true
			}
		}
		code := p.wait(t, 5*time.Minute)
		check("restart", j, code, p.out.String(), s)
		lines = append(lines, fmt.Sprintf("immediate restart → exit %d", code))
	}

	// Statement timeouts: statement_timeout 2s for the job's sessions (a
	// batch takes well under it), and the blocks table locked for 3s, three
	// times.
	{
		j := newJobOn("timeout")
		setStatementTimeout(t, c.URL(), "timeout", "2s")
		s := startSampler(t, j.dsn, "cometbft")
		p := startProc(t, nil, append(j.args("run", 1, to), "--progress-interval", "100ms")...)
		locker, err := pgx.Connect(ctx, j.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := locker.Exec(ctx, "SET statement_timeout = 0"); err != nil {
			t.Fatal(err)
		}
		locks := 0
		for line := range p.lines {
			if locks >= 3 || !strings.Contains(line, "export.done=") || strings.Contains(line, "export.done=0 ") {
				continue
			}
			tx, err := locker.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "LOCK TABLE cometbft.blocks IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second) // the fault: a lock held past the statement timeout
			tx.Commit(ctx)
			locks++
		}
		locker.Close(ctx)
		code := p.wait(t, 5*time.Minute)
		check("timeout", j, code, p.out.String(), s)
		lines = append(lines, fmt.Sprintf("%d statement timeouts (lock 3s > timeout 2s) → exit %d", locks, code))
	}

	// A statement timeout no batch can meet: permanent.
	{
		j := newJobOn("timeoutforever")
		setStatementTimeout(t, c.URL(), "timeoutforever", "1ms")
		start := time.Now()
		code, out := blockhaul(t, 5*time.Minute, j.args("run", 1, to)...)
		took := time.Since(start)
		// The cause is named as PostgreSQL says it or as the retry counter
		// labels it; the line is shortened, so which one shows depends on
		// which statement was cancelled last.
		if l := errorLine(out); code != 1 || !(strings.Contains(l, "statement timeout") || strings.Contains(l, "statement_timeout")) {
			bad = append(bad, fmt.Sprintf("permanent timeout: exit %d, want 1 naming the statement timeout: %s", code, errorLine(out)))
		}
		lines = append(lines, fmt.Sprintf("1ms statement timeout → exit %d in %.1fs", code, took.Seconds()))
	}
	verdict := "identical"
	if len(bad) > 0 {
		verdict = fmt.Sprintf("%d problems", len(bad))
	}
	report(t, "database faults (throwaway cluster, %d blocks): %s; %s", to, strings.Join(lines, ", "), verdict)
	for _, b := range bad {
		t.Error(b)
	}
}

// setStatementTimeout sets the statement_timeout of database db's new
// sessions, through the cluster's url.
func setStatementTimeout(t *testing.T, url, db, timeout string) {
	t.Helper()
	ctx := context.Background()
	admin := pgtest.ConnectTo(t, url)
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s SET statement_timeout = '%s'", pgx.Identifier{db}.Sanitize(), timeout)); err != nil {
		t.Fatal(err)
	}
}
