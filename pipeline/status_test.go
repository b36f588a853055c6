package pipeline

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

func TestStatusShowsRangesGapsAndBothCheckpoints(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	src := newCounting(1000)
	mustRunWith(t, testConfig(CmdRun, dsn, stg, nil, 1, 100), src)
	mustRunWith(t, testConfig(CmdFetch, dsn, stg, nil, 151, 200), src)
	cfg := testConfig(CmdStatus, dsn, stg, nil, 0, 0)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&" // $DATABASE_URL may carry parameters of its own, or none
	}
	cfg.PG = dsn + sep + "password=hunter2"
	var out bytes.Buffer
	if _, err := Run(context.Background(), cfg, &out, quiet); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"staged:   150 blocks in 1-200, ranges 1-100, 151-200",
		"gaps:     50 heights, 101-150",
		"mirror:   pg:",
		"/cometbft/backfill/range-1-100 at 100",
		"backfill range-1-100",
		"1-100 at 100, complete",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Errorf("status shows the password:\n%s", out.String())
	}
}

func TestMergeThenExportFromOneStore(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	src := newCounting(1000)
	mustRunWith(t, testConfig(CmdFetch, dsn, a, nil, 1, 150), src)
	mustRunWith(t, testConfig(CmdFetch, dsn, b, nil, 151, 300), src)
	merge := testConfig(CmdMerge, dsn, a, nil, 0, 0)
	merge.MergeFrom = b
	var out bytes.Buffer
	if _, err := Run(context.Background(), merge, &out, quiet); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "150 blocks copied") {
		t.Fatalf("merge said: %s", out.String())
	}
	calls := src.calls.Load()
	sum, err := runWith(t, testConfig(CmdExport, dsn, a, nil, 1, 300), src)
	if err != nil || !sum.Complete || sum.Export.Blocks != 300 {
		t.Fatalf("export of the merged store: %v complete=%v blocks=%d", err, sum.Complete, sum.Export.Blocks)
	}
	if src.calls.Load() != calls {
		t.Fatal("export contacted the source")
	}
}

// The block a store is identified by is the first committed to it (of
// the first range fetched: 151-200 here), which need not be its lowest
// height: status says which is which.
func TestStatusLabelsLowestStagedHeight(t *testing.T) {
	stg := filepath.Join(t.TempDir(), "s")
	src := newCounting(1000)
	for _, r := range [][2]uint64{{151, 200}, {1, 100}} {
		mustRunWith(t, testConfig(CmdFetch, "", stg, nil, r[0], r[1]), src)
	}
	var out bytes.Buffer
	if _, err := Run(context.Background(), testConfig(CmdStatus, "", stg, nil, 0, 0), &out, quiet); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"identified by block 1", "(the first staged)", "lowest staged 1, highest staged 200"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "first block") {
		t.Errorf("status calls a block of 151-200 the first block although 1 is staged:\n%s", out.String())
	}
}

// A refused merge says why (the error) and nothing about blocks copied.
func TestRefusedMergePrintsNoCount(t *testing.T) {
	dir := t.TempDir()
	comet, evm := filepath.Join(dir, "comet"), filepath.Join(dir, "evm")
	mustRunWith(t, testConfig(CmdFetch, "", comet, nil, 1, 10), newCounting(1000))
	ecfg := testConfig(CmdFetch, "", evm, nil, 1, 10)
	ecfg.Chain = "evm"
	if _, err := Run(context.Background(), ecfg, io.Discard, quiet); err != nil {
		t.Fatal(err)
	}
	merge := testConfig(CmdMerge, "", comet, nil, 0, 0)
	merge.MergeFrom = evm
	var out bytes.Buffer
	_, err := Run(context.Background(), merge, &out, quiet)
	if err == nil {
		t.Fatal("merging an evm store into a cometbft one succeeded")
	}
	if strings.Contains(out.String(), "copied") {
		t.Errorf("refused merge printed %q (err %v)", out.String(), err)
	}
}

// Without --to the range ends at the tip read, and the summary says so.
func TestSummaryShowsRangeWithoutTo(t *testing.T) {
	cfg := testConfig(CmdFetch, "", filepath.Join(t.TempDir(), "s"), nil, 11, 0)
	cfg.Source = newCounting(60)
	runSaying(t, cfg, "blockhaul fetch: heights 11-60, complete")
}

// runSaying runs cfg to completion and fails the test unless its summary
// says want.
func runSaying(t *testing.T, cfg Config, want string) Summary {
	t.Helper()
	var out bytes.Buffer
	sum, err := Run(context.Background(), cfg, &out, quiet)
	if err != nil || !sum.Complete {
		t.Fatalf("%s: %v (complete %v)", cfg.Command, err, sum.Complete)
	}
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, out.String())
	}
	return sum
}

// TestMergeAndStatusTakeFromAlone: --from without --to bounds the low side
// of merge and status, as it does verify's and checksum's (before: both
// ignored it and took every staged height).
func TestMergeAndStatusTakeFromAlone(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	src := newCounting(1000)
	mustRunWith(t, testConfig(CmdFetch, "", a, nil, 1, 100), src)
	merge := testConfig(CmdMerge, "", b, nil, 61, 0)
	merge.MergeFrom, merge.FromSet = a, true
	var out bytes.Buffer
	if _, err := Run(context.Background(), merge, &out, quiet); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "40 blocks copied") {
		t.Fatalf("merge --from 61 of 1-100 said: %s", out.String())
	}
	status := testConfig(CmdStatus, "", b, nil, 81, 0)
	status.FromSet = true
	out.Reset()
	if _, err := Run(context.Background(), status, &out, quiet); err != nil {
		t.Fatal(err)
	}
	if want := "staged:   20 blocks in 81-100, ranges 81-100"; !strings.Contains(out.String(), want) {
		t.Errorf("status --from 81 lacks %q:\n%s", want, out.String())
	}
	// --to alone keeps --from's default, the chain's first block: what is
	// missing below the store's lowest height is shown.
	status = testConfig(CmdStatus, "", b, nil, 1, 70)
	out.Reset()
	if _, err := Run(context.Background(), status, &out, quiet); err != nil {
		t.Fatal(err)
	}
	if want := "gaps:     60 heights, 1-60"; !strings.Contains(out.String(), want) {
		t.Errorf("status --to 70 lacks %q:\n%s", want, out.String())
	}
}
