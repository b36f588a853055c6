package export

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/evm"
)

// familyTables are the export tables of each family as this blockhaul
// defines them.
func familyTables() map[string][]chain.Table {
	return map[string][]chain.Table{
		"cometbft": cometbft.NewDecoder().Tables(),
		"evm":      evm.Tables(),
	}
}

// columnsOf returns the columns of schema.table as name → is nullable.
func (e *env) columnsOf(schema, table string) map[string]bool {
	e.t.Helper()
	rows, err := e.conn.Query(e.ctx, `SELECT column_name, is_nullable = 'YES' FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`, schema, table)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		var null bool
		if err := rows.Scan(&name, &null); err != nil {
			e.t.Fatal(err)
		}
		out[name] = null
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) versionOf(schema, table string) int {
	e.t.Helper()
	var v int32
	if err := e.conn.QueryRow(e.ctx, `SELECT version FROM `+chain.QuoteIdent(schema)+`.blockhaul_schema_versions WHERE table_name = $1`, table).Scan(&v); err != nil {
		e.t.Fatalf("version of %s.%s: %v", schema, table, err)
	}
	return int(v)
}

// TestUpgradeFromFirstRelease: the tables of each family exactly as the
// first release created them (testdata/v1, which predates recorded
// versions), holding a row, are brought up to date in place: every column
// added since is added, nullable, the row kept with NULL there; new tables
// are created; each table's version is recorded; and the log names what
// was added. A column added to a family's table without a Since would be
// refused here as a foreign shape.
func TestUpgradeFromFirstRelease(t *testing.T) {
	for fam, tables := range familyTables() {
		t.Run(fam, func(t *testing.T) {
			e := newEnv(t)
			ddl, err := os.ReadFile("testdata/v1/" + fam + ".sql")
			if err != nil {
				t.Fatal(err)
			}
			before := map[string]map[string]bool{}
			if _, err := e.conn.Exec(e.ctx, "CREATE SCHEMA old; "+strings.ReplaceAll(string(ddl), "{{schema}}", "old")); err != nil {
				t.Fatal(err)
			}
			for _, tb := range tables {
				before[tb.Name] = e.columnsOf("old", tb.Name)
			}
			// One row in the first table, to show the upgrade keeps rows.
			blocks := tables[0]
			if _, err := e.conn.Exec(e.ctx, `INSERT INTO old.blocks SELECT * FROM json_populate_record(NULL::old.blocks, $1)`, v1BlockRow(fam)); err != nil {
				t.Fatal(err)
			}
			if err := CheckShapes(e.ctx, e.conn, "old", tables); err != nil {
				t.Fatalf("CheckShapes of the first release's tables: %v", err)
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			if err := EnsureSchema(e.ctx, e.conn, "old", tables, false, log); err != nil {
				t.Fatalf("EnsureSchema over the first release's tables: %v", err)
			}
			added := 0
			for _, tb := range tables {
				after := e.columnsOf("old", tb.Name)
				for _, c := range tb.Columns {
					null, ok := after[c.Name]
					if !ok {
						t.Errorf("%s.%s was not added", tb.Name, c.Name)
						continue
					}
					if len(before[tb.Name]) > 0 {
						if _, had := before[tb.Name][c.Name]; !had {
							added++
							if !null {
								t.Errorf("added column %s.%s is NOT NULL; the rows already there have no value", tb.Name, c.Name)
							}
							if !strings.Contains(logs.String(), "table="+tb.Name) || !strings.Contains(logs.String(), c.Name) {
								t.Errorf("the log does not name %s.%s as added:\n%s", tb.Name, c.Name, logs.String())
							}
						}
					}
				}
				if v := e.versionOf("old", tb.Name); v != tb.Version() {
					t.Errorf("%s recorded at version %d, want %d", tb.Name, v, tb.Version())
				}
			}
			if added == 0 {
				t.Fatal("nothing was added to the first release's tables")
			}
			if !strings.Contains(logs.String(), "NULL in the rows already there") {
				t.Errorf("the log does not say the added columns are NULL for the rows there:\n%s", logs.String())
			}
			if n := e.count(`SELECT count(*) FROM old.blocks WHERE ` + chain.QuoteIdent(blocks.HeightColumn) + ` = 7`); n != 1 {
				t.Errorf("%d rows of block 7 after the upgrade, want 1", n)
			}
			// A second run finds nothing to do.
			logs.Reset()
			if err := EnsureSchema(e.ctx, e.conn, "old", tables, false, log); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(logs.String(), "added") {
				t.Errorf("second EnsureSchema logged an upgrade:\n%s", logs.String())
			}
		})
	}
}

// v1BlockRow is a blocks row of the first release's shape, as JSON.
func v1BlockRow(fam string) string {
	h := `"\\x` + strings.Repeat("ab", 32) + `"`
	if fam == "evm" {
		return `{"number":7,"hash":` + h + `,"parent_hash":` + h + `,"timestamp":"2024-01-01T00:00:00Z","miner":` + h + `,"gas_limit":1,"gas_used":1,"transaction_count":0}`
	}
	return `{"height":7,"hash":` + h + `,"time":"2024-01-01T00:00:00Z","chain_id":"c","proposer_address":` + h + `,"num_txs":0,"num_events":0,"app_hash":` + h +
		`,"last_commit_hash":` + h + `,"data_hash":` + h + `,"validators_hash":` + h + `,"next_validators_hash":` + h + `,"consensus_hash":` + h + `,"last_results_hash":` + h + `,"evidence_hash":` + h + `}`
}

// TestUpgradeIntermediateShape: a table holding some of the later columns
// but not all (a build between two versions, no version recorded) gets
// only what it lacks.
func TestUpgradeIntermediateShape(t *testing.T) {
	e := newEnv(t)
	tables := cometbft.NewDecoder().Tables()
	var events chain.Table
	for _, tb := range tables {
		if tb.Name == "events" {
			events = tb
		}
	}
	if _, err := e.conn.Exec(e.ctx, `CREATE SCHEMA mid; CREATE TABLE mid.events (height bigint NOT NULL, block_time timestamptz NOT NULL, event_index integer NOT NULL,
	tx_index integer, source text NOT NULL, type text NOT NULL, attributes jsonb NOT NULL, PRIMARY KEY (height, event_index))`); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if err := EnsureSchema(e.ctx, e.conn, "mid", []chain.Table{events}, false, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	cols := e.columnsOf("mid", "events")
	if null, ok := cols["tx_hash"]; !ok || !null {
		t.Errorf("tx_hash after the upgrade: present %v, nullable %v", ok, null)
	}
	if !strings.Contains(logs.String(), "added=tx_hash") {
		t.Errorf("log does not name exactly tx_hash as added:\n%s", logs.String())
	}
	if v := e.versionOf("mid", "events"); v != events.Version() {
		t.Errorf("events at version %d, want %d", v, events.Version())
	}
}

// TestUpgradeRefusesForeignShapes: what is not an older blockhaul's shape is
// refused before anything changes, naming the table and the difference — a
// column its recorded version has, missing (dropped by hand); a version
// newer than this blockhaul's; a column of the first shape missing from a
// table without a recorded version.
func TestUpgradeRefusesForeignShapes(t *testing.T) {
	events := chain.Table{Name: "events", HeightColumn: "height", PrimaryKey: []string{"height", "idx"}, Columns: []chain.Column{
		{Name: "height", Type: "bigint"}, {Name: "idx", Type: "integer"},
		{Name: "kind", Type: "text", Since: 2}, {Name: "tx_hash", Type: "bytea", Null: true, Since: 3},
	}}
	for _, c := range []struct {
		name, ddl, diff string
	}{
		{"dropped by hand", `CREATE TABLE s.events (height bigint, idx integer, tx_hash bytea, PRIMARY KEY (height, idx));
			CREATE TABLE s.blockhaul_schema_versions (table_name text PRIMARY KEY, version integer NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
			INSERT INTO s.blockhaul_schema_versions VALUES ('events', 3)`,
			`missing column "kind" text (which its recorded schema version 3 has)`},
		{"newer", `CREATE TABLE s.events (height bigint, idx integer, kind text, tx_hash bytea, PRIMARY KEY (height, idx));
			CREATE TABLE s.blockhaul_schema_versions (table_name text PRIMARY KEY, version integer NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
			INSERT INTO s.blockhaul_schema_versions VALUES ('events', 4)`,
			"schema version 4, newer than this blockhaul's 3"},
		{"first shape incomplete", `CREATE TABLE s.events (height bigint, kind text, PRIMARY KEY (height))`,
			`missing column "idx" integer`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if _, err := e.conn.Exec(e.ctx, "CREATE SCHEMA s; "+c.ddl); err != nil {
				t.Fatal(err)
			}
			before := e.columnsOf("s", "events")
			for _, check := range []func() error{
				func() error { return CheckShapes(e.ctx, e.conn, "s", []chain.Table{events}) },
				func() error { return EnsureSchema(e.ctx, e.conn, "s", []chain.Table{events}, false, nil) },
			} {
				err := check()
				var se *ShapeError
				if !errors.As(err, &se) || se.Table != "events" || !strings.Contains(err.Error(), "s.events") || !strings.Contains(err.Error(), c.diff) {
					t.Fatalf("got %v, want a *ShapeError naming s.events and %q", err, c.diff)
				}
			}
			after := e.columnsOf("s", "events")
			if len(after) != len(before) {
				t.Errorf("columns %v after the refusal, were %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
			}
		})
	}
}
