//go:build cgo

package parquet_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/export/parquet"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Every table of a synthetic CometBFT and EVM range, read back by DuckDB
// from the files and loaded into PostgreSQL, has the digest (archive's
// checksum: row count and the sum of PostgreSQL's typed row hashes, chunk
// by chunk) of the same range exported into PostgreSQL by export.
func TestDuckDBReadsWhatExportWrites(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	for _, c := range []synthChain{cometChain(), evmChain()} {
		t.Run(c.name, func(t *testing.T) {
			const from, to = 1, 450
			tmp := t.TempDir()
			store := stage(t, filepath.Join(tmp, "staging"), c, from, to)
			defer store.Close()
			out := filepath.Join(tmp, "out")
			if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, out), parquet.Config{From: from, To: to, SegmentBlocks: 200, Version: "test"}); err != nil {
				t.Fatal(err)
			}
			exported, loaded := c.name+"_export", c.name+"_duckdb"
			if _, err := export.Run(ctx, export.Fixed(conn), store, c.dec, export.Config{Schema: exported,
				Stream: export.Stream{Alias: "all", From: from, To: to}}); err != nil {
				t.Fatal(err)
			}
			tables := c.dec.Tables()
			if err := export.EnsureSchema(ctx, conn, loaded, tables, true, nil); err != nil {
				t.Fatal(err)
			}
			db := duck(t)
			for _, tb := range tables {
				rows := duckRows(t, db, glob(out, tb.Name), tb)
				if len(rows) == 0 {
					t.Fatalf("%s: DuckDB read no rows", tb.Name)
				}
				if _, err := conn.CopyFrom(ctx, pgx.Identifier{loaded, tb.Name}, tb.ColumnNames(), pgx.CopyFromRows(rows)); err != nil {
					t.Fatalf("load %s: %v", tb.Name, err)
				}
			}
			want := digest(t, conn, exported, tables)
			got := digest(t, conn, loaded, tables)
			for i := range want {
				if want[i].Rows == 0 {
					t.Errorf("%s: export wrote no rows", want[i].Table)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("tables differ:\n files  %+v\n export %+v", got, want)
			}
		})
	}
}

func digest(t *testing.T, conn *pgx.Conn, schema string, tables []chain.Table) []archive.TableDigest {
	t.Helper()
	d, err := archive.Checksum(context.Background(), conn, archive.ChecksumConfig{Schema: schema, Tables: tables})
	if err != nil {
		t.Fatal(err)
	}
	return d.Tables
}

// duckRows reads every row of table tb from the files matching pattern,
// as DuckDB gives them, in the Go types pgx writes into tb's columns.
func duckRows(t *testing.T, db *sql.DB, pattern string, tb chain.Table) [][]any {
	t.Helper()
	sel := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		sel[i] = chain.QuoteIdent(c.Name)
		if c.Type == "jsonb" {
			sel[i] += "::VARCHAR"
		}
	}
	q := fmt.Sprintf("SELECT %s FROM read_parquet('%s')", strings.Join(sel, ", "), pattern)
	rs, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rs.Close()
	var out [][]any
	for rs.Next() {
		vals := make([]any, len(tb.Columns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, c := range tb.Columns {
			vals[i] = pgValue(t, c, vals[i])
		}
		out = append(out, vals)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pgValue turns a value DuckDB read into one pgx writes into column c.
func pgValue(t *testing.T, c chain.Column, v any) any {
	if v == nil {
		return nil
	}
	switch c.Type {
	case "numeric":
		var n pgtype.Numeric
		if err := n.Scan(v.(string)); err != nil {
			t.Fatalf("column %s: %v", c.Name, err)
		}
		return n
	case "bytea[]":
		l := v.([]any)
		out := make([][]byte, len(l))
		for i, e := range l {
			if e != nil {
				out[i] = e.([]byte)
			}
		}
		return out
	case "text[]":
		l := v.([]any)
		out := make([]*string, len(l))
		for i, e := range l {
			if e != nil {
				s := e.(string)
				out[i] = &s
			}
		}
		return out
	}
	return v
}

// duck opens an in-memory DuckDB.
func duck(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}
