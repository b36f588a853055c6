package pipeline

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// --indexes decides which secondary indexes exist once a fill completes,
// whether it deferred them (empty tables) or kept them (never).
func TestIndexesFlagChoosesTheSet(t *testing.T) {
	for _, tc := range []struct {
		set  string
		mode IndexMode
		want []string
	}{
		{"default", IndexesAuto, allCometBFTIndexes()},
		{"minimal", IndexesAuto, []string{"blocks_hash_idx", "transactions_hash_idx"}},
		{"minimal", IndexesNever, []string{"blocks_hash_idx", "transactions_hash_idx"}},
		{"none", IndexesAuto, nil},
		{"events_type_idx,transactions_hash_idx", IndexesNever, []string{"events_type_idx", "transactions_hash_idx"}},
	} {
		t.Run(tc.set+"/"+string(tc.mode), func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 120)
			cfg.DeferIndexes = tc.mode
			if err := cfg.Indexes.Set(tc.set); err != nil {
				t.Fatal(err)
			}
			if _, err := runWith(t, cfg, newCounting(1000)); err != nil {
				t.Fatal(err)
			}
			if got := secondaryIndexes(t, dsn, "cometbft"); !slices.Equal(got, tc.want) {
				t.Fatalf("secondary indexes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIndexesFlagRefusesUnknownNames(t *testing.T) {
	cfg := testConfig(CmdRun, "postgres://x@127.0.0.1/x", filepath.Join(t.TempDir(), "s"), nil, 1, 10)
	cfg.Indexes, _ = export.ParseIndexSet("logs_topic1_idx") // an EVM index, asked of cometbft
	cfg.EnsureDefaults()
	err := cfg.Validate()
	if ExitCode(err) != ExitConfig {
		t.Fatalf("got %v (exit %d), want a configuration error", err, ExitCode(err))
	}
}

// secondaryIndexes lists the indexes of schema that are not primary keys,
// by name.
func secondaryIndexes(t *testing.T, dsn, schema string) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND indexname NOT LIKE '%pkey' ORDER BY indexname`, schema)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// allCometBFTIndexes names every secondary index of the CometBFT tables
// (the default set), sorted.
func allCometBFTIndexes() []string {
	var names []string
	for _, t := range cometbft.NewDecoder().Tables() {
		for _, ix := range t.Indexes {
			names = append(names, ix.Name)
		}
	}
	slices.Sort(names)
	return names
}
