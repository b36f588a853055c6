package export_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// The exporter's own binary COPY writes, for every table and value of both
// chain families, the very rows that pgx's CopyFrom writes.
func TestCopyWritesWhatPgxWrites(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	for _, fam := range []struct {
		name string
		dec  export.Decoder
		src  interface {
			Fetch(context.Context, uint64, uint64) ([]chain.Block, error)
		}
	}{
		{"cometbft", cometbft.NewDecoder(), cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 4, TxPerBlock: 20})},
		{"evm", evm.NewDecoder(), evmsynth.NewSynthetic(evmsynth.SyntheticConfig{Seed: 4, TxPerBlock: 40, LogsPerBlock: 100})},
	} {
		t.Run(fam.name, func(t *testing.T) {
			blocks, err := fam.src.Fetch(ctx, 1, 60)
			if err != nil {
				t.Fatal(err)
			}
			tables := fam.dec.Tables()
			rows := chain.NewRows(tables)
			for _, b := range blocks {
				if err := fam.dec.Decode(b.Height, b.Raw, rows); err != nil {
					t.Fatal(err)
				}
			}
			orderBy := map[string]string{}
			for _, tb := range tables {
				orderBy[tb.Name] = strings.Join(tb.PrimaryKey, ", ")
			}
			// pgx's CopyFrom into one schema, the exporter's COPY into another.
			viaPgx, viaExport := fam.name+"_pgx", fam.name+"_export"
			for _, s := range []string{viaPgx, viaExport} {
				if err := export.EnsureSchema(ctx, conn, s, tables, false, nil); err != nil {
					t.Fatal(err)
				}
			}
			for i, tb := range tables {
				if _, err := conn.CopyFrom(ctx, pgx.Identifier{viaPgx, tb.Name}, tb.ColumnNames(), pgx.CopyFromRows(rows.Table(i))); err != nil {
					t.Fatalf("pgx copy %s: %v", tb.Name, err)
				}
			}
			n, err := export.CopyRows(ctx, conn, viaExport, tables, rows)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(rows.Total()) || n == 0 {
				t.Fatalf("copied %d rows, decoded %d", n, rows.Total())
			}
			want, got := pgtest.Fingerprint(t, dsn, viaPgx, orderBy), pgtest.Fingerprint(t, dsn, viaExport, orderBy)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("tables differ:\n exporter %v\n pgx      %v", got, want)
			}
		})
	}
}

// A value the column's type cannot take fails the COPY with an error that
// names the table, the column and the value's type, and nothing is written.
func TestCopyRefusesAValueOfTheWrongType(t *testing.T) {
	ctx := context.Background()
	tables := []chain.Table{{
		Name:       "items",
		Columns:    []chain.Column{{Name: "height", Type: "bigint"}, {Name: "at", Type: "timestamptz"}, {Name: "note", Type: "text", Null: true}},
		PrimaryKey: []string{"height"},
	}}
	conn := schemaOf(t, tables)
	rows := chain.NewRows(tables)
	for h := range int64(3) {
		r := rows.Row(0)
		r[0], r[1], r[2] = h, time.Unix(1700000000+h, 0), nil
	}
	rows.Table(0)[2][1] = struct{ x int }{7}
	_, err := export.CopyRows(ctx, conn, "s", tables, rows)
	if err == nil || !strings.Contains(err.Error(), "table items column at (timestamptz): cannot encode struct") {
		t.Fatalf("err = %v, want one naming table items, column at and the value's type", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM s.items").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows after a failed COPY (%v), want 0", n, err)
	}
	// The connection is usable afterwards.
	rows.Table(0)[2][1] = time.Unix(1700000002, 0)
	if n, err := export.CopyRows(ctx, conn, "s", tables, rows); err != nil || n != 3 {
		t.Fatalf("copy after the failure: %d rows, %v", n, errors.Unwrap(err))
	}
}

// Integers written into numeric columns read back as the same numbers, at
// every digit boundary and both ends of int64.
func TestCopyNumericFromIntegers(t *testing.T) {
	ctx := context.Background()
	tables := []chain.Table{{
		Name:       "nums",
		Columns:    []chain.Column{{Name: "i", Type: "integer"}, {Name: "v", Type: "numeric"}},
		PrimaryKey: []string{"i"},
	}}
	conn := schemaOf(t, tables)
	vals := []int64{0, 1, 7, 9999, 10000, 10001, 12340000, 100000000, 123456789012, 1e18, math.MaxInt64, -1, -10000, -99990000, math.MinInt64 + 1, math.MinInt64}
	rows := chain.NewRows(tables)
	for i, v := range vals {
		r := rows.Row(0)
		r[0], r[1] = int32(i), v
	}
	if _, err := export.CopyRows(ctx, conn, "s", tables, rows); err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		var got string
		var eq bool
		if err := conn.QueryRow(ctx, "SELECT v::text, v = $2::numeric FROM s.nums WHERE i = $1", i, strconv.FormatInt(v, 10)).Scan(&got, &eq); err != nil {
			t.Fatal(err)
		}
		if got != strconv.FormatInt(v, 10) || !eq {
			t.Errorf("numeric from %d reads back as %s", v, got)
		}
	}
}

// schemaOf connects to a fresh database holding tables in schema "s".
func schemaOf(t *testing.T, tables []chain.Table) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.Connect(t)
	if err := export.EnsureSchema(ctx, conn, "s", tables, false, nil); err != nil {
		t.Fatal(err)
	}
	return conn
}
