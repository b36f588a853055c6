package export

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

const faultRange = 200 // heights of the fault tests' range, in batches of 20

// retryCounter counts a session's retries by cause.
type retryCounter struct {
	mu     sync.Mutex
	causes map[string]int
	then   func(cause string) // optional, after counting
}

func (r *retryCounter) onRetry(cause string, _ error) {
	r.mu.Lock()
	if r.causes == nil {
		r.causes = map[string]int{}
	}
	r.causes[cause]++
	r.mu.Unlock()
	if r.then != nil {
		r.then(cause)
	}
}

func (r *retryCounter) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.causes {
		n += v
	}
	return n
}

// dialer connects to dsn as application "blockhaul-victim".
func dialer(dsn string) func(ctx context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		cfg.RuntimeParams["application_name"] = "blockhaul-victim"
		return pgx.ConnectConfig(ctx, cfg)
	}
}

func faultConfig() Config {
	return Config{Schema: "chain x", BatchBlocks: 20, Stream: Stream{Alias: "a", From: 1, To: faultRange}}
}

// fingerprintOf digests the test tables and the backfill's checkpoint.
func fingerprintOf(t *testing.T, dsn string) string {
	t.Helper()
	fp := pgtest.Fingerprint(t, dsn, "chain x", map[string]string{"blocks": "height", "items": "height, idx"})
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	var cp string
	if err := conn.QueryRow(context.Background(), `SELECT alias || ' ' || coalesce(last_height::text, '-') || ' ' || encode(last_hash, 'hex') || ' ' || status FROM "chain x".blockhaul_backfills ORDER BY alias`).Scan(&cp); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("blocks %s; items %s; checkpoint %s", fp["blocks"], fp["items"], cp)
}

// reference exports the staged range into a fresh database, undisturbed.
func (e *env) reference(t *testing.T) string {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(e.ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := Run(e.ctx, Fixed(conn), e.store, testDecoder{}, faultConfig()); err != nil {
		t.Fatal(err)
	}
	return fingerprintOf(t, dsn)
}

// checkpointBehindRows fails the test if the stream's checkpoint claims a
// height whose rows are not all committed.
func checkpointBehindRows(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	var cp, rows int64
	err := admin.QueryRow(context.Background(), `SELECT coalesce((SELECT last_height FROM "chain x".blockhaul_backfills WHERE alias = 'a'), 0),
	(SELECT count(*) FROM "chain x".blocks WHERE height <= coalesce((SELECT last_height FROM "chain x".blockhaul_backfills WHERE alias = 'a'), 0))`).Scan(&cp, &rows)
	if err != nil {
		var pe interface{ SQLState() string }
		if errors.As(err, &pe) && pe.SQLState() == "42P01" {
			return // no tables yet
		}
		t.Errorf("sample checkpoint: %v", err)
		return
	}
	if rows != cp {
		t.Errorf("checkpoint at %d but only %d of its blocks are committed", cp, rows)
	}
}

// terminate ends the backends of application "blockhaul-victim" in the
// database of admin, as an operator's pg_terminate_backend would.
func terminate(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	var n int
	if err := admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	WHERE application_name = 'blockhaul-victim' AND datname = current_database()`).Scan(&n); err != nil || n == 0 {
		t.Errorf("terminate the export's backend: %d terminated, %v", n, err)
	}
}

// faultEnv is a new environment with the fault tests' range staged and
// exported once for reference; want is that export's fingerprint.
func faultEnv(t *testing.T) (e *env, want string) {
	t.Helper()
	e = newEnv(t)
	e.stage(1, faultRange, items)
	return e, e.reference(t)
}

// atEachBatchPoint runs test once for each point of a batch (after its
// COPY, before its commit, after its commit) as a subtest, with an
// environment whose staged range has been exported once for reference:
// want is that export's fingerprint, dsn its database.
func atEachBatchPoint(t *testing.T, test func(t *testing.T, point crashpoint.Point, e *env, want, dsn string)) {
	for _, point := range []crashpoint.Point{crashpoint.AfterCopy, crashpoint.BeforeCommit, crashpoint.AfterCommit} {
		t.Run(string(point), func(t *testing.T) {
			e, want := faultEnv(t)
			test(t, point, e, want, e.conn.Config().ConnString())
		})
	}
}

// A backend terminated at any point of a batch — after its COPY, before
// its commit, after its commit — is reconnected and the export resumes
// from PostgreSQL's checkpoint: the tables end identical to an undisturbed
// run, and the checkpoint is never ahead of the rows.
func TestRunRidesOutTerminatedBackends(t *testing.T) {
	atEachBatchPoint(t, func(t *testing.T, point crashpoint.Point, e *env, want, dsn string) {
		var hits, terminated atomic.Int64
		var sampleMu sync.Mutex
		restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
			if p == crashpoint.AfterCommit {
				sampleMu.Lock()
				checkpointBehindRows(t, e.conn)
				sampleMu.Unlock()
			}
			if p != point {
				return nil
			}
			if n := hits.Add(1); n%4 == 2 { // every fourth hit
				sampleMu.Lock()
				terminate(t, e.conn)
				terminated.Add(1)
				sampleMu.Unlock()
			}
			return nil
		})
		defer restore()
		var rc retryCounter
		sess, err := Dial(e.ctx, dialer(dsn), SessionOptions{Policy: RetryPolicy{Retries: 5, MaxWait: time.Second}, OnRetry: rc.onRetry})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close(context.Background())
		res, err := Run(e.ctx, sess, e.store, testDecoder{}, faultConfig())
		restore()
		if err != nil || !res.Complete {
			t.Fatalf("run with terminated backends: %v (complete %v)", err, res.Complete)
		}
		if rc.total() == 0 {
			t.Fatal("no retry was counted")
		}
		if got := fingerprintOf(t, dsn); got != want {
			t.Fatalf("after %d retries %v:\n got %s\nwant %s", rc.total(), rc.causes, got, want)
		}
		t.Logf("%s: %d terminations, retries %v", point, terminated.Load(), rc.causes)
	})
}

// A crash at each chosen point — the process dies, its transaction is
// rolled back by the server, the staging mirror is not written — leaves
// the checkpoint no further than the rows, and a plain resume ends with the
// tables of an undisturbed run.
func TestCrashAtEachPointThenResume(t *testing.T) {
	atEachBatchPoint(t, func(t *testing.T, point crashpoint.Point, e *env, want, dsn string) {
		for crash := 3; crash <= 5; crash += 2 { // two crashes, at the 3rd hit and then the 5th of the resumed run
			victim := connectKillable(t, dsn)
			var hits atomic.Int64
			killed := errors.New("killed")
			restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
				if p == point && hits.Add(1) == int64(crash) {
					victim.PgConn().Conn().Close() // SIGKILL: the socket goes, nothing else
					return killed
				}
				return nil
			})
			_, err := Run(e.ctx, Fixed(victim), e.store, testDecoder{}, faultConfig())
			restore()
			if !errors.Is(err, killed) {
				t.Fatalf("crash %d at %s: run returned %v", crash, point, err)
			}
			checkpointBehindRows(t, e.conn)
		}
		res, err := Run(e.ctx, Fixed(e.conn), e.store, testDecoder{}, faultConfig())
		if err != nil || !res.Complete {
			t.Fatalf("resume: %v (complete %v)", err, res.Complete)
		}
		if got := fingerprintOf(t, dsn); got != want {
			t.Fatalf("after crashes at %s:\n got %s\nwant %s", point, got, want)
		}
	})
}

// A statement that outlives the database's statement_timeout fails its
// batch, which is retried on the same connection and commits.
func TestStatementTimeoutIsRetried(t *testing.T) {
	e, want := faultEnv(t)
	dsn := e.conn.Config().ConnString()
	if _, err := e.conn.Exec(e.ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET statement_timeout = ''1s''', current_database()); END $$`); err != nil {
		t.Fatal(err)
	}
	// The 5th batch waits for a lock held past the timeout; the retry
	// releases it.
	locker, err := pgx.Connect(e.ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	if _, err := locker.Exec(e.ctx, "SET statement_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	var lockTx pgx.Tx
	var hits atomic.Int64
	restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
		if p == crashpoint.AfterCopy && hits.Add(1) == 5 {
			var err error
			if lockTx, err = locker.Begin(ctx); err == nil {
				_, err = lockTx.Exec(ctx, `LOCK TABLE "chain x".blockhaul_backfills IN EXCLUSIVE MODE`)
			}
			if err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	defer restore()
	rc := retryCounter{then: func(string) {
		if lockTx != nil {
			_ = lockTx.Rollback(context.Background())
			lockTx = nil
		}
	}}
	sess, err := Dial(e.ctx, dialer(dsn), SessionOptions{Policy: RetryPolicy{Retries: 3, MaxWait: time.Second}, OnRetry: rc.onRetry})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	res, err := Run(e.ctx, sess, e.store, testDecoder{}, faultConfig())
	if err != nil || !res.Complete {
		t.Fatalf("run: %v (complete %v)", err, res.Complete)
	}
	if rc.causes[CauseStatementTimeout] != 1 || rc.total() != 1 {
		t.Fatalf("retries %v, want one statement_timeout", rc.causes)
	}
	if got := fingerprintOf(t, dsn); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// Faults that retrying cannot cure end the run at once, naming the cause
// and the last error: a transient fault with retries off, and a database
// dropped under the run.
func TestPermanentDatabaseFaultsFailNamingTheCause(t *testing.T) {
	t.Run("retries off", func(t *testing.T) {
		e := newEnv(t)
		e.stage(1, faultRange, items)
		dsn := e.conn.Config().ConnString()
		var hits atomic.Int64
		restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
			if p == crashpoint.AfterCopy && hits.Add(1) == 3 {
				terminate(t, e.conn)
			}
			return nil
		})
		defer restore()
		sess, err := Dial(e.ctx, dialer(dsn), SessionOptions{Policy: RetryPolicy{Retries: 0}})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close(context.Background())
		_, err = Run(e.ctx, sess, e.store, testDecoder{}, faultConfig())
		var re *RetryError
		if !errors.As(err, &re) || re.Retries != 0 || (re.Cause != CauseAdminShutdown && re.Cause != CauseConnection) || !strings.Contains(err.Error(), "retries are off") {
			t.Fatalf("got %v, want a RetryError naming the termination", err)
		}
		checkpointBehindRows(t, e.conn)
	})
	t.Run("database dropped", func(t *testing.T) {
		e := newEnv(t)
		e.stage(1, faultRange, items)
		dsn := e.conn.Config().ConnString()
		admin, err := pgx.Connect(e.ctx, pgtest.BaseURL())
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(context.Background())
		db := e.conn.Config().Database
		var hits atomic.Int64
		restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
			if p == crashpoint.AfterCommit && hits.Add(1) == 3 {
				if _, err := admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
					t.Error(err)
				}
			}
			return nil
		})
		defer restore()
		sess, err := Dial(e.ctx, dialer(dsn), SessionOptions{Policy: RetryPolicy{Retries: 10, MaxWait: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close(context.Background())
		t0 := time.Now()
		_, err = Run(e.ctx, sess, e.store, testDecoder{}, faultConfig())
		if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "after 1 retries") {
			t.Fatalf("got %v, want the missing database named after one retry", err)
		}
		if d := time.Since(t0); d > 10*time.Second {
			t.Fatalf("took %s to give up", d)
		}
	})
}

// An immediate-mode restart of the server (a crash: asynchronously
// committed batches may be lost with their checkpoint) in the middle of a
// run is ridden out: the session reconnects once the server accepts
// connections again and the export resumes from what survived.
func TestRunRidesOutCrashRestart(t *testing.T) {
	e, want := faultEnv(t)
	cluster := pgtest.StartCluster(t)
	dsn := cluster.NewDatabase(t, "crash")
	admin, err := pgx.Connect(e.ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	restarted := false
	restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
		if p == crashpoint.AfterCommit && hits.Add(1) == 6 {
			if err := cluster.Restart("immediate"); err != nil {
				t.Error(err)
			}
			restarted = true
			if admin, err = pgx.Connect(ctx, dsn); err != nil {
				t.Error(err)
				return nil
			}
			checkpointBehindRows(t, admin)
		}
		return nil
	})
	defer restore()
	var rc retryCounter
	sess, err := Dial(e.ctx, dialer(dsn), SessionOptions{Policy: RetryPolicy{Retries: 10, MaxWait: 2 * time.Second}, OnRetry: rc.onRetry})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	res, err := Run(e.ctx, sess, e.store, testDecoder{}, faultConfig())
	restore()
	defer admin.Close(context.Background())
	if err != nil || !res.Complete || !restarted {
		t.Fatalf("run across a crash restart: %v (complete %v, restarted %v)", err, res.Complete, restarted)
	}
	if rc.total() == 0 {
		t.Fatal("no retry was counted")
	}
	if got := fingerprintOf(t, dsn); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	t.Logf("retries %v", rc.causes)
}

// A job that starts while the server is down (restarting, failing over)
// waits for it within its retries instead of failing at once.
func TestDialWaitsForTheServer(t *testing.T) {
	e, want := faultEnv(t)
	cluster := pgtest.StartCluster(t)
	dsn := cluster.NewDatabase(t, "late")
	if err := cluster.Stop("fast"); err != nil {
		t.Fatal(err)
	}
	var rc retryCounter
	rc.then = func(cause string) {
		if cause == CauseConnection && rc.causes[CauseConnection] == 2 {
			if err := cluster.Start(); err != nil {
				t.Error(err)
			}
		}
	}
	sess, err := Dial(e.ctx, dialer(dsn), SessionOptions{Policy: RetryPolicy{Retries: 5, MaxWait: time.Second}, OnRetry: rc.onRetry})
	if err != nil {
		t.Fatalf("dial while the server starts: %v (retries %v)", err, rc.causes)
	}
	defer sess.Close(context.Background())
	if res, err := Run(e.ctx, sess, e.store, testDecoder{}, faultConfig()); err != nil || !res.Complete {
		t.Fatalf("run: %v", err)
	}
	if rc.causes[CauseConnection] < 2 {
		t.Fatalf("retries %v, want at least two refused connections", rc.causes)
	}
	if got := fingerprintOf(t, dsn); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}

	// With the server gone for good the retries are spent, in bounded
	// time, naming the cause.
	if err := cluster.Stop("fast"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = Dial(e.ctx, dialer(dsn), SessionOptions{Policy: RetryPolicy{Retries: 3, MaxWait: 200 * time.Millisecond}})
	var re *RetryError
	if !errors.As(err, &re) || re.Cause != CauseConnection || re.Retries != 3 || time.Since(t0) > 10*time.Second {
		t.Fatalf("dial a stopped server: %v after %s", err, time.Since(t0))
	}
}
