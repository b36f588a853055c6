package export

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Primary keys deferred for a fresh fill.
//
// COPY into a table without its primary key costs 0.5-0.8 of the COPY into
// the keyed table (docs/benchmarks.md); a restore builds its keys after the
// rows, and so does a fill of empty tables. But the keys are also what lets
// two writers of the same heights meet safely: a batch that collides (23505)
// is merged with INSERT … ON CONFLICT DO NOTHING. Without them a second
// writer would add its rows beside the first's. So a keyless table has one
// writer, the filler, named by a token recorded with each deferred key:
//
//   - the keys are dropped (DeferKeys) only when every table is empty, or to
//     resume the alias that dropped them, in a transaction that holds every
//     table in ACCESS EXCLUSIVE mode, so no other writer's batch is in
//     flight and the rows it sees are all the rows there are;
//   - every batch, of every writer, checks before it commits, once its COPY
//     holds its tables, that no key is deferred by another filler than its
//     own (keysDeferredByOther); a writer that finds one rolls back, builds
//     the keys (BuildKeys, which waits for the filler's batch in flight) and
//     writes its batch again, now merged as before;
//   - a resume (the same alias, whose sub-ranges' checkpoints commit with
//     their rows) claims the keys with a new token and goes on without them:
//     it writes only above those checkpoints, and no other writer can have
//     committed a row while the keys were deferred. Any other run that finds
//     them deferred builds them first.
//
// So every committed row of a keyless table was written by a filler of the
// alias that deferred its keys, under that alias's checkpoints: no height
// twice.

// newFillToken names one process's keyless fill.
func newFillToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DeferKeys drops the primary keys of tables for a fill by the stream
// alias when no other writer can meet its rows: every table is empty, or
// the keys are already deferred by a fill of the same alias (a resume),
// whose records it takes over. It records each key as deferred (its
// ALTER TABLE … ADD CONSTRAINT … PRIMARY KEY definition, marked as a
// key), so that BuildIndexes builds it first. It returns the fill's token
// (Config.KeylessFill) or "" when the keys stay: tables that hold rows
// some other writer may have written, or keys deferred by another alias
// (build them with BuildKeys before writing).
func DeferKeys(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table, alias string, log *slog.Logger) (string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	qs := chain.QuoteIdent(schema)
	var token string
	var dropped, claimed int
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		token, dropped, claimed = "", 0, 0
		if err := lockSchema(ctx, tx, schema); err != nil {
			return err
		}
		names := make([]string, len(tables))
		for i, t := range tables {
			names[i] = qs + "." + chain.QuoteIdent(t.Name)
		}
		// No batch of any writer in flight from here on; the rows seen
		// below are every committed row. The chain's tables are taken
		// before the bookkeeping table, the order of every batch (its
		// COPYs, then its read of the deferred keys), so a fill and a
		// batch wait for each other in one order and never deadlock.
		if _, err := tx.Exec(ctx, "LOCK TABLE "+strings.Join(names, ", ")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			return fmt.Errorf("export: defer keys: lock tables: %w", err)
		}
		if err := ensureDeferredTable(ctx, tx, schema); err != nil {
			return fmt.Errorf("export: defer keys: %w", err)
		}
		empty, err := tablesEmpty(ctx, tx, schema, tables)
		if err != nil {
			return err
		}
		var keys, ours int
		if err := tx.QueryRow(ctx, fmt.Sprintf("SELECT count(*), count(*) FILTER (WHERE filler_alias = $1) FROM %s.%s WHERE primary_key", qs, deferredTable), alias).Scan(&keys, &ours); err != nil {
			return fmt.Errorf("export: read deferred keys: %w", err)
		}
		resume := keys > 0 && ours == keys && alias != ""
		if !empty && !resume {
			return nil
		}
		token = newFillToken()
		if empty {
			for _, t := range tables {
				var name, def string
				err := tx.QueryRow(ctx, `SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'`,
					qs+"."+chain.QuoteIdent(t.Name)).Scan(&name, &def)
				if errors.Is(err, pgx.ErrNoRows) {
					continue
				}
				if err != nil {
					return fmt.Errorf("export: read the primary key of %s.%s: %w", schema, t.Name, err)
				}
				if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.%s (index_name, table_name, definition, primary_key) VALUES ($1, $2, $3, true)`, qs, deferredTable),
					name, t.Name, fmt.Sprintf("ALTER TABLE %s.%s ADD CONSTRAINT %s %s", qs, chain.QuoteIdent(t.Name), chain.QuoteIdent(name), def)); err != nil {
					return fmt.Errorf("export: record primary key %s: %w", name, err)
				}
				if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s.%s DROP CONSTRAINT %s", qs, chain.QuoteIdent(t.Name), chain.QuoteIdent(name))); err != nil {
					return fmt.Errorf("export: drop primary key %s: %w", name, err)
				}
				dropped++
			}
		}
		tag, err := tx.Exec(ctx, fmt.Sprintf("UPDATE %s.%s SET filler = $1, filler_alias = $2 WHERE primary_key", qs, deferredTable), token, alias)
		if err != nil {
			return fmt.Errorf("export: record the keyless fill: %w", err)
		}
		claimed = int(tag.RowsAffected()) - dropped
		if tag.RowsAffected() == 0 {
			token = "" // no table had a key to drop
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	switch {
	case dropped > 0:
		log.Info("primary keys deferred until the range completes: the tables are empty", "schema", schema, "keys", dropped+claimed)
	case claimed > 0:
		log.Info("primary keys stay deferred: resuming the fill that deferred them", "schema", schema, "alias", alias, "keys", claimed)
	}
	return token, nil
}

// BuildKeys builds the primary keys recorded as deferred, as BuildIndexes
// builds the deferred indexes (opts.KeysOnly set).
func BuildKeys(ctx context.Context, conn *pgx.Conn, schema string, opts BuildOptions) (int, error) {
	opts.KeysOnly = true
	opts.Analyze = nil
	return BuildIndexes(ctx, conn, schema, opts)
}

// KeysDeferred reports whether schema has primary keys deferred by another
// fill than token's ("" for a writer that fills with its keys in place).
func KeysDeferred(ctx context.Context, conn *pgx.Conn, schema, token string) (bool, error) {
	name := chain.QuoteIdent(schema) + "." + deferredTable
	if exists, err := tableExists(ctx, conn, name); err != nil || !exists {
		return false, err
	}
	return keysDeferredByOther(ctx, conn, schema, token)
}

// keysDeferredByOther reports whether a primary key of schema is deferred
// by another fill than token's. In a batch's transaction it runs after the
// COPY, whose locks order it after any DeferKeys in flight.
func keysDeferredByOther(ctx context.Context, q querier, schema, token string) (bool, error) {
	var other bool
	if err := q.QueryRow(ctx, fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s.%s WHERE primary_key AND filler IS DISTINCT FROM nullif($1, ''))", chain.QuoteIdent(schema), deferredTable), token).Scan(&other); err != nil {
		return false, fmt.Errorf("export: read deferred keys: %w", err)
	}
	return other, nil
}

// errKeysDeferred stops a batch that found the primary keys deferred by
// another fill: its writer builds them and writes the batch again.
var errKeysDeferred = errors.New("export: primary keys deferred by another fill")

// ensureKeys builds, on conn, the keys another fill than token's deferred,
// for a writer about to write into their tables.
func ensureKeys(ctx context.Context, conn *pgx.Conn, schema, token string, mem int64, log *slog.Logger) error {
	other, err := keysDeferredByOther(ctx, conn, schema, token)
	if err != nil || !other {
		return err
	}
	return buildKeysFor(ctx, conn, schema, mem, log)
}

// buildKeysFor builds the keys another fill deferred, on conn, for a writer
// that is about to write into their tables, each with maintenance_work_mem
// mem (0: the server's), as the deferred builds after a fill.
func buildKeysFor(ctx context.Context, conn *pgx.Conn, schema string, mem int64, log *slog.Logger) error {
	log.Info("primary keys deferred by another fill: building them before writing, so that the rows it wrote merge")
	_, err := BuildKeys(ctx, conn, schema, BuildOptions{Logger: log, MaintenanceWorkMem: mem})
	return err
}

// DuplicateKeyError reports a deferred primary key that could not be built
// because its table holds two rows with one key. Nothing was dropped: the
// rows stay, and so does the key's record, for a run after the duplicates
// are resolved.
type DuplicateKeyError struct {
	Schema, Table, Key string
	Detail             string // PostgreSQL's: which key value is doubled
	Err                error
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("export: primary key %s of %s.%s cannot be built: the table holds duplicate rows (%s); its rows are kept and the key stays recorded as deferred in %s.%s (remove the duplicates, then run again to build it)",
		e.Key, e.Schema, e.Table, e.Detail, e.Schema, deferredTable)
}
func (e *DuplicateKeyError) Unwrap() error { return e.Err }

// Fault marks the error as data that is wrong (exit 4).
func (e *DuplicateKeyError) Fault() fault.Class { return fault.Data }

// asDuplicateKey turns the unique violation of a key build into a
// *DuplicateKeyError.
func asDuplicateKey(err error, schema, table, key string) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return &DuplicateKeyError{Schema: schema, Table: table, Key: key, Detail: pe.Detail, Err: err}
	}
	return err
}
