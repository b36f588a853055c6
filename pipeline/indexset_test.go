package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/pgtest"
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
			mustRunWith(t, cfg, newCounting(1000))
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
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	return pgtest.SecondaryIndexes(t, conn, schema)
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

// failingSource is a synthetic chain whose fetch fails, not transiently, at
// and above failAt.
type failingSource struct {
	*countingSource
	failAt uint64
}

func (s *failingSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if to >= s.failAt {
		return nil, errors.New("node lost its disk")
	}
	return s.countingSource.Fetch(ctx, from, to)
}

// A fill that fails part way (exit 1, not a signal) rebuilds the indexes
// it dropped before it exits, so that the rows it did export are
// queryable, and says so; the next run completes the range (issue 12: a
// failed export left its indexes dropped).
func TestFailedFillRebuildsItsDroppedIndexes(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	cfg := testConfig(CmdRun, dsn, stg, nil, 1, 400)
	cfg.FetchWorkers = 1
	cfg.Source = &failingSource{countingSource: newCounting(1000), failAt: 250}
	var out bytes.Buffer
	sum, err := Run(context.Background(), cfg, &out, quiet)
	if err == nil || ExitCode(err) != ExitFailed || !strings.Contains(err.Error(), "node lost its disk") {
		t.Fatalf("the failing run: %v (exit %d), want exit 1 naming the source's error", err, ExitCode(err))
	}
	if sum.Export.Blocks == 0 {
		t.Fatal("the run exported nothing before it failed: the test does not reproduce a part-way failure")
	}
	want := cometbftIndexes
	if got := secondaryIndexes(t, dsn, "cometbft"); len(got) != want {
		t.Fatalf("after the failed fill: secondary indexes %v, want all %d", got, want)
	}
	if pending := pendingIndexes(t, dsn); len(pending) != 0 {
		t.Fatalf("after the failed fill: %v still recorded as deferred", pending)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("indexes: %d dropped for the fill, rebuilt after it failed", want)) {
		t.Fatalf("the summary does not say the indexes were rebuilt:\n%s", out.String())
	}
	wantAllIndexesAfter(t, "the next run", cfg, dsn, want)
}

// wantAllIndexesAfter runs cfg again over a source of 1000 blocks and
// checks that the schema then has all want secondary indexes.
func wantAllIndexesAfter(t *testing.T, run string, cfg Config, dsn string, want int) {
	t.Helper()
	cfg.Source = newCounting(1000)
	if _, err := Run(context.Background(), cfg, io.Discard, quiet); err != nil {
		t.Fatalf("%s: %v", run, err)
	}
	if got := secondaryIndexes(t, dsn, "cometbft"); len(got) != want {
		t.Fatalf("after %s: secondary indexes %v, want all %d", run, got, want)
	}
}

// A fill stopped by a signal keeps its indexes deferred (the resume goes on
// filling without them) and its summary and status name them as pending;
// the run that completes the range builds them.
func TestInterruptedFillReportsPendingIndexes(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	cfg := testConfig(CmdRun, dsn, stg, nil, 1, 400)
	cfg.FetchWorkers = 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := newCounting(1000)
	src.onFetch = func(from uint64) {
		if from >= 250 {
			cancel()
		}
	}
	cfg.Source = src
	var out bytes.Buffer
	_, err := Run(ctx, cfg, &out, quiet)
	if ExitCode(err) != ExitInterrupted {
		t.Fatalf("the interrupted run: %v (exit %d), want exit 3", err, ExitCode(err))
	}
	want := cometbftIndexes
	if got := secondaryIndexes(t, dsn, "cometbft"); len(got) != 0 {
		t.Fatalf("after the interrupted fill: secondary indexes %v, want none (still deferred)", got)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("indexes: %d deferred; %d not built yet: ", want, want)) {
		t.Fatalf("the summary does not name the pending indexes:\n%s", out.String())
	}
	st := cfg
	st.Command = CmdStatus
	var status bytes.Buffer
	if _, err := Run(context.Background(), st, &status, quiet); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status.String(), fmt.Sprintf("indexes: %d deferred; %d not built yet: ", want, want)) || !strings.Contains(status.String(), "events_attributes_idx") {
		t.Fatalf("status does not name the pending indexes:\n%s", status.String())
	}
	wantAllIndexesAfter(t, "the resume", cfg, dsn, want)
}

func pendingIndexes(t *testing.T, dsn string) []string {
	t.Helper()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	names, err := export.PendingIndexes(context.Background(), conn, "cometbft")
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// What exists is read from the catalog, not the deferred records: a build
// stopped after it built blocks_pkey but before it forgot its record, and
// a key whose unique index is built but not attached, are said to exist;
// and status calls a backfill whose rows are in but whose tables lack keys
// not finished (it said "complete").
func TestPendingKeysAreReadFromTheCatalog(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 100)
	cfg.Source = newCounting(1000)
	mustRunCfg(t, cfg)
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	def := func(table, key string) string {
		var d string
		if err := conn.QueryRow(ctx, "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = $1 AND connamespace = 'cometbft'::regnamespace", key).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return "ALTER TABLE cometbft." + table + " ADD CONSTRAINT " + key + " " + d
	}
	for _, k := range []struct{ table, key, state string }{{"blocks", "blocks_pkey", "built"}, {"transactions", "transactions_pkey", "index"}, {"events", "events_pkey", "none"}} {
		d := def(k.table, k.key)
		switch k.state {
		case "index":
			if _, err := conn.Exec(ctx, "ALTER TABLE cometbft."+k.table+" DROP CONSTRAINT "+k.key); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "CREATE UNIQUE INDEX "+k.key+" ON cometbft."+k.table+" "+strings.TrimPrefix(d[strings.Index(d, "PRIMARY KEY"):], "PRIMARY KEY ")); err != nil {
				t.Fatal(err)
			}
		case "none":
			if _, err := conn.Exec(ctx, "ALTER TABLE cometbft."+k.table+" DROP CONSTRAINT "+k.key); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.Exec(ctx, "INSERT INTO cometbft.blockhaul_deferred_indexes (index_name, table_name, definition, deferred_at, primary_key) VALUES ($1, $2, $3, now(), true)", k.key, k.table, d); err != nil {
			t.Fatal(err)
		}
	}
	st := cfg
	st.Command = CmdStatus
	var status bytes.Buffer
	if _, err := Run(ctx, st, &status, quiet); err != nil {
		t.Fatal(err)
	}
	s := status.String()
	if !strings.Contains(s, "primary keys: 3 deferred; 1 built: blocks_pkey; 1 with the unique index built, not yet attached as the key: transactions_pkey; 1 not built yet: events_pkey") {
		t.Errorf("status does not say which keys exist:\n%s", s)
	}
	if strings.Contains(s, ", complete (updated") || !strings.Contains(s, "rows complete, not finished: 3 primary keys of its tables and 0 of their indexes still to build") {
		t.Errorf("status calls the backfill complete while its tables lack keys:\n%s", s)
	}
}
