package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
)

// scratchDB is a database created for one measurement, so that every load
// starts from empty tables, and dropped after it.
type scratchDB struct {
	server string // URL of the server (its maintenance database)
	name   string
	url    string
}

// scratchRun creates, for one measurement named purpose, a scratch
// database and a work directory; cleanup removes the directory and drops
// the database, returning the drop's error.
func scratchRun(ctx context.Context, cfg *Config, purpose string) (db *scratchDB, dir string, cleanup func() error, err error) {
	db, err = createDatabase(ctx, cfg.DatabaseURL, purpose)
	if err != nil {
		return nil, "", nil, err
	}
	dir, err = os.MkdirTemp(cfg.WorkDir, "blockhaul-bench-"+purpose+"-")
	if err != nil {
		return nil, "", nil, errors.Join(fmt.Errorf("bench: %w", err), db.drop(ctx))
	}
	return db, dir, func() error {
		os.RemoveAll(dir)
		return db.drop(ctx)
	}, nil
}

// scratchConn creates, for one measurement named purpose, a scratch
// database and connects to it; done closes the connection and drops the
// database, returning the drop's error.
func scratchConn(ctx context.Context, cfg *Config, purpose string) (db *scratchDB, conn *pgx.Conn, done func() error, err error) {
	db, err = createDatabase(ctx, cfg.DatabaseURL, purpose)
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err = pgx.Connect(ctx, db.url)
	if err != nil {
		return nil, nil, nil, errors.Join(fmt.Errorf("bench: connect to %s: %w", db.name, err), db.drop(ctx))
	}
	return db, conn, func() error {
		conn.Close(context.WithoutCancel(ctx))
		return db.drop(ctx)
	}, nil
}

func createDatabase(ctx context.Context, server, purpose string) (*scratchDB, error) {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("bench: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "blockhaul_bench_" + purpose + "_" + hex.EncodeToString(rnd[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+chain.QuoteIdent(name)); err != nil {
		return nil, fmt.Errorf("bench: create database %s: %w", name, err)
	}
	// A checkpoint now keeps the previous measurement's dirty pages from
	// being written out during this one.
	_, _ = conn.Exec(ctx, "CHECKPOINT")
	return &scratchDB{server: server, name: name, url: withDatabase(server, name)}, nil
}

// drop removes the database, even when ctx is already done.
func (d *scratchDB) drop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.server)
	if err != nil {
		return fmt.Errorf("bench: drop database %s: %w", d.name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+chain.QuoteIdent(d.name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("bench: drop database %s: %w", d.name, err)
	}
	return nil
}

// withDatabase returns dsn with its database replaced by name, for URL and
// keyword/value DSNs alike.
func withDatabase(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String()
	}
	return dsn + " dbname=" + name
}
