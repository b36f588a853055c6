package pipeline

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

func run(t *testing.T, cfg Config) error {
	t.Helper()
	_, err := Run(context.Background(), cfg, io.Discard, quiet)
	return err
}

// schemas lists the non-system schemas of dsn.
func schemas(t *testing.T, dsn string) []string {
	t.Helper()
	c := pgtest.ConnectTo(t, dsn)
	defer c.Close(context.Background())
	return pgtest.Strings(t, c, `SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg_%' AND nspname NOT IN ('information_schema', 'public') ORDER BY 1`)
}

// TestJobRefusedForAnotherChainsStagingLeavesNothing: run, export and
// follow with --chain evm on a CometBFT store exit 4, as fetch does, and
// create no schema, table or backfill row.
func TestJobRefusedForAnotherChainsStagingLeavesNothing(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	if err := run(t, testConfig(CmdFetch, dsn, stg, nil, 1, 50)); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{CmdRun, CmdExport, CmdFollow, CmdFetch} {
		cfg := testConfig(cmd, dsn, stg, nil, 1, 50)
		cfg.Chain, cfg.Schema, cfg.ChainSet = "evm", "", true
		err := run(t, cfg)
		if ExitCode(err) != ExitData || !strings.Contains(err.Error(), "--chain evm") {
			t.Errorf("%s --chain evm on a cometbft store: exit %d (%v), want %d naming --chain evm", cmd, ExitCode(err), err, ExitData)
		}
	}
	if s := schemas(t, dsn); len(s) != 0 {
		t.Fatalf("refused jobs left schemas %v", s)
	}
}

// TestExportOfPartlyStagedRangeIsRefusedUpFront: a gap inside the range is
// found before any row is exported or any index dropped.
func TestExportOfPartlyStagedRangeIsRefusedUpFront(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	for _, r := range [][2]uint64{{1, 100}, {151, 200}} {
		if err := run(t, testConfig(CmdFetch, dsn, stg, nil, r[0], r[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, to := range []uint64{200, 260} {
		err := run(t, testConfig(CmdExport, dsn, stg, nil, 1, to))
		if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "101-150") {
			t.Errorf("export 1-%d with 101-150 missing: exit %d (%v), want %d naming 101-150", to, ExitCode(err), err, ExitConfig)
		}
	}
	if s := schemas(t, dsn); len(s) != 0 {
		t.Fatalf("the refused export left schemas %v", s)
	}
	// The staged part alone exports.
	if err := run(t, testConfig(CmdExport, dsn, stg, nil, 1, 100)); err != nil {
		t.Fatal(err)
	}
}

// TestStagingThatIsNotAStoreIsRefused: a directory of other files is never
// written into.
func TestStagingThatIsNotAStoreIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "demo.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{CmdFetch, CmdMerge} {
		cfg := testConfig(cmd, "", dir, nil, 1, 10)
		cfg.MergeFrom = filepath.Join(t.TempDir(), "other")
		err := run(t, cfg)
		if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "--staging") || !strings.Contains(err.Error(), "demo.sh") {
			t.Errorf("%s into a directory of scripts: exit %d (%v), want %d naming --staging and demo.sh", cmd, ExitCode(err), err, ExitConfig)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the refused jobs wrote into %s: %d entries", dir, len(entries))
	}
}

// TestHTTPAddressInUseIsRefusedBeforeStaging: the port is bound first.
func TestHTTPAddressInUseIsRefusedBeforeStaging(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stg := filepath.Join(t.TempDir(), "s")
	cfg := testConfig(CmdFetch, "", stg, nil, 1, 10)
	cfg.HTTPAddr = ln.Addr().String()
	err = run(t, cfg)
	if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "--http") {
		t.Fatalf("--http on a port in use: exit %d (%v), want %d naming --http", ExitCode(err), err, ExitConfig)
	}
	if _, err := os.Stat(stg); !os.IsNotExist(err) {
		t.Fatalf("staging was created before --http was bound (%v)", err)
	}
}

// TestFetchWithAnotherSyntheticSeedIsRefused: a store staged from one seed
// is another chain to a fetch with another seed, whether the range is
// already staged or not.
func TestFetchWithAnotherSyntheticSeedIsRefused(t *testing.T) {
	stg := filepath.Join(t.TempDir(), "s")
	if err := run(t, testConfig(CmdFetch, "", stg, nil, 1, 50)); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]uint64{{1, 50}, {51, 80}} {
		cfg := testConfig(CmdFetch, "", stg, nil, r[0], r[1])
		cfg.SyntheticSeed = 2
		err := run(t, cfg)
		if ExitCode(err) != ExitData || !strings.Contains(err.Error(), "--synthetic-seed 2") {
			t.Errorf("fetch %d-%d with seed 2 into a seed-1 store: exit %d (%v), want %d", r[0], r[1], ExitCode(err), err, ExitData)
		}
	}
	if err := run(t, testConfig(CmdFetch, "", stg, nil, 1, 80)); err != nil {
		t.Fatalf("the same seed again: %v", err)
	}
}

// TestRunPastTipLeavesNothing: a run refused for a range above the tip
// creates no schema, backfill row or dropped index.
func TestRunPastTipLeavesNothing(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 500)
	_, err := runWith(t, cfg, newCounting(420))
	if err == nil || !strings.Contains(err.Error(), "above the chain tip 420") {
		t.Fatalf("run past the tip: %v, want a refusal naming the tip", err)
	}
	if s := schemas(t, dsn); len(s) != 0 {
		t.Fatalf("the refused run left schemas %v", s)
	}
}

// TestRunFromAnotherChainsSourceLeavesNothing: a source of another chain id
// than the store holds is refused with status 4 before any schema exists.
func TestRunFromAnotherChainsSourceLeavesNothing(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	if err := run(t, testConfig(CmdFetch, dsn, stg, nil, 1, 50)); err != nil { // blockhaul-synthetic-1
		t.Fatal(err)
	}
	_, err := runWith(t, testConfig(CmdRun, dsn, stg, nil, 1, 100), newCounting(1000)) // blockhaul-synthetic-3
	if ExitCode(err) != ExitData || !strings.Contains(err.Error(), "blockhaul-synthetic-3") {
		t.Fatalf("run from another chain's source: exit %d (%v), want %d naming its chain", ExitCode(err), err, ExitData)
	}
	if s := schemas(t, dsn); len(s) != 0 {
		t.Fatalf("the refused run left schemas %v", s)
	}
}
