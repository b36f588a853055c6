package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// A signal while the deferred indexes are being built exits 3 with a
// summary that says the job is not complete and names the indexes pending;
// the next run builds them, every one valid.
func TestSignalDuringIndexBuildSaysWhatIsPending(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	restore := crashpoint.Set(func(_ context.Context, p crashpoint.Point) error {
		if p == crashpoint.MidIndexBuild {
			cancel() // SIGTERM: the job's context ends mid-build
		}
		return nil
	})
	defer restore()
	cfg := testConfig(CmdRun, dsn, stg, nil, 1, 120)
	cfg.Source = newCounting(1000)
	var out bytes.Buffer
	sum, err := Run(ctx, cfg, &out, quiet)
	restore()
	if ExitCode(err) != ExitInterrupted {
		t.Fatalf("exit %d (%v), want %d", ExitCode(err), err, ExitInterrupted)
	}
	if len(sum.IndexesPending) == 0 || !strings.Contains(out.String(), "NOT complete") || !strings.Contains(out.String(), sum.IndexesPending[0]) {
		t.Fatalf("pending %v, summary:\n%s", sum.IndexesPending, out.String())
	}

	// The summary counts what the stopped run built, keys apart; the
	// resume builds the rest and counts that.
	first := sum.AfterFill
	cfg.Source = newCounting(1000)
	out.Reset()
	sum2, err := Run(context.Background(), cfg, &out, quiet)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if a := sum2.AfterFill; a.Indexes+a.Keys != len(sum.IndexesPending) || a.Keys != len(sum.KeysPending) ||
		first.Indexes+a.Indexes != cometbftIndexes || first.Keys+a.Keys != len(chainTables(t, cfg)) {
		t.Errorf("stopped run built %+v leaving %v (keys %v); the resume built %+v: want %d indexes and %d keys in all",
			first, sum.IndexesPending, sum.KeysPending, a, cometbftIndexes, len(chainTables(t, cfg)))
	}
	// The stopped run never reached its ANALYZE and the resume exported
	// nothing: the resume analyzes the tables whose builds it finished.
	if n := countRows(t, dsn, "pg_stat_user_tables WHERE schemaname = 'cometbft' AND last_analyze IS NOT NULL AND relname NOT LIKE 'blockhaul%'"); sum2.AfterFill.Analyzed != len(chainTables(t, cfg)) || n != int64(sum2.AfterFill.Analyzed) {
		t.Errorf("the resume analyzed %d tables, the store has %d analyzed; want %d", sum2.AfterFill.Analyzed, n, len(chainTables(t, cfg)))
	}
	if !strings.Contains(out.String(), ", complete") || strings.Contains(out.String(), "not built") {
		t.Fatalf("resume summary:\n%s", out.String())
	}
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	var valid, pending int
	if err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
	JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'cometbft' AND c.relname LIKE '%_idx' AND i.indisvalid),
	(SELECT count(*) FROM cometbft.blockhaul_deferred_indexes)`).Scan(&valid, &pending); err != nil {
		t.Fatal(err)
	}
	if valid != cometbftIndexes || pending != 0 {
		t.Fatalf("%d valid secondary indexes (want %d), %d pending", valid, cometbftIndexes, pending)
	}
}

// chainTables are the tables of cfg's chain family (each with a primary key).
func chainTables(t *testing.T, cfg Config) []chain.Table {
	t.Helper()
	f, err := family.Lookup(cmp.Or(cfg.Chain, family.Default.Name))
	if err != nil {
		t.Fatal(err)
	}
	return f.Tables()
}
