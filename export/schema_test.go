package export

import (
	"errors"
	"strings"
	"testing"
)

// TestEnsureSchemaRefusesTableOfAnotherShape: a table of the decoder's name
// that holds other columns is refused before anything is created, naming
// the table and each difference; one of the same shape, or with extra
// nullable columns, is used as it is.
func TestEnsureSchemaRefusesTableOfAnotherShape(t *testing.T) {
	tables := testDecoder{}.Tables()
	for _, c := range []struct {
		name  string
		ddl   string // the table already there, in schema "chain x"
		diffs []string
	}{
		{"another tool's blocks", `CREATE TABLE "chain x".blocks (height bigint PRIMARY KEY, block_hash text)`,
			[]string{`missing column "hash" bytea`}},
		{"other type", `CREATE TABLE "chain x".blocks (height integer PRIMARY KEY, hash bytea NOT NULL)`,
			[]string{`column "height" is integer, not bigint`}},
		{"other key", `CREATE TABLE "chain x".items (height bigint, idx int, note text, PRIMARY KEY (height))`,
			[]string{"primary key (height), not (height, idx)"}},
		{"required extra", `CREATE TABLE "chain x".items (height bigint, idx int, note text, chain text NOT NULL, PRIMARY KEY (height, idx))`,
			[]string{`extra column "chain" text is NOT NULL without a default`}},
		{"same shape", `CREATE TABLE "chain x".blocks (height bigint NOT NULL, hash bytea NOT NULL, PRIMARY KEY (height))`, nil},
		{"extra nullable", `CREATE TABLE "chain x".blocks (hash bytea NOT NULL, note text, height bigint NOT NULL, done bool NOT NULL DEFAULT false, PRIMARY KEY (height))`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if _, err := e.conn.Exec(e.ctx, `CREATE SCHEMA "chain x"; `+c.ddl); err != nil {
				t.Fatal(err)
			}
			err := EnsureSchema(e.ctx, e.conn, "chain x", tables, false, nil)
			if c.diffs == nil {
				if err != nil {
					t.Fatalf("EnsureSchema: %v", err)
				}
				if n := e.count(`SELECT count(*) FROM pg_tables WHERE schemaname = 'chain x' AND tablename IN ('blocks', 'items', 'blockhaul_checkpoints')`); n != 3 {
					t.Errorf("%d of blocks, items, blockhaul_checkpoints, want 3", n)
				}
				return
			}
			var se *ShapeError
			if !errors.As(err, &se) || se.Schema != "chain x" || !strings.Contains(err.Error(), "chain x."+se.Table) {
				t.Fatalf("EnsureSchema = %v, want a *ShapeError naming the table", err)
			}
			for _, d := range c.diffs {
				if !strings.Contains(err.Error(), d) {
					t.Errorf("error %q does not say %q", err, d)
				}
			}
			// Nothing created: the one table that was there is all there is.
			if n := e.count(`SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'chain x' AND c.relkind IN ('r', 'i')`); n != 2 {
				t.Errorf("%d relations in the schema after the refusal, want 2 (the table and its key)", n)
			}
		})
	}
}
