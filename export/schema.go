package export

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
		if err := checkShapes(ctx, tx, schema, tables); err != nil {
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

// CheckShapes is EnsureSchema's check of the tables that already exist,
// alone and read-only, for a caller with more to check before it creates
// anything.
func CheckShapes(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table) error {
	return pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return checkShapes(ctx, tx, schema, tables)
	})
}

// ShapeError reports a table that exists in the target schema with another
// shape than the decoder's: COPY into it would fail, or write columns that
// mean something else. Nothing was created.
type ShapeError struct {
	Schema, Table string
	Diffs         []string // one per difference, e.g. `missing column "hash" bytea`
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("export: table %s.%s already exists with another shape: %s (another tool's table, or an older blockhaul's: export into another --schema, or drop the table)",
		e.Schema, e.Table, strings.Join(e.Diffs, "; "))
}

// checkShapes compares each of tables that already exists in schema with
// its definition: every column present with the same type, none NOT NULL
// that the decoder may leave NULL, no extra NOT NULL column without a
// default (COPY would leave it empty), the same primary key. Extra nullable
// columns are fine: COPY names its columns.
func checkShapes(ctx context.Context, tx pgx.Tx, schema string, tables []chain.Table) error {
	canonical := map[string]string{} // a type as written in DDL → as format_type prints it
	for _, t := range tables {
		rows, err := tx.Query(ctx, `
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atthasdef,
       coalesce(a.attnum = ANY (i.indkey), false)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, schema, t.Name)
		if err != nil {
			return fmt.Errorf("export: read the shape of %s.%s: %w", schema, t.Name, err)
		}
		type col struct {
			typ             string
			notNull, hasDef bool
			inPK            bool
		}
		have := map[string]col{}
		var order []string
		for rows.Next() {
			var name string
			var c col
			if err := rows.Scan(&name, &c.typ, &c.notNull, &c.hasDef, &c.inPK); err != nil {
				rows.Close()
				return fmt.Errorf("export: read the shape of %s.%s: %w", schema, t.Name, err)
			}
			have[name] = c
			order = append(order, name)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("export: read the shape of %s.%s: %w", schema, t.Name, err)
		}
		if len(have) == 0 {
			continue // not there yet
		}
		var diffs []string
		want := map[string]bool{}
		for _, c := range t.Columns {
			want[c.Name] = true
			h, ok := have[c.Name]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("missing column %s %s", chain.QuoteIdent(c.Name), c.Type))
				continue
			}
			typ, ok := canonical[c.Type]
			if !ok {
				if err := tx.QueryRow(ctx, "SELECT format_type(to_regtype($1), NULL)", c.Type).Scan(&typ); err != nil {
					return fmt.Errorf("export: type %s of %s.%s: %w", c.Type, t.Name, c.Name, err)
				}
				canonical[c.Type] = typ
			}
			if h.typ != typ {
				diffs = append(diffs, fmt.Sprintf("column %s is %s, not %s", chain.QuoteIdent(c.Name), h.typ, typ))
			}
			if c.Null && h.notNull {
				diffs = append(diffs, fmt.Sprintf("column %s is NOT NULL, but may be NULL", chain.QuoteIdent(c.Name)))
			}
		}
		var pk []string
		for _, name := range order {
			h := have[name]
			if !want[name] && h.notNull && !h.hasDef {
				diffs = append(diffs, fmt.Sprintf("extra column %s %s is NOT NULL without a default", chain.QuoteIdent(name), h.typ))
			}
			if h.inPK {
				pk = append(pk, name)
			}
		}
		if !slices.Equal(sorted(pk), sorted(t.PrimaryKey)) {
			diffs = append(diffs, fmt.Sprintf("primary key (%s), not (%s)", strings.Join(pk, ", "), strings.Join(t.PrimaryKey, ", ")))
		}
		if len(diffs) > 0 {
			return &ShapeError{Schema: schema, Table: t.Name, Diffs: diffs}
		}
	}
	return nil
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
