package export

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
)

// deferredTable records the definitions of secondary indexes dropped for a
// bulk fill, so that the run that completes the range — or any later run
// without --defer-indexes — can build them again.
const deferredTable = "blockhaul_deferred_indexes"

func deferredSQL(qs string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	index_name  text PRIMARY KEY,
	table_name  text NOT NULL,
	definition  text NOT NULL,
	deferred_at timestamptz NOT NULL DEFAULT now()
)`, qs, deferredTable)
}

// DeferIndexes drops the secondary indexes (never primary keys) of tables,
// recording each definition first, in one transaction.
func DeferIndexes(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table, log *slog.Logger) error {
	qs := chain.QuoteIdent(schema)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, deferredSQL(qs)); err != nil {
			return fmt.Errorf("export: defer indexes: %w", err)
		}
		for _, t := range tables {
			for _, ix := range t.Indexes {
				if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.%s (index_name, table_name, definition) VALUES ($1, $2, $3) ON CONFLICT (index_name) DO NOTHING`, qs, deferredTable),
					ix.Name, t.Name, t.IndexSQL(qs, ix)); err != nil {
					return fmt.Errorf("export: record index %s: %w", ix.Name, err)
				}
				if _, err := tx.Exec(ctx, fmt.Sprintf("DROP INDEX IF EXISTS %s.%s", qs, chain.QuoteIdent(ix.Name))); err != nil {
					return fmt.Errorf("export: drop index %s: %w", ix.Name, err)
				}
			}
		}
		log.Info("secondary indexes deferred until the range completes", "schema", schema)
		return nil
	})
}

// RestoreIndexes builds every index recorded as deferred and forgets it,
// logging each build time. It is idempotent: with nothing recorded it does
// nothing. It returns the number of indexes built.
func RestoreIndexes(ctx context.Context, conn *pgx.Conn, schema string, log *slog.Logger) (int, error) {
	qs := chain.QuoteIdent(schema)
	if exists, err := tableExists(ctx, conn, qs+"."+deferredTable); err != nil || !exists {
		return 0, err
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT index_name, table_name, definition FROM %s.%s ORDER BY table_name, index_name", qs, deferredTable))
	if err != nil {
		return 0, fmt.Errorf("export: read deferred indexes: %w", err)
	}
	type def struct{ name, table, sql string }
	var defs []def
	for rows.Next() {
		var d def
		if err := rows.Scan(&d.name, &d.table, &d.sql); err != nil {
			return 0, err
		}
		defs = append(defs, d)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for i, d := range defs {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, d.sql); err != nil {
			return i, fmt.Errorf("export: build index %s on %s: %w", d.name, d.table, err)
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("DELETE FROM %s.%s WHERE index_name = $1", qs, deferredTable), d.name); err != nil {
			return i, err
		}
		log.Info("index built", "index", d.name, "table", d.table, "duration", time.Since(t0).Round(time.Millisecond))
	}
	return len(defs), nil
}

// TablesEmpty reports whether every one of tables in schema is missing or
// holds no row.
func TablesEmpty(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table) (bool, error) {
	qs := chain.QuoteIdent(schema)
	for _, t := range tables {
		name := qs + "." + chain.QuoteIdent(t.Name)
		if exists, err := tableExists(ctx, conn, name); err != nil {
			return false, err
		} else if !exists {
			continue
		}
		var any bool
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s)", name)).Scan(&any); err != nil {
			return false, fmt.Errorf("export: look into table %s: %w", name, err)
		}
		if any {
			return false, nil
		}
	}
	return true, nil
}

// IndexesDeferred reports whether schema has indexes that a run deferred
// and nothing has built since.
func IndexesDeferred(ctx context.Context, conn *pgx.Conn, schema string) (bool, error) {
	name := chain.QuoteIdent(schema) + "." + deferredTable
	if exists, err := tableExists(ctx, conn, name); err != nil || !exists {
		return false, err
	}
	var pending bool
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s)", name)).Scan(&pending); err != nil {
		return false, fmt.Errorf("export: read deferred indexes: %w", err)
	}
	return pending, nil
}

// tableExists reports whether the table named by name (quoted, schema
// qualified) exists.
func tableExists(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
		return false, fmt.Errorf("export: look for table %s: %w", name, err)
	}
	return exists, nil
}
