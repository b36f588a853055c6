package faults

import (
	"context"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// TestDigestIsOrderFreeAndSeesOneChangedValue checks the suite's own
// yardstick: rows inserted in another order digest the same, one changed
// value or a missing index does not, and bookkeeping timestamps are ignored.
func TestDigestIsOrderFreeAndSeesOneChangedValue(t *testing.T) {
	ctx := context.Background()
	fill := func(order string) string {
		dsn := pgtest.NewDatabase(t)
		c := pgtest.ConnectTo(t, dsn)
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `CREATE SCHEMA s;
CREATE TABLE s.blocks (height bigint PRIMARY KEY, hash bytea);
CREATE INDEX blocks_hash_idx ON s.blocks (hash);
CREATE TABLE s.blockhaul_checkpoints (stream text, height bigint, updated_at timestamptz DEFAULT clock_timestamp());
INSERT INTO s.blockhaul_checkpoints (stream, height) VALUES ('head', 3);
INSERT INTO s.blocks SELECT h, sha256(h::text::bytea) FROM generate_series(1, 3) h ORDER BY h `+order); err != nil {
			t.Fatal(err)
		}
		return dsn
	}
	a, b := fill("ASC"), fill("DESC")
	da, db := digest(t, a, "s"), digest(t, b, "s")
	if d := diffDigests(da, db, nil); len(d) > 0 {
		t.Fatalf("same rows in another order differ: %v", d)
	}
	c := pgtest.ConnectTo(t, b)
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `UPDATE s.blocks SET hash = '\x00' WHERE height = 2`); err != nil {
		t.Fatal(err)
	}
	if d := diffDigests(da, digest(t, b, "s"), nil); len(d) != 1 {
		t.Fatalf("one changed value: %d tables differ: %v", len(d), d)
	}
	if _, err := c.Exec(ctx, `UPDATE s.blocks SET hash = sha256('2'::bytea) WHERE height = 2; DROP INDEX s.blocks_hash_idx`); err != nil {
		t.Fatal(err)
	}
	if d := diffDigests(da, digest(t, b, "s"), nil); len(d) != 1 || d[0][:10] != "(indexes):" {
		t.Fatalf("a dropped index: %v", d)
	}
	if n := wrongRows(t, b, a, "s", []string{"blocks"}); n != 0 {
		t.Fatalf("wrongRows: %d rows of b not in a", n)
	}
}
