package pipeline

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

func TestStatusShowsRangesGapsAndBothCheckpoints(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	src := newCounting(1000)
	if _, err := runWith(t, testConfig(CmdRun, dsn, stg, nil, 1, 100), src); err != nil {
		t.Fatal(err)
	}
	if _, err := runWith(t, testConfig(CmdFetch, dsn, stg, nil, 151, 200), src); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(CmdStatus, dsn, stg, nil, 0, 0)
	cfg.PG = dsn + "&password=hunter2"
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
	if _, err := runWith(t, testConfig(CmdFetch, dsn, a, nil, 1, 150), src); err != nil {
		t.Fatal(err)
	}
	if _, err := runWith(t, testConfig(CmdFetch, dsn, b, nil, 151, 300), src); err != nil {
		t.Fatal(err)
	}
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
