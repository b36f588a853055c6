package pipeline

import (
	"context"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// A Job is resolved once and nothing changes it: running fetch, run over
// two export streams, export, follow --to and status leaves every field of
// the Job each ran as Resolve made it (what a step learns — the range end,
// the store's family, the head's start, the index plan — it keeps in a
// new Job or its own state). The runs complete, so the stages did run.
func TestJobUnchangedByItsRun(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	ctx := context.Background()
	run := func(cfg Config) {
		t.Helper()
		j := mustJob(t, cfg)
		before := *j
		sum, err := j.Run(ctx, io.Discard, quiet)
		if err != nil || (cfg.Command != CmdStatus && !sum.Complete) {
			t.Fatalf("%s: %v, complete %v", cfg.Command, err, sum.Complete)
		}
		if !reflect.DeepEqual(before, *j) {
			t.Errorf("%s changed its Job:\n before %+v\n after  %+v", cfg.Command, before, *j)
		}
	}
	fetch := testConfig(CmdFetch, "", stg, nil, 1, 0) // --to from the tip
	fetch.SyntheticTip = 400
	run(fetch)
	both := testConfig(CmdRun, dsn, stg, nil, 1, 300)
	both.ExportStreams = 2
	run(both)
	exp := testConfig(CmdExport, dsn, stg, nil, 301, 0) // --to from staging
	exp.Alias = "rest"
	run(exp)
	follow := testConfig(CmdFollow, dsn, stg, nil, 1, 400)
	follow.FromSet = false // the head starts after the heights held
	run(follow)
	status := testConfig(CmdStatus, dsn, stg, nil, 1, 0)
	run(status)
}
