package export

import (
	"context"
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
)

// Names of blockhaul's own tables, kept in the export schema beside the
// chain's tables.
const (
	checkpointTable = "blockhaul_checkpoints" // the head stream's cursor
	backfillTable   = "blockhaul_backfills"   // one row per backfill alias
)

// HeadStream is the name of the head stream's checkpoint row.
const HeadStream = "head"

func ownTablesSQL(qs string) []string {
	return []string{
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	stream       text PRIMARY KEY,
	height       bigint NOT NULL,
	hash         bytea,
	start_height bigint NOT NULL,
	updated_at   timestamptz NOT NULL DEFAULT now()
)`, qs, checkpointTable),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	alias        text PRIMARY KEY,
	range_start  bigint NOT NULL,
	range_end    bigint NOT NULL,
	last_height  bigint,
	last_hash    bytea,
	status       text NOT NULL DEFAULT 'in_progress' CHECK (status IN ('in_progress', 'complete')),
	started_at   timestamptz NOT NULL DEFAULT now(),
	updated_at   timestamptz NOT NULL DEFAULT now(),
	completed_at timestamptz
)`, qs, backfillTable),
	}
}

// lockSchema takes, until tx ends, the lock that serialises blockhaul's DDL
// on schema: its creation, and the dropping and building of its secondary
// indexes. Concurrent CREATE … IF NOT EXISTS of the same object is not safe
// in PostgreSQL (both pass the check, one fails on a catalog unique index),
// so any number of streams may start at once only if they take turns here.
// The lock is transaction-scoped, so a process killed while holding it
// releases it when its backend ends.
func lockSchema(ctx context.Context, tx pgx.Tx, schema string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('blockhaul:' || $1))", schema); err != nil {
		return fmt.Errorf("export: lock schema %s: %w", schema, err)
	}
	return nil
}

// EnsureSchema creates the schema, the decoder's tables, their secondary
// indexes (unless skipIndexes) and blockhaul's own tables, idempotently. An
// advisory lock serialises concurrent blockhaul processes doing the same.
func EnsureSchema(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table, skipIndexes bool) error {
	qs := chain.QuoteIdent(schema)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := lockSchema(ctx, tx, schema); err != nil {
			return err
		}
		stmts := []string{"CREATE SCHEMA IF NOT EXISTS " + qs}
		for _, t := range tables {
			stmts = append(stmts, t.CreateSQL(qs))
			if !skipIndexes {
				for _, ix := range t.Indexes {
					stmts = append(stmts, t.IndexSQL(qs, ix))
				}
			}
		}
		stmts = append(stmts, ownTablesSQL(qs)...)
		stmts = append(stmts, deferredSQL(qs))
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("export: create schema %s: %w\n%s", schema, err, s)
			}
		}
		return nil
	})
}
