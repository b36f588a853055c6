//go:build cgo

package parquet_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/blockhaul/blockhaul/export/parquet"
)

// DuckDB reads every column as the type docs/parquet.md says: integers as
// integers, times as UTC timestamps, bytes as BLOB, JSON as JSON, numerics
// as their decimal text; in the order PostgreSQL has them.
func TestDuckDBColumnTypes(t *testing.T) {
	want := map[string]string{
		"bigint": "BIGINT", "integer": "INTEGER", "smallint": "SMALLINT", "boolean": "BOOLEAN",
		"bytea": "BLOB", "text": "VARCHAR", "jsonb": "JSON", "numeric": "VARCHAR",
		"timestamptz": "TIMESTAMP WITH TIME ZONE", "bytea[]": "BLOB[]", "text[]": "VARCHAR[]",
	}
	ctx := context.Background()
	for _, c := range []synthChain{cometChain(), evmChain()} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			store := stage(t, filepath.Join(tmp, "staging"), c, 1, 20)
			defer store.Close()
			out := filepath.Join(tmp, "out")
			if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, out), parquet.Config{From: 1, To: 20, SegmentBlocks: 100, Version: "test"}); err != nil {
				t.Fatal(err)
			}
			db := duck(t)
			for _, tb := range c.dec.Tables() {
				rows, err := db.Query("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet('" + glob(out, tb.Name) + "'))")
				if err != nil {
					t.Fatal(err)
				}
				i := 0
				for rows.Next() {
					var name, typ string
					if err := rows.Scan(&name, &typ); err != nil {
						t.Fatal(err)
					}
					if i >= len(tb.Columns) {
						t.Fatalf("%s: DuckDB reads an extra column %s", tb.Name, name)
					}
					col := tb.Columns[i]
					if name != col.Name || typ != want[col.Type] {
						t.Errorf("%s column %d: DuckDB reads %s %s, want %s %s (PostgreSQL %s)", tb.Name, i, name, typ, col.Name, want[col.Type], col.Type)
					}
					i++
				}
				rows.Close()
				if i != len(tb.Columns) {
					t.Errorf("%s: DuckDB reads %d columns, the table has %d", tb.Name, i, len(tb.Columns))
				}
			}
		})
	}
}
