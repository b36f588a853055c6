package export

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
)

// decodersTable records the decoder options a schema's rows were written
// with (docs/format/postgres.md): they shape its rows, so a check of the
// rows (verify, checksum) decodes as the writers did without being told.
const decodersTable = "blockhaul_decoders"

// DecoderOption is one recorded decoder option: "abi NAME" (Value the
// ABI's JSON and its addresses), "event-encoding", "bech32-prefix".
type DecoderOption struct {
	Option string
	Value  json.RawMessage
}

// RecordDecoders records opts in schema, each replacing an earlier record
// of the same option, under the schema's DDL lock.
func RecordDecoders(ctx context.Context, conn *pgx.Conn, schema string, opts []DecoderOption) error {
	if len(opts) == 0 {
		return nil
	}
	qs := chain.QuoteIdent(schema)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := lockSchema(ctx, tx, schema); err != nil {
			return err
		}
		for _, stmt := range []string{
			"CREATE SCHEMA IF NOT EXISTS " + qs,
			fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (option text PRIMARY KEY, value jsonb NOT NULL, recorded_at timestamptz NOT NULL DEFAULT now())`, qs, decodersTable),
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("export: record the decoder options in %s: %w", schema, err)
			}
		}
		for _, o := range opts {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.%s (option, value) VALUES ($1, $2)
ON CONFLICT (option) DO UPDATE SET value = EXCLUDED.value, recorded_at = now() WHERE %[1]s.%[2]s.value IS DISTINCT FROM EXCLUDED.value`, qs, decodersTable), o.Option, string(o.Value)); err != nil {
				return fmt.Errorf("export: record decoder option %s in %s: %w", o.Option, schema, err)
			}
		}
		return nil
	})
}

// ReadDecoders returns the decoder options schema records, in option
// order; none for a schema without the table (a new one, or one an older
// blockhaul wrote).
func ReadDecoders(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, schema string) ([]DecoderOption, error) {
	name := chain.QuoteIdent(schema) + "." + decodersTable
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
		return nil, fmt.Errorf("export: look for %s: %w", name, err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := q.Query(ctx, "SELECT option, value::text FROM "+name+" ORDER BY option")
	if err != nil {
		return nil, fmt.Errorf("export: read %s: %w", name, err)
	}
	opts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DecoderOption, error) {
		var o DecoderOption
		var v string
		err := r.Scan(&o.Option, &v)
		o.Value = json.RawMessage(v)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("export: read %s: %w", name, err)
	}
	return opts, nil
}
