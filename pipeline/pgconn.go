package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/export"
	"github.com/jackc/pgx/v5"
)

// The one way blockhaul connects to PostgreSQL: a DSN is parsed once into a
// *pgx.ConnConfig (pgConnConfig, by Resolve), every connection is made from
// it by openSession (a session that retries transient faults) or
// connectPG (one connection, its connect retried the same way), and a
// password never reaches a log, an error or a status line (RedactDSN).

// applicationName is how blockhaul's connections show in pg_stat_activity
// unless the DSN names another.
const applicationName = "blockhaul"

// dialTimeout bounds one connection attempt unless the DSN sets
// connect_timeout.
const dialTimeout = 30 * time.Second

// pgConnConfig parses dsn into the configuration every connection of a job
// is made from: blockhaul's application_name unless the DSN names one. Its
// ConnectTimeout is the DSN's connect_timeout (0: none given), which
// openSession bounds by dialTimeout.
func pgConnConfig(dsn string) (*pgx.ConnConfig, error) {
	pc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if _, ok := pc.RuntimeParams["application_name"]; !ok {
		pc.RuntimeParams["application_name"] = applicationName
	}
	return pc, nil
}

// pgOptions is how a job rides out database faults: --pg-retries and
// --pg-retry-max-wait, and what hears of each retry.
type pgOptions struct {
	Policy  export.RetryPolicy
	Logger  *slog.Logger
	OnRetry func(cause string, err error)
}

// pgOptionsOf is j's pgOptions, counting each retry in m (nil: not counted).
func pgOptionsOf(j *Job, log *slog.Logger, c *counters) pgOptions {
	o := pgOptions{Policy: export.RetryPolicy{Retries: j.PGRetries, MaxWait: j.PGRetryMaxWait}, Logger: log}
	if c != nil && c.m != nil {
		o.OnRetry = func(cause string, _ error) { c.m.PGRetry(cause) }
	}
	return o
}

// openSession opens a PostgreSQL session on pc: a connection that
// reconnects and retries after transient faults within o.Policy. A server
// that never answered fails it at once (export.SessionOptions.FailUnanswered).
func openSession(ctx context.Context, pc *pgx.ConnConfig, o pgOptions) (*export.Session, error) {
	if pc == nil {
		return nil, fmt.Errorf("connect to PostgreSQL: no --pg given")
	}
	dial := func(ctx context.Context) (*pgx.Conn, error) {
		c := pc.Copy()
		if c.ConnectTimeout == 0 {
			// A server that does not answer is a fault, not a hang: at
			// the job's start it fails the job, later it is retried.
			c.ConnectTimeout = dialTimeout
		}
		conn, err := pgx.ConnectConfig(ctx, c)
		if err != nil {
			return nil, markConnectRefusal(&redactedError{msg: "connect to PostgreSQL: " + redactPassword(err.Error(), pc.Password), err: err})
		}
		return conn, nil
	}
	return export.Dial(ctx, dial, export.SessionOptions{
		Policy:         o.Policy,
		Logger:         o.Logger,
		OnRetry:        o.OnRetry,
		FailUnanswered: true,
	})
}

// connectPG is one connection on pc, made as openSession makes its own
// (its connect retried within o.Policy); the caller closes it. For the
// commands that read (status, verify, estimate, checksum, a replay's
// requester), which hold a connection rather than a session.
func connectPG(ctx context.Context, pc *pgx.ConnConfig, o pgOptions) (*pgx.Conn, error) {
	s, err := openSession(ctx, pc, o)
	if err != nil {
		return nil, err
	}
	return s.Conn(), nil
}

// dialSession opens the job's PostgreSQL session on --pg, counting each
// retry in the job's metrics.
func dialSession(ctx context.Context, j *Job, log *slog.Logger, c *counters) (*export.Session, error) {
	return openSession(ctx, j.PGConn, pgOptionsOf(j, log, c))
}

// connect is one connection on --pg (connectPG).
func connect(ctx context.Context, j *Job) (*pgx.Conn, error) {
	return connectPG(ctx, j.PGConn, pgOptionsOf(j, nil, nil))
}

// redactedError is err with a message that holds no credential; it keeps
// err's chain for classification (export.TransientCause).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// DSNPassword returns the password a PostgreSQL DSN carries itself, in its
// URL form (user:password@, ?password=) or its keyword form (password=…),
// and whether it carries one (not through PGPASSWORD or a passfile). A URL
// that does not parse is taken to carry one when it has user information.
func DSNPassword(dsn string) (string, bool) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			if at := strings.LastIndexByte(dsn, '@'); at >= 0 {
				info := dsn[strings.Index(dsn, "//")+2 : at]
				if _, pw, ok := strings.Cut(info, ":"); ok {
					return pw, true
				}
				return "", true // unparsable: assume the worst
			}
			return "", false
		}
		if pw, ok := u.User.Password(); ok {
			return pw, true
		}
		if pw := u.Query().Get("password"); pw != "" {
			return pw, true
		}
		return "", false
	}
	m := kvPassword.FindStringSubmatch(dsn)
	if m == nil {
		return "", false
	}
	pw := m[2]
	if strings.HasPrefix(pw, "'") {
		pw = strings.TrimSuffix(strings.TrimPrefix(pw, "'"), "'")
	}
	return pw, true
}

var kvPassword = regexp.MustCompile(`(^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s]+)`)

// RedactDSN returns s with the password dsn carries replaced by xxxxx: the
// one redaction of a PostgreSQL password, for any text that may quote its
// DSN (pgx's parse errors do).
func RedactDSN(s, dsn string) string {
	pw, _ := DSNPassword(dsn)
	s = redactPassword(s, pw)
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if upw, ok := u.User.Password(); ok {
			s = redactPassword(s, upw)
			s = redactPassword(s, url.QueryEscape(upw))
		}
	}
	return s
}

// redactPassword is s with every occurrence of password pw replaced.
func redactPassword(s, pw string) string {
	if pw == "" {
		return s
	}
	return strings.ReplaceAll(s, pw, "xxxxx")
}

// redactPGError is err's text with the password of dsn removed.
func redactPGError(err error, dsn string) string { return RedactDSN(err.Error(), dsn) }
