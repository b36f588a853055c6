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

// testConn connects to a fresh database and returns it with an exec that
// fails the test on an error.
func testConn(t *testing.T) (*pgx.Conn, func(string)) {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.Connect(t)
	return conn, func(s string) {
		t.Helper()
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

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
	conn, exec := testConn(t)
	for _, s := range []string{
		"CREATE SCHEMA a", "CREATE SCHEMA b",
		"CREATE TABLE a.t (h bigint, v text)", "CREATE TABLE b.t (h bigint, v text)",
		"INSERT INTO a.t SELECT g, 'v' || g FROM generate_series(1, 25) g",
		"INSERT INTO b.t SELECT g, 'v' || g FROM generate_series(25, 1, -1) g",
	} {
		exec(s)
	}
	a := digestOf(t, conn, "a")
	if d, _ := Compare(a, digestOf(t, conn, "b")); len(d) != 0 {
		t.Fatalf("same rows in another order differ: %+v", d)
	}
	if got := len(a.Tables[0].Chunks); got != 3 || a.Tables[0].Rows != 25 {
		t.Fatalf("chunks %d rows %d, want 3 and 25", got, a.Tables[0].Rows)
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

// A table whose row hash chains some columns (bigint, integer, text, never
// NULL) from a record of the others (bytea, jsonb, a nullable integer).
var mixedTable = chain.Table{Name: "m", HeightColumn: "h", Columns: []chain.Column{
	{Name: "h", Type: "bigint"}, {Name: "b", Type: "bytea"}, {Name: "k", Type: "integer"},
	{Name: "j", Type: "jsonb"}, {Name: "n", Type: "integer", Null: true}, {Name: "s", Type: "text"},
}}

// TestChecksumChainedRowHash: cells of the record part swapped between rows
// that agree in every chained column, a NULL against a value, and a NULL in
// a column the decoder declares never NULL (a table blockhaul did not make)
// each change the chunk's digest; the same rows in another column order
// (a table brought up to date in place) do not.
func TestChecksumChainedRowHash(t *testing.T) {
	conn, exec := testConn(t)
	digest := func(schema string) Digest {
		t.Helper()
		d, err := Checksum(context.Background(), conn, ChecksumConfig{Schema: schema, Tables: []chain.Table{mixedTable}, Chunk: 10})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	rows := `SELECT g, ('\x' || lpad(to_hex(g), 2, '0'))::bytea, 1, CASE WHEN g % 2 = 0 THEN '[]' ELSE '[true]' END::jsonb, NULLIF(g % 3, 0), 's' FROM generate_series(1, 25) g`
	exec("CREATE SCHEMA a")
	exec("CREATE SCHEMA b")
	exec("CREATE TABLE a.m (h bigint, b bytea, k integer, j jsonb, n integer, s text)")
	// b's columns in another order: the digest reads the decoder's.
	exec("CREATE TABLE b.m (s text, n integer, h bigint, j jsonb, k integer, b bytea)")
	exec("INSERT INTO a.m " + rows)
	exec("INSERT INTO b.m (h, b, k, j, n, s) " + rows)
	a := digest("a")
	same := func(what string, wantFrom uint64, equal bool) {
		t.Helper()
		d, err := Compare(a, digest("b"))
		if err != nil {
			t.Fatal(err)
		}
		if equal {
			if len(d) != 0 {
				t.Fatalf("%s: %+v", what, d)
			}
			return
		}
		if len(d) != 1 || d[0].From != wantFrom || d[0].RowDelta != 0 {
			t.Fatalf("%s: %+v, want one difference at %d", what, d, wantFrom)
		}
	}
	same("same rows, other column order", 0, true)
	// Rows 12 and 13 agree in h's chunk, k and s; swap their jsonb ('[]' and
	// '[true]' hash alike under any seed) and, separately, their bytea.
	exec(`UPDATE b.m SET j = CASE h WHEN 12 THEN '[true]' ELSE '[]' END::jsonb WHERE h IN (12, 13)`)
	same("jsonb swapped", 10, false)
	exec(`UPDATE b.m SET j = CASE h WHEN 12 THEN '[]' ELSE '[true]' END::jsonb WHERE h IN (12, 13)`)
	same("jsonb swapped back", 0, true)
	exec(`UPDATE b.m SET b = CASE h WHEN 12 THEN '\x0d' ELSE '\x0c' END::bytea WHERE h IN (12, 13)`)
	same("bytea swapped", 10, false)
	exec(`UPDATE b.m SET b = CASE h WHEN 12 THEN '\x0c' ELSE '\x0d' END::bytea WHERE h IN (12, 13)`)
	exec(`UPDATE b.m SET n = NULL WHERE h = 22`) // 22 % 3 = 1
	same("NULL against a value", 20, false)
	exec(`UPDATE b.m SET n = 1 WHERE h = 22`)
	same("value restored", 0, true)
	exec(`UPDATE a.m SET s = NULL WHERE h = 5`)
	a = digest("a")
	same("NULL in a never-NULL column against a value", 0, false)
	exec(`UPDATE b.m SET s = NULL WHERE h = 5`)
	same("NULL in a never-NULL column on both sides", 0, true)
	exec(`UPDATE b.m SET s = NULL, k = NULL WHERE h = 5`)
	same("two NULLs against one", 0, false)
}
