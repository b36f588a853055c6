// Package pgtest gives tests a fresh, empty PostgreSQL database of their own.
//
// The server is $DATABASE_URL if set, else postgres://postgres@127.0.0.1:5432.
// A test that cannot reach it fails: tests that need PostgreSQL never skip.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BaseURL is the server the tests use.
func BaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// NewDatabase creates an empty database, drops it when the test ends, and
// returns its connection URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(BaseURL())
	if err != nil {
		t.Fatalf("pgtest: parse DATABASE_URL: %v", err)
	}
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: PostgreSQL is required for this test and is not reachable at %s:%d: %v (run `make test`, which starts one)", cfg.Host, cfg.Port, err)
	}
	defer admin.Close(ctx)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := "blockhaul_test_" + hex.EncodeToString(rnd[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return WithDatabase(BaseURL(), name)
}

// WithDatabase returns dsn with its database replaced by name. It accepts
// both URL and keyword/value DSNs.
func WithDatabase(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String()
	}
	return dsn + " dbname=" + name
}

// Fingerprint returns, for each table of schema (keyed by table name, with
// its ORDER BY columns as value), the row count and an md5 over every row in
// that order: two databases with equal fingerprints hold the same rows.
func Fingerprint(t testing.TB, dsn, schema string, orderBy map[string]string) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn := ConnectTo(t, dsn)
	defer conn.Close(ctx)
	out := make(map[string]string, len(orderBy))
	for table, key := range orderBy {
		var n int64
		var sum *string
		q := fmt.Sprintf(`SELECT count(*), md5(string_agg(md5(t::text), '' ORDER BY %s)) FROM %s.%s t`,
			key, pgx.Identifier{schema}.Sanitize(), pgx.Identifier{table}.Sanitize())
		if err := conn.QueryRow(ctx, q).Scan(&n, &sum); err != nil {
			t.Fatalf("pgtest: %s: %v", q, err)
		}
		s := "<empty>"
		if sum != nil {
			s = *sum
		}
		out[table] = fmt.Sprintf("%d rows %s", n, s)
	}
	return out
}

// Connect connects to a fresh database of the test's own (NewDatabase) and
// closes the connection when the test ends.
func Connect(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), NewDatabase(t))
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// ConnectTo connects to dsn or fails the test. The caller closes the
// connection (so that its lifetime stays the caller's, e.g. a helper's
// `defer conn.Close(ctx)`).
func ConnectTo(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	return conn
}

// SecondaryIndexes lists by name the indexes of schema that are not
// primary keys.
func SecondaryIndexes(t testing.TB, conn *pgx.Conn, schema string) []string {
	t.Helper()
	return Strings(t, conn, `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND indexname NOT LIKE '%pkey' ORDER BY indexname`, schema)
}

// Strings runs a query of one text column and returns its rows, or fails
// the test.
func Strings(t testing.TB, conn *pgx.Conn, sql string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
