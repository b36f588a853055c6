package archive

import (
	"context"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// A table without a primary key, so that duplicates can exist.
var plainTable = chain.Table{Name: "t", HeightColumn: "h", Columns: []chain.Column{{Name: "h", Type: "bigint"}, {Name: "v", Type: "text"}}}

func digestOf(t *testing.T, conn *pgx.Conn, schema string) Digest {
	t.Helper()
	d, err := Checksum(context.Background(), conn, ChecksumConfig{Schema: schema, Tables: []chain.Table{plainTable}, Chunk: 10})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestChecksumOrderIndependentAndExact: the same rows inserted in another
// order digest equal; a duplicated row, and two cells swapped between rows
// (which per-column sums would miss), do not.
func TestChecksumOrderIndependentAndExact(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range []string{
		"CREATE SCHEMA a", "CREATE SCHEMA b",
		"CREATE TABLE a.t (h bigint, v text)", "CREATE TABLE b.t (h bigint, v text)",
		"INSERT INTO a.t SELECT g, 'v' || g FROM generate_series(1, 25) g",
		"INSERT INTO b.t SELECT g, 'v' || g FROM generate_series(25, 1, -1) g",
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	a := digestOf(t, conn, "a")
	if d, _ := Compare(a, digestOf(t, conn, "b")); len(d) != 0 {
		t.Fatalf("same rows in another order differ: %+v", d)
	}
	if got := len(a.Tables[0].Chunks); got != 3 || a.Tables[0].Rows != 25 {
		t.Fatalf("chunks %d rows %d, want 3 and 25", got, a.Tables[0].Rows)
	}
	exec := func(s string) {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	exec("INSERT INTO b.t VALUES (12, 'v12')") // a duplicate
	d, _ := Compare(a, digestOf(t, conn, "b"))
	if len(d) != 1 || d[0].From != 10 || d[0].To != 19 || d[0].RowDelta != 1 {
		t.Fatalf("duplicate: %+v", d)
	}
	exec("DELETE FROM b.t WHERE ctid = (SELECT ctid FROM b.t WHERE h = 12 LIMIT 1)")
	exec("UPDATE b.t SET v = CASE h WHEN 21 THEN 'v22' ELSE 'v21' END WHERE h IN (21, 22)") // swap two cells
	d, _ = Compare(a, digestOf(t, conn, "b"))
	if len(d) != 1 || d[0].From != 20 || d[0].To != 29 || d[0].RowDelta != 0 {
		t.Fatalf("swapped cells: %+v", d)
	}
}

func TestCompareTable(t *testing.T) {
	c := func(from, to uint64, rows int64, sum string) ChunkDigest {
		return ChunkDigest{From: from, To: to, Rows: rows, Sum: sum}
	}
	a := Digest{Chunk: 10, Tables: []TableDigest{{Table: "x", Chunks: []ChunkDigest{c(0, 9, 5, "1"), c(10, 19, 5, "2"), c(20, 29, 1, "3")}}}}
	b := Digest{Chunk: 10, Tables: []TableDigest{{Table: "x", Chunks: []ChunkDigest{c(10, 19, 5, "9"), c(20, 29, 2, "3"), c(30, 39, 1, "4")}}}}
	d, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		from  uint64
		delta int64
	}{{0, -5}, {10, 0}, {20, 1}, {30, 1}}
	if len(d) != len(want) {
		t.Fatalf("%+v", d)
	}
	for i, w := range want {
		if d[i].From != w.from || d[i].RowDelta != w.delta {
			t.Errorf("difference %d: %+v, want from %d delta %d", i, d[i], w.from, w.delta)
		}
	}
	if _, err := Compare(a, Digest{Chunk: 20}); err == nil {
		t.Fatal("digests of different chunk sizes compared")
	}
}
