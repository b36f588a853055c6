package pipeline

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

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

	cfg.Source = newCounting(1000)
	out.Reset()
	if _, err := Run(context.Background(), cfg, &out, quiet); err != nil {
		t.Fatalf("resume: %v", err)
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
