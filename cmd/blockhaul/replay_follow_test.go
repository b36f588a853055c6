package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/syncbuf"
	"github.com/blockhaul/blockhaul/internal/testbin"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// liveFollow is a `blockhaul follow` running in a process of its own on a
// synthetic chain that grows ten blocks a second from height 300. Its --to
// is a bound that the chain reaches in half an hour: the test stops it
// long before, and so does the kernel if the test binary dies.
type liveFollow struct {
	cmd    *exec.Cmd
	out    *syncbuf.Buffer
	exited chan error
}

func startFollow(t *testing.T, dsn, stg string) *liveFollow {
	t.Helper()
	f := &liveFollow{out: &syncbuf.Buffer{}, exited: make(chan error, 1)}
	// Each follow's synthetic node starts again at tip 300 and grows a block
	// every 100 ms: a follow started after another exported past 300 waits
	// for its node to catch up, and gives up after --reorg-window polls
	// (64 × 50 ms would be 3.2 s, less than the catching up takes).
	f.cmd = exec.Command(binary, "follow", "--pg", dsn, "--staging", stg, "--from", "1", "--to", "20000",
		"--synthetic-seed", seed, "--synthetic-tip", "300", "--synthetic-block-time", "100ms", "--poll-interval", "50ms",
		"--reorg-window", "2000", "--batch-blocks", "100", "--progress-interval", "0", "--log-level", "info")
	f.cmd.Env = testbin.CleanEnv()
	f.cmd.Stdout, f.cmd.Stderr = f.out, f.out
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { f.exited <- f.cmd.Wait() }()
	t.Cleanup(func() {
		f.cmd.Process.Kill()
		err := <-f.exited
		f.exited <- err
	})
	return f
}

// followPast300 starts a follow on a new database and staging directory
// and waits for it to export height 300.
func followPast300(t *testing.T) (dsn, stg string, f *liveFollow, conn *pgx.Conn) {
	t.Helper()
	dsn = pgtest.NewDatabase(t)
	stg = filepath.Join(t.TempDir(), "staging")
	f = startFollow(t, dsn, stg)
	conn = connect(t, dsn)
	eventually(t, 2*time.Minute, "the follow exports height 300", func() bool {
		f.running(t, "waiting for height 300")
		return headHeight(t, conn) >= 300
	})
	return dsn, stg, f, conn
}

// running fails the test if the follow has exited.
func (f *liveFollow) running(t *testing.T, when string) {
	t.Helper()
	select {
	case err := <-f.exited:
		f.exited <- err
		t.Fatalf("%s: the follow exited (%v):\n%s", when, err, f.out.String())
	default:
	}
}

// eventually polls cond every 50 ms until it holds, failing the test after
// limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(limit)
	tk := time.NewTicker(50 * time.Millisecond)
	defer tk.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("%s: not within %s", what, limit)
		case <-tk.C:
		}
	}
}

func headHeight(t *testing.T, conn *pgx.Conn) int64 {
	t.Helper()
	var h int64
	err := conn.QueryRow(context.Background(), `SELECT height FROM cometbft.blockhaul_checkpoints WHERE stream = 'head'`).Scan(&h)
	if errors.Is(err, pgx.ErrNoRows) || err != nil && strings.Contains(err.Error(), "does not exist") {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// eventsPrintOf is eventsPrint of the events of heights 1 to to, but those
// of the heights skip.
func eventsPrintOf(t *testing.T, dsn string, to int64, skip ...int64) string {
	t.Helper()
	conn := connect(t, dsn)
	var s string
	if err := conn.QueryRow(context.Background(), `SELECT count(*) || ' ' || md5(string_agg(md5(ROW(height, block_time, event_index, tx_index, tx_hash, source, type, attributes)::text), '' ORDER BY height, event_index))
	FROM cometbft.events WHERE height <= $1 AND height <> ALL($2)`, to, append(skip, -1)).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

type replayRow struct {
	from, to, last int64
	lastValid      bool
	status         string
}

func readReplayRow(t *testing.T, conn *pgx.Conn, alias string) replayRow {
	t.Helper()
	var r replayRow
	var last *int64
	if err := conn.QueryRow(context.Background(), `SELECT range_start, range_end, last_height, status FROM cometbft.blockhaul_replays WHERE alias = $1`, alias).
		Scan(&r.from, &r.to, &last, &r.status); err != nil {
		t.Fatalf("replay row %q: %v", alias, err)
	}
	if last != nil {
		r.last, r.lastValid = *last, true
	}
	return r
}

// replayFilesLeft lists the replay request files in stg.
func replayFilesLeft(t *testing.T, stg string) []string {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(stg, "blockhaul-replay-*"))
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// TestReplayThroughARunningFollow: a `blockhaul follow` runs in a process of
// its own on a growing chain; `export --replay events` with the follow's
// own --staging, from another process, is run by the follow: it rewrites
// the rows of every exported height (some damaged on purpose) equal to a
// fresh export's, while the head checkpoint goes on advancing, is never
// moved back, and the follow goes on after it.
func TestReplayThroughARunningFollow(t *testing.T) {
	dsn, stg, f, conn := followPast300(t)
	// Rows the replay must put right: some gone, some changed.
	if _, err := conn.Exec(context.Background(), `DELETE FROM cometbft.events WHERE height BETWEEN 1 AND 120;
		UPDATE cometbft.events SET type = 'stale' WHERE height BETWEEN 121 AND 250`); err != nil {
		t.Fatal(err)
	}
	// The head checkpoint, sampled while the replay runs.
	before := headHeight(t, conn)
	var samples []int64
	stopSampling := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		sconn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			sampled <- err
			return
		}
		defer sconn.Close(context.Background())
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			var h int64
			if err := sconn.QueryRow(context.Background(), `SELECT height FROM cometbft.blockhaul_checkpoints WHERE stream = 'head'`).Scan(&h); err != nil {
				sampled <- err
				return
			}
			samples = append(samples, h)
			select {
			case <-stopSampling:
				sampled <- nil
				return
			case <-tk.C:
			}
		}
	}()
	code, out := blockhaul(t, "export", "--pg", dsn, "--staging", stg, "--replay", "events", "--batch-blocks", "50", "--progress-interval", "0", "--log-level", "warn")
	close(stopSampling)
	if err := <-sampled; err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("export --replay beside the follow exited %d:\n%s\nfollow:\n%s", code, out, f.out.String())
	}
	if want := fmt.Sprintf("run by the follow holding %s (pid %d)", stg, f.cmd.Process.Pid); !strings.Contains(out, want) {
		t.Errorf("the replay's output does not say %q:\n%s", want, out)
	}
	f.running(t, "after the replay")
	row := readReplayRow(t, conn, "replay/events")
	if row.status != "complete" || row.from != 1 || row.to < before || row.last != row.to {
		t.Fatalf("replay row %+v: want complete, from 1 to at least the head's %d when it started", row, before)
	}
	// The summary counts what the follow did: every height, in chunks of 50.
	if want := fmt.Sprintf("%d blocks, ", row.to); !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf(" %d batches", (row.to+49)/50)) {
		t.Errorf("the replay's summary does not say %q in %d batches:\n%s", want, (row.to+49)/50, out)
	}
	for i := 1; i < len(samples); i++ {
		if samples[i] < samples[i-1] {
			t.Fatalf("the head checkpoint moved back from %d to %d while the replay ran", samples[i-1], samples[i])
		}
	}
	if len(samples) < 2 || samples[len(samples)-1] <= before {
		t.Errorf("the head checkpoint did not advance while the replay ran: %d samples from %d", len(samples), before)
	}
	var streams []string
	if err := conn.QueryRow(context.Background(), `SELECT array_agg(stream ORDER BY stream) FROM cometbft.blockhaul_checkpoints`).Scan(&streams); err != nil || len(streams) != 1 || streams[0] != "head" {
		t.Errorf("checkpoint streams after the replay: %v (%v), want the head's alone", streams, err)
	}
	// Healthy afterwards: the head goes on, with its checkpoint on the
	// block it names.
	after := headHeight(t, conn)
	eventually(t, time.Minute, "the follow goes on after the replay", func() bool {
		f.running(t, "after the replay")
		return headHeight(t, conn) >= after+30
	})
	var consistent bool
	if err := conn.QueryRow(context.Background(), `SELECT c.hash = b.hash FROM cometbft.blockhaul_checkpoints c JOIN cometbft.blocks b ON b.height = c.height WHERE c.stream = 'head'`).Scan(&consistent); err != nil || !consistent {
		t.Errorf("the head checkpoint does not name the block at its height (%v)", err)
	}
	if left := replayFilesLeft(t, stg); len(left) > 0 {
		t.Errorf("request files left in staging: %v", left)
	}

	ref := referenceRun(t, 1, int(row.to))
	if got, want := eventsPrintOf(t, dsn, row.to), eventsPrintOf(t, ref, row.to); got != want {
		t.Errorf("events of heights 1-%d after the replay: %s; a fresh export's: %s", row.to, got, want)
	}
	f.cmd.Process.Signal(syscall.SIGTERM)
	err := <-f.exited
	f.exited <- err
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("follow after SIGTERM: %v, want exit 3 (stopped part way, as a follow with --to is):\n%s", err, f.out.String())
	}
	t.Logf("replay of heights 1-%d beside the follow; the head went from %d to %d meanwhile (%d samples)", row.to, before, samples[len(samples)-1], len(samples))
}

// startReplay starts `export --replay events` beside the follow.
func startReplay(t *testing.T, dsn, stg string, extra ...string) (*exec.Cmd, *syncbuf.Buffer, chan error) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"export", "--pg", dsn, "--staging", stg, "--replay", "events", "--batch-blocks", "100", "--progress-interval", "0", "--log-level", "warn"}, extra...)...)
	cmd.Env = testbin.CleanEnv()
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		err := <-done
		done <- err
	})
	return cmd, out, done
}

// exitWithin waits for a started replay's exit code, failing after limit.
func exitWithin(t *testing.T, done chan error, limit time.Duration, what string, out *syncbuf.Buffer) int {
	t.Helper()
	select {
	case err := <-done:
		done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return 0
	case <-time.After(limit):
		t.Fatalf("%s: still running after %s:\n%s", what, limit, out.String())
	}
	return -1
}

// TestReplayThroughAFollowRefusedCancelledKilled: with a replay through a
// running follow held mid-way (the test locks a blocks row its next chunk
// needs), a second request is refused (exit 2), as are a request for
// another schema and one for heights not exported; Ctrl-C of the requester
// cancels the replay in the follow (exit 3, the follow goes on); the
// follow stopped (SIGTERM) under a second requester stops the replay and
// says so (exit 3); a third, beside a new follow, resumes it, and that
// follow SIGKILLed under it makes the requester exit 1 within seconds,
// naming the cause and where to resume;
// a rerun beside a new follow resumes after the last committed chunk and
// ends with the rows of a fresh export.
func TestReplayThroughAFollowRefusedCancelledKilled(t *testing.T) {
	ctx := context.Background()
	dsn, stg, f, conn := followPast300(t)
	if _, err := conn.Exec(ctx, `UPDATE cometbft.events SET type = 'stale' WHERE height <= 300`); err != nil {
		t.Fatal(err)
	}
	lock := connect(t, dsn)
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM cometbft.blocks WHERE height = 205 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	blocked := func() bool {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}

	a, aout, adone := startReplay(t, dsn, stg)
	eventually(t, 2*time.Minute, "the replay commits 1-200 and waits on the locked row", func() bool {
		f.running(t, "replay A")
		return blocked() && readReplayRowIf(t, conn).last == 200
	})
	code, out := blockhaul(t, "export", "--pg", dsn, "--staging", stg, "--replay", "events", "--progress-interval", "0", "--log-level", "warn")
	if code != 2 || !strings.Contains(out, "runs one at a time") || !strings.Contains(out, fmt.Sprintf("for pid %d", a.Process.Pid)) {
		t.Errorf("a second replay request while one runs: exit %d, want 2 naming the one running:\n%s", code, out)
	}
	a.Process.Signal(syscall.SIGINT)
	if code := exitWithin(t, adone, 30*time.Second, "the interrupted requester", aout); code != 3 || !strings.Contains(aout.String(), "withdrew") {
		t.Fatalf("the interrupted requester exited %d, want 3 saying the follow cancelled the replay:\n%s", code, aout.String())
	}
	f.running(t, "after the requester was interrupted")
	if r := readReplayRowIf(t, conn); r.status != "in_progress" || r.last != 200 {
		t.Fatalf("after the cancel the replay row is %+v, want in progress at 200", r)
	}
	eventually(t, 30*time.Second, "the cancelled chunk stops waiting on the lock", func() bool { return !blocked() })

	code, out = blockhaul(t, "export", "--pg", dsn, "--staging", stg, "--replay", "events", "--schema", "elsewhere", "--progress-interval", "0", "--log-level", "warn")
	if code != 2 || !strings.Contains(out, "--schema") || !strings.Contains(out, "elsewhere") || !strings.Contains(out, "the follow writes schema") {
		t.Errorf("a replay request for another schema: exit %d, want 2 naming --schema:\n%s", code, out)
	}
	code, out = blockhaul(t, "export", "--pg", dsn, "--staging", stg, "--replay", "events", "--alias", "far", "--from", "1", "--to", "1000000", "--progress-interval", "0", "--log-level", "warn")
	if code != 2 || !strings.Contains(out, "not in PostgreSQL") {
		t.Errorf("a replay request past the exported heights: exit %d, want 2 naming them:\n%s", code, out)
	}

	// The follow stopped (SIGTERM) while it runs a replay: it answers
	// why, and stops as a follow with --to does.
	s, sout, sdone := startReplay(t, dsn, stg)
	eventually(t, time.Minute, "the resumed replay waits on the locked row", func() bool {
		f.running(t, "replay S")
		return blocked()
	})
	f.cmd.Process.Signal(syscall.SIGTERM)
	if code := exitWithin(t, sdone, 30*time.Second, "the requester of a replay whose follow was stopped", sout); code != 3 || !strings.Contains(sout.String(), "the follow is stopping") || !strings.Contains(sout.String(), "after height 200") {
		t.Fatalf("requester (pid %d) after the follow was stopped: exit %d, want 3 saying the follow stopped the replay after height 200:\n%s", s.Process.Pid, code, sout.String())
	}
	if err := <-f.exited; func() bool { ee, ok := err.(*exec.ExitError); return !ok || ee.ExitCode() != 3 }() {
		t.Fatalf("follow after SIGTERM: %v, want exit 3:\n%s", err, f.out.String())
	}
	f.exited <- nil
	eventually(t, 30*time.Second, "the stopped replay's chunk stops waiting on the lock", func() bool { return !blocked() })

	f = startFollow(t, dsn, stg)
	head := headHeight(t, conn)
	eventually(t, 2*time.Minute, "a new follow goes on", func() bool {
		f.running(t, "the new follow")
		return headHeight(t, conn) > head
	})
	b, bout, bdone := startReplay(t, dsn, stg)
	eventually(t, 2*time.Minute, "the replay resumed beside a new follow waits on the locked row", func() bool {
		f.running(t, "replay B")
		return blocked()
	})
	f.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	<-f.exited
	f.exited <- nil
	code = exitWithin(t, bdone, 20*time.Second, "the requester of a replay whose follow was killed", bout)
	msg := bout.String()
	if code != 1 || !strings.Contains(msg, fmt.Sprintf("pid %d", f.cmd.Process.Pid)) || !strings.Contains(msg, "no longer holds the staging directory") || !strings.Contains(msg, "resume from 201") {
		t.Fatalf("requester (pid %d) after the follow was killed: exit %d, want 1 naming the follow, the cause and where to resume:\n%s", b.Process.Pid, code, msg)
	}
	t.Logf("the requester saw the follow killed in %s: %s", time.Since(killed).Round(time.Millisecond), strings.TrimSpace(msg))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Rows below the resume point are not written again: damage at height
	// 7 now stays, which a replay that started over would put right.
	if _, err := conn.Exec(ctx, `DELETE FROM cometbft.events WHERE height = 7`); err != nil {
		t.Fatal(err)
	}

	f2 := startFollow(t, dsn, stg)
	head = headHeight(t, conn)
	eventually(t, 2*time.Minute, "a new follow goes on", func() bool {
		f2.running(t, "the new follow")
		return headHeight(t, conn) > head
	})
	code, out = blockhaul(t, "export", "--pg", dsn, "--staging", stg, "--replay", "events", "--batch-blocks", "100", "--progress-interval", "0", "--log-level", "warn")
	if code != 0 || !strings.Contains(out, "this run from 201") {
		t.Fatalf("rerun of the replay beside the new follow: exit %d, want 0 resuming from 201:\n%s\nfollow:\n%s", code, out, f2.out.String())
	}
	row := readReplayRowIf(t, conn)
	if row.status != "complete" {
		t.Fatalf("replay row after the rerun: %+v", row)
	}
	var at7 int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM cometbft.events WHERE height = 7`).Scan(&at7); err != nil || at7 != 0 {
		t.Errorf("events at height 7: %d (%v); the rerun started over instead of resuming after 200", at7, err)
	}
	ref := referenceRun(t, 1, int(row.to))
	if got, want := eventsPrintOf(t, dsn, row.to, 7), eventsPrintOf(t, ref, row.to, 7); got != want {
		t.Errorf("events of heights 1-%d (but 7) after the resumed replay: %s; a fresh export's: %s", row.to, got, want)
	}
	f2.running(t, "after the rerun")
	if left := replayFilesLeft(t, stg); len(left) > 0 {
		t.Errorf("request files left in staging: %v", left)
	}
}

// readReplayRowIf is readReplayRow of replay/events, zero before it exists.
func readReplayRowIf(t *testing.T, conn *pgx.Conn) replayRow {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_tables WHERE schemaname = 'cometbft' AND tablename = 'blockhaul_replays'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return replayRow{}
	}
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM cometbft.blockhaul_replays WHERE alias = 'replay/events'`).Scan(&n); err != nil || n == 0 {
		return replayRow{}
	}
	return readReplayRow(t, conn, "replay/events")
}

// Only a follow takes replay requests: beside a running fetch the request
// is refused at once (exit 2), naming the job that holds the directory.
func TestReplayBesideAFetchIsRefused(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "staging")
	// A range far longer than the test: the fetch is killed at its end.
	fetch := exec.Command(binary, "fetch", "--staging", stg, "--from", "1", "--to", "10000000", "--synthetic-txs", "1", "--progress-interval", "0", "--log-level", "warn")
	fetch.Env = testbin.CleanEnv()
	fetch.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := fetch.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- fetch.Wait() }()
	defer func() {
		fetch.Process.Kill()
		<-exited
	}()
	eventually(t, time.Minute, "the fetch serves its endpoint", func() bool {
		_, err := os.Stat(filepath.Join(stg, staging.SocketName))
		return err == nil
	})
	start := time.Now()
	code, out := blockhaul(t, "export", "--pg", dsn, "--staging", stg, "--replay", "events", "--progress-interval", "0", "--log-level", "warn")
	if code != 2 || !strings.Contains(out, fmt.Sprintf("running blockhaul fetch (pid %d), which does not take replay requests", fetch.Process.Pid)) {
		t.Fatalf("export --replay beside a fetch: exit %d, want 2 naming the fetch:\n%s", code, out)
	}
	if left := replayFilesLeft(t, stg); len(left) > 0 {
		t.Errorf("request files left in staging: %v", left)
	}
	t.Logf("refused in %s", time.Since(start).Round(time.Millisecond))
}
