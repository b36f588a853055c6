package export

import (
	"context"
	"errors"
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Stream is what one export advances. The head stream keeps its cursor in
// the checkpoint table; a backfill keeps its own row, keyed by alias, in the
// backfill table, and never touches the head's cursor.
type Stream struct {
	// Alias names a backfill. Empty for the head stream.
	Alias string
	// From and To bound a backfill's range (inclusive). For the head stream
	// From is where it starts when it has no checkpoint and To is the last
	// height this run exports (the confirmed tip).
	From, To uint64
	// Head marks the head stream.
	Head bool
}

// Name is the stream's name in logs and mirror targets.
func (s Stream) Name() string {
	if s.Head {
		return HeadStream
	}
	return "backfill/" + s.Alias
}

// DefaultAlias is the alias of a backfill over [from, to] when none is given.
func DefaultAlias(from, to uint64) string { return fmt.Sprintf("range-%d-%d", from, to) }

// Cursor is a stream's last committed height and that block's hash.
type Cursor struct {
	Height uint64
	Hash   []byte
	Valid  bool // false when nothing has been committed
}

// Next is the next height to export: last committed + 1, or from.
func (c Cursor) Next(from uint64) uint64 {
	if c.Valid && c.Height+1 > from {
		return c.Height + 1
	}
	return from
}

// LoadCursor reads the stream's cursor. For a backfill it also registers the
// alias with its range, refusing an alias that already names another range.
func LoadCursor(ctx context.Context, q querier, schema string, s Stream) (Cursor, error) {
	qs := chain.QuoteIdent(schema)
	var c Cursor
	var h *int64
	if s.Head {
		err := q.QueryRow(ctx, fmt.Sprintf("SELECT height, hash FROM %s.%s WHERE stream = $1", qs, checkpointTable), HeadStream).Scan(&h, &c.Hash)
		if errors.Is(err, pgx.ErrNoRows) {
			return Cursor{}, nil
		}
		if err != nil {
			return Cursor{}, fmt.Errorf("export: read head checkpoint: %w", err)
		}
	} else {
		var from, to int64
		_, err := q.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.%s (alias, range_start, range_end) VALUES ($1, $2, $3) ON CONFLICT (alias) DO NOTHING`, qs, backfillTable),
			s.Alias, int64(s.From), int64(s.To))
		if err != nil {
			return Cursor{}, fmt.Errorf("export: register backfill %q: %w", s.Alias, err)
		}
		err = q.QueryRow(ctx, fmt.Sprintf("SELECT range_start, range_end, last_height, last_hash FROM %s.%s WHERE alias = $1", qs, backfillTable), s.Alias).
			Scan(&from, &to, &h, &c.Hash)
		if err != nil {
			return Cursor{}, fmt.Errorf("export: read backfill %q: %w", s.Alias, err)
		}
		if uint64(from) != s.From || uint64(to) != s.To {
			return Cursor{}, &AliasRangeError{Alias: s.Alias, HaveFrom: uint64(from), HaveTo: uint64(to), GivenFrom: s.From, GivenTo: s.To}
		}
	}
	if h != nil {
		c.Height, c.Valid = uint64(*h), true
	}
	return c, nil
}

// saveCursor advances the stream's cursor inside the batch's transaction.
// It is monotonic: a cursor never moves back, whatever order two writers
// commit in.
func saveCursor(ctx context.Context, tx pgx.Tx, schema string, s Stream, from, height uint64, hash []byte) error {
	qs := chain.QuoteIdent(schema)
	var err error
	if s.Head {
		_, err = tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.%[2]s AS c (stream, height, hash, start_height) VALUES ($1, $2, $3, $4)
ON CONFLICT (stream) DO UPDATE SET
	hash = CASE WHEN EXCLUDED.height >= c.height THEN EXCLUDED.hash ELSE c.hash END,
	height = GREATEST(c.height, EXCLUDED.height),
	updated_at = now()`, qs, checkpointTable), HeadStream, int64(height), hash, int64(from))
	} else {
		_, err = tx.Exec(ctx, fmt.Sprintf(`UPDATE %[1]s.%[2]s AS b SET
	last_hash = CASE WHEN b.last_height IS NULL OR $2 >= b.last_height THEN $3 ELSE b.last_hash END,
	last_height = GREATEST(b.last_height, $2),
	status = CASE WHEN GREATEST(b.last_height, $2) >= b.range_end THEN 'complete' ELSE 'in_progress' END,
	completed_at = CASE WHEN GREATEST(b.last_height, $2) >= b.range_end THEN COALESCE(b.completed_at, now()) END,
	updated_at = now()
WHERE alias = $1`, qs, backfillTable), s.Alias, int64(height), hash)
	}
	if err != nil {
		return fmt.Errorf("export: save %s checkpoint at %d: %w", s.Name(), height, err)
	}
	return nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// HeadStart returns the height the head stream started at, if it has
// started. A backfill without an end runs up to just below it.
func HeadStart(ctx context.Context, q querier, schema string) (uint64, bool, error) {
	var h int64
	err := q.QueryRow(ctx, fmt.Sprintf("SELECT start_height FROM %s.%s WHERE stream = $1", chain.QuoteIdent(schema), checkpointTable), HeadStream).Scan(&h)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42P01" { // no such table yet
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("export: read head start: %w", err)
	}
	return uint64(h), true, nil
}

// Rollback removes every row above height from the chain's tables and moves
// the head stream's cursor back to height and hash, in one transaction. It
// is how the head stream undoes blocks of a fork the chain abandoned; it is
// the only way a cursor ever moves back; a chain record (see CheckChain) on
// the abandoned fork moves back with it. Tables that are not in the schema
// (left out by a table selection) are skipped: pass every table of the
// family (AllTables), so that one this process does not write is cleared
// too.
func Rollback(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table, height uint64, hash []byte) error {
	qs := chain.QuoteIdent(schema)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, t := range tables {
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qs+"."+chain.QuoteIdent(t.Name)).Scan(&exists); err != nil {
				return fmt.Errorf("export: roll back: look for %s: %w", t.Name, err)
			} else if !exists {
				continue
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM %s.%s WHERE %s > $1", qs, chain.QuoteIdent(t.Name), chain.QuoteIdent(t.HeightColumn)), int64(height)); err != nil {
				return fmt.Errorf("export: roll back %s above %d: %w", t.Name, height, err)
			}
		}
		_, err := tx.Exec(ctx, fmt.Sprintf("UPDATE %s.%s SET height = $2, hash = $3, updated_at = now() WHERE stream = $1 AND height > $2", qs, checkpointTable),
			HeadStream, int64(height), hash)
		if err != nil {
			return fmt.Errorf("export: roll back head checkpoint to %d: %w", height, err)
		}
		// A chain record whose block was on the abandoned fork names the
		// block both forks share instead.
		var recorded bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qs+"."+chainTable).Scan(&recorded); err != nil {
			return fmt.Errorf("export: roll back: look for %s: %w", chainTable, err)
		}
		if recorded {
			if _, err := tx.Exec(ctx, fmt.Sprintf("UPDATE %s.%s SET height = $1, hash = $2, recorded_at = now() WHERE height > $1", qs, chainTable), int64(height), hash); err != nil {
				return fmt.Errorf("export: roll back the chain record to %d: %w", height, err)
			}
		}
		return nil
	})
}

// Backfill is a backfill's row: its alias, its range, and the last height
// it committed (Done false when it has committed none).
type Backfill struct {
	Alias    string
	From, To uint64
	Last     uint64
	Done     bool // Last is set
}

// Complete reports whether the backfill committed its whole range.
func (b Backfill) Complete() bool { return b.Done && b.Last >= b.To }

// Backfills reads every backfill row of schema, by range start; none when
// the schema has no backfill table yet.
func Backfills(ctx context.Context, q rowsQuerier, schema string) ([]Backfill, error) {
	name := chain.QuoteIdent(schema) + "." + backfillTable
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
		return nil, fmt.Errorf("export: look for %s: %w", name, err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := q.Query(ctx, "SELECT alias, range_start, range_end, last_height FROM "+name+" ORDER BY range_start, alias")
	if err != nil {
		return nil, fmt.Errorf("export: read %s: %w", name, err)
	}
	defer rows.Close()
	var out []Backfill
	for rows.Next() {
		var b Backfill
		var from, to int64
		var last *int64
		if err := rows.Scan(&b.Alias, &from, &to, &last); err != nil {
			return nil, fmt.Errorf("export: read %s: %w", name, err)
		}
		b.From, b.To = uint64(from), uint64(to)
		if last != nil {
			b.Last, b.Done = uint64(*last), true
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("export: read %s: %w", name, err)
	}
	return out, nil
}
