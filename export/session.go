package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/internal/backoff"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RetryPolicy bounds how a Session rides out transient database faults.
type RetryPolicy struct {
	// Retries is how many times one operation is tried again after a
	// transient fault, counted since it last made progress (a committed
	// batch). 0 means a transient fault fails at once.
	Retries int
	// MaxWait caps one backoff. Backoffs start at 100ms and double, with
	// jitter. Default 10s.
	MaxWait time.Duration
}

// Default retry policy: ten tries over 20 to 45 seconds ride out a restart or
// a failover of PostgreSQL.
const (
	DefaultRetries = 10
	DefaultMaxWait = 10 * time.Second
)

// firstBackoff is the wait before the first retry.
const firstBackoff = 100 * time.Millisecond

// Session is a job's PostgreSQL connection that survives transient faults:
// Do runs an operation and, when a fault is transient (a terminated
// backend, a crash restart, a statement timeout, a deadlock), reconnects if
// the connection is lost and runs it again, within the RetryPolicy. It is
// not safe for concurrent use: one job goroutine owns it at a time.
type Session struct {
	dial    func(ctx context.Context) (*pgx.Conn, error)
	conn    *pgx.Conn
	policy  RetryPolicy
	log     *slog.Logger
	onRetry func(cause string, err error)
	tries   int // retries of the current Do since its last progress
}

// SessionOptions configures Dial.
type SessionOptions struct {
	Policy RetryPolicy
	// Logger receives a warning per retry. Default: discard.
	Logger *slog.Logger
	// OnRetry, if set, is called before each retry with its cause (see
	// TransientCause) and the error (metrics).
	OnRetry func(cause string, err error)
	// FailUnanswered makes Dial fail at once when its first connection
	// gets no answer from a server (refused, unreachable, timed out): a
	// job whose database never answered is pointed at the wrong place, not
	// hit by a transient fault. A server that answers (starting up, too
	// many connections) is still retried, and so is every fault after a
	// connection worked.
	FailUnanswered bool
}

// Dial connects through dial, retrying a transient failure to connect (the
// server restarting, refusing connections) like any other operation.
func Dial(ctx context.Context, dial func(ctx context.Context) (*pgx.Conn, error), opts SessionOptions) (*Session, error) {
	if opts.Policy.MaxWait <= 0 {
		opts.Policy.MaxWait = DefaultMaxWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Session{dial: dial, policy: opts.Policy, log: opts.Logger, onRetry: opts.OnRetry}
	if opts.FailUnanswered {
		conn, err := dial(ctx)
		var pe *pgconn.PgError
		switch {
		case err == nil:
			s.conn = conn
			return s, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("export: connect: %w", err)
		case !errors.As(err, &pe):
			// Failed, not Transient: nothing around it retries it either.
			return nil, fault.Errorf(fault.Failed, "export: connect: %w (no server answered, so it is not retried: check the host and port)", err)
		}
	}
	if err := s.Do(ctx, "connect", func(context.Context, *pgx.Conn) error { return nil }); err != nil {
		return nil, err
	}
	return s, nil
}

// Fixed wraps an open connection in a Session that never reconnects or
// retries (tests, tools that own their connection).
func Fixed(conn *pgx.Conn) *Session {
	return &Session{conn: conn, log: slog.New(slog.DiscardHandler)}
}

// Conn returns the current connection (nil after a fault, until the next
// Do reconnects). An operation that must survive faults runs through Do.
func (s *Session) Conn() *pgx.Conn { return s.conn }

// Dialer returns how the session connects (nil for a Fixed session), for
// work that needs connections of its own beside it (parallel index builds).
func (s *Session) Dialer() func(ctx context.Context) (*pgx.Conn, error) { return s.dial }

// Close closes the current connection.
func (s *Session) Close(ctx context.Context) {
	if s.conn != nil {
		s.conn.Close(ctx)
		s.conn = nil
	}
}

// Progressed tells the Session that the operation running under Do made
// durable progress (committed a batch): its retry budget starts again, so
// that a long job survives any number of blips spread over hours, while a
// fault that persists still ends it.
func (s *Session) Progressed() { s.tries = 0 }

// RetryError reports that an operation's retries are spent.
type RetryError struct {
	What    string // the operation
	Cause   string // the last fault's cause (see TransientCause)
	Retries int
	Err     error // the last error
}

func (e *RetryError) Error() string {
	if e.Retries == 0 {
		return fmt.Sprintf("export: %s: transient database fault (%s) and retries are off (--pg-retries 0): %v", e.What, e.Cause, e.Err)
	}
	return fmt.Sprintf("export: %s: gave up after %d retries of transient database faults (last cause: %s): %v", e.What, e.Retries, e.Cause, e.Err)
}

// Fault marks the error as a runtime failure (exit 1): the retries of a transient fault are spent, so nothing around it retries it again.
func (e *RetryError) Fault() fault.Class { return fault.Failed }
func (e *RetryError) Unwrap() error      { return e.Err }

// Do runs op on the session's connection. After a transient fault it
// backs off, reconnects when the connection was lost, and runs op again,
// until op succeeds, a fault is not transient, ctx ends or the retries are
// spent (a *RetryError naming the cause and the last error). op must be
// safe to run again: it re-reads what it depends on rather than carry it
// over from a failed attempt. Do may nest; the inner Do has its own budget.
func (s *Session) Do(ctx context.Context, what string, op func(ctx context.Context, conn *pgx.Conn) error) error {
	outer := s.tries
	s.tries = 0
	defer func() { s.tries = outer }()
	lastCause := ""
	for {
		err := s.ensureConn(ctx)
		if err == nil {
			if err = op(ctx, s.conn); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return err
		}
		cause, ok := TransientCause(err)
		if !ok || s.dial == nil {
			if s.tries > 0 {
				return fmt.Errorf("%w (after %d retries of a transient database fault: %s)", err, s.tries, lastCause)
			}
			return err
		}
		lastCause = cause
		if s.tries >= s.policy.Retries {
			return &RetryError{What: what, Cause: cause, Retries: s.policy.Retries, Err: err}
		}
		s.tries++
		wait := s.backoff(s.tries)
		s.log.Warn("transient database fault; retrying", "op", what, "cause", cause, "retry", s.tries, "of", s.policy.Retries, "wait", wait.Round(time.Millisecond), "err", err)
		if s.onRetry != nil {
			s.onRetry(cause, err)
		}
		if s.conn != nil && (s.conn.IsClosed() || lostConnection(cause)) {
			s.Close(context.WithoutCancel(ctx))
		}
		if backoff.Sleep(ctx, wait) != nil {
			return err
		}
	}
}

func (s *Session) ensureConn(ctx context.Context) error {
	if s.conn != nil && !s.conn.IsClosed() {
		return nil
	}
	if s.dial == nil {
		return errors.New("export: the database connection is closed")
	}
	s.Close(context.WithoutCancel(ctx))
	conn, err := s.dial(ctx)
	if err != nil {
		return err
	}
	s.conn = conn
	return nil
}

// backoff is the wait before retry n (1-based): 100ms doubling, capped at
// MaxWait, jittered so that streams hit by one restart do not reconnect in
// step.
func (s *Session) backoff(n int) time.Duration {
	return backoff.Policy{Base: firstBackoff, Max: s.policy.MaxWait}.Delay(n - 1)
}

// Causes of transient faults: the label of the retry counter.
const (
	CauseConnection       = "connection"         // the connection broke or could not be made
	CauseAdminShutdown    = "admin_shutdown"     // 57P01: backend terminated, or the server shutting down
	CauseCrashShutdown    = "crash_shutdown"     // 57P02: another backend crashed; the server restarts
	CauseCannotConnectNow = "cannot_connect_now" // 57P03: the server is starting up or recovering
	CauseStatementTimeout = "statement_timeout"  // 57014: statement_timeout (or a cancel that was not ours)
	CauseLockTimeout      = "lock_timeout"       // 55P03
	CauseDeadlock         = "deadlock"           // 40P01
	CauseSerialization    = "serialization"      // 40001
	CauseTooManyConns     = "too_many_connections"
	CauseTimeout          = "timeout" // a network timeout
)

// TransientCauses are every cause TransientCause gives.
var TransientCauses = []string{CauseConnection, CauseAdminShutdown, CauseCrashShutdown, CauseCannotConnectNow,
	CauseStatementTimeout, CauseLockTimeout, CauseDeadlock, CauseSerialization, CauseTooManyConns, CauseTimeout}

// TransientCause classifies err: whether running the operation again, on a
// new connection if need be, may succeed, and why. Data errors (classes 22,
// 23, 42), authentication, a missing database and the caller's own context
// ending are never transient.
func TransientCause(err error) (string, bool) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "", false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"):
			return CauseConnection, true
		case pe.Code == "57P01":
			return CauseAdminShutdown, true
		case pe.Code == "57P02":
			return CauseCrashShutdown, true
		case pe.Code == "57P03":
			return CauseCannotConnectNow, true
		case pe.Code == "57014":
			return CauseStatementTimeout, true
		case pe.Code == "55P03":
			return CauseLockTimeout, true
		case pe.Code == "40P01":
			return CauseDeadlock, true
		case pe.Code == "40001":
			return CauseSerialization, true
		case pe.Code == "53300":
			return CauseTooManyConns, true
		}
		return "", false
	}
	if pgconn.Timeout(err) {
		return CauseTimeout, true
	}
	// A connection refused or reset, a server gone mid-statement. (A
	// failure to connect that is none of these — a TLS refusal, a bad
	// host name — is not retried.)
	var ne net.Error
	if pgconn.SafeToRetry(err) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return CauseConnection, true
	}
	// pgx reports a connection it closed after a fault as "conn closed"
	// (an error it does not export).
	if strings.Contains(err.Error(), "conn closed") {
		return CauseConnection, true
	}
	return "", false
}

// lostConnection reports causes after which the connection is not reused.
func lostConnection(cause string) bool {
	switch cause {
	case CauseConnection, CauseAdminShutdown, CauseCrashShutdown, CauseCannotConnectNow, CauseTimeout, CauseTooManyConns:
		return true
	}
	return false
}
