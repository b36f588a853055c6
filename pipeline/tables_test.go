package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// columnPrints returns, per table of tables that exists in schema, its row
// count and an md5 over its rows with the decoder's columns in the
// decoder's order, so that a table whose columns were added later (in
// another physical order) compares equal to a fresh one holding the same
// values.
func columnPrints(t *testing.T, dsn, schema string, tables []chain.Table) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	out := map[string]string{}
	for _, tb := range tables {
		qt := chain.QuoteIdent(schema) + "." + chain.QuoteIdent(tb.Name)
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qt).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if !exists {
			continue
		}
		cols := make([]string, len(tb.Columns))
		for i, c := range tb.Columns {
			cols[i] = "t." + chain.QuoteIdent(c.Name)
		}
		pk := make([]string, len(tb.PrimaryKey))
		for i, c := range tb.PrimaryKey {
			pk[i] = chain.QuoteIdent(c)
		}
		var n int64
		var sum *string
		q := fmt.Sprintf("SELECT count(*), md5(string_agg(md5(ROW(%s)::text), '' ORDER BY %s)) FROM %s t", strings.Join(cols, ", "), strings.Join(pk, ", "), qt)
		if err := conn.QueryRow(ctx, q).Scan(&n, &sum); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		s := "<empty>"
		if sum != nil {
			s = *sum
		}
		out[tb.Name] = fmt.Sprintf("%d rows %s", n, s)
	}
	return out
}

func familyTablesOf(t *testing.T, chainName string) []chain.Table {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Chain = chainName
	dec, err := bareJob(cfg).decoder()
	if err != nil {
		t.Fatal(err)
	}
	return dec.Tables()
}

// TestTablesChoosesWhatIsWritten: an export with --tables=-events writes
// every table but events, each equal to a full export's, and does not
// create events; an explicit list writes just those.
func TestTablesChoosesWhatIsWritten(t *testing.T) {
	all := familyTablesOf(t, "cometbft")
	stg := filepath.Join(t.TempDir(), "s")
	src := newCounting(300)
	full := pgtest.NewDatabase(t)
	mustRunWith(t, testConfig(CmdRun, full, stg, nil, 1, 300), src)
	want := columnPrints(t, full, "cometbft", all)
	if len(want) != len(all) {
		t.Fatalf("the full export holds %d of the %d tables", len(want), len(all))
	}
	for _, c := range []struct {
		spec string
		want []string
	}{
		{"-events", nil},
		{"blocks,transactions", []string{"blocks", "transactions"}},
	} {
		t.Run(c.spec, func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			cfg := testConfig(CmdExport, dsn, stg, nil, 1, 300)
			cfg.Tables = c.spec
			sum, err := runWith(t, cfg, src)
			if err != nil || !sum.Complete {
				t.Fatalf("export --tables=%s: %v (complete %v)", c.spec, err, sum.Complete)
			}
			got := columnPrints(t, dsn, "cometbft", all)
			wantTables := c.want
			if wantTables == nil {
				for _, tb := range all {
					if tb.Name != "events" {
						wantTables = append(wantTables, tb.Name)
					}
				}
			}
			if len(got) != len(wantTables) {
				t.Errorf("tables written: %v, want %v", slices.Collect(maps.Keys(got)), wantTables)
			}
			for _, name := range wantTables {
				if got[name] != want[name] {
					t.Errorf("%s: %s, want %s (the full export's)", name, got[name], want[name])
				}
			}
			if _, ok := sum.Export.Rows["events"]; ok && c.spec == "-events" {
				t.Errorf("the summary counts events rows: %v", sum.Export.Rows)
			}
		})
	}
}

// TestTablesRefusedNamingTheValidOnes: an unknown table, a list that mixes
// both forms or leaves nothing, and --tables on a command that writes no
// table are configuration errors naming the flag (and
// for a name, the valid ones).
func TestTablesRefusedNamingTheValidOnes(t *testing.T) {
	var none []string
	for _, tb := range familyTablesOf(t, "cometbft") {
		none = append(none, "-"+tb.Name)
	}
	for _, c := range []struct {
		cmd, tables string
		want        []string
	}{
		{CmdExport, "blocks,logz", []string{"--tables", `unknown table "logz"`, "blocks, transactions, events"}},
		{CmdRun, "blocks,-events", []string{"--tables", "either name the tables"}},
		{CmdFollow, strings.Join(none, ","), []string{"--tables", "leaves no table"}},
		{CmdStatus, "blocks", []string{"--tables", "status does not write tables"}},
	} {
		cfg := testConfig(c.cmd, "postgres://127.0.0.1/x", "s", nil, 1, 10)
		cfg.Tables = c.tables
		wantConfigError(t, cfg, fmt.Sprintf("%s --tables=%q", c.cmd, c.tables), c.want)
	}
}

// wantConfigError fails unless cfg, with its defaults, is refused by
// Validate with a configuration error that says each of want; what names
// the case in a failure.
func wantConfigError(t *testing.T, cfg Config, what string, want []string) {
	t.Helper()
	cfg.EnsureDefaults()
	err := cfg.Validate()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("%s: got %v, want a configuration error", what, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}

// TestReplayRefusedOutsideExport: --replay belongs to export alone, names
// known tables, and replaces --tables and --export-streams.
func TestReplayRefusedOutsideExport(t *testing.T) {
	for _, c := range []struct {
		cmd, tables string
		replay      []string
		streams     int
		want        []string
	}{
		{CmdRun, "", []string{"events"}, 1, []string{"--replay", "only export replays"}},
		{CmdExport, "", []string{"eventz"}, 1, []string{"--replay", `unknown table "eventz"`, "blocks, transactions, events"}},
		{CmdExport, "blocks", []string{"events"}, 1, []string{"--replay", "leave out --tables"}},
		{CmdExport, "", []string{"events"}, 2, []string{"--export-streams", "a replay is one stream"}},
	} {
		cfg := testConfig(c.cmd, "postgres://127.0.0.1/x", "s", nil, 1, 10)
		cfg.Tables, cfg.Replay, cfg.ExportStreams = c.tables, c.replay, c.streams
		wantConfigError(t, cfg, fmt.Sprintf("%s --replay=%v", c.cmd, c.replay), c.want)
	}
	cfg := testConfig(CmdExport, "postgres://127.0.0.1/x", "s", nil, 1, 10)
	cfg.Replay = []string{"events", "transactions"}
	j, err := Resolve(cfg)
	if err != nil || strings.Join(j.Decoding.Tables, ",") != "transactions,events" {
		t.Errorf("export --replay events,transactions: %v, selected %v", err, j.Decoding.Tables)
	}
}
