package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// TestExportStreamsMatchOneStream: export --export-streams 3 of a staged
// range writes the tables a one-stream export writes, completes the
// backfill's row and builds the deferred indexes; follow refuses streams.
func TestExportStreamsMatchOneStream(t *testing.T) {
	stg := filepath.Join(t.TempDir(), "s")
	one, three := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	if err := run(t, testConfig(CmdFetch, one, stg, nil, 1, 300)); err != nil {
		t.Fatal(err)
	}
	if err := run(t, testConfig(CmdExport, one, stg, nil, 1, 300)); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(CmdExport, three, stg, nil, 1, 300)
	cfg.ExportStreams = 3
	sum, err := Run(context.Background(), cfg, nopWriter{}, quiet)
	if err != nil || !sum.Complete || sum.Export.Blocks != 300 {
		t.Fatalf("export with 3 streams: err %v, complete %v, blocks %d", err, sum.Complete, sum.Export.Blocks)
	}
	if a, b := fingerprint(t, one), fingerprint(t, three); a != b {
		t.Fatalf("3 streams:\n%s\none stream:\n%s", b, a)
	}
	conn := pgtest.ConnectTo(t, three)
	defer conn.Close(context.Background())
	var st string
	var last int64
	if err := conn.QueryRow(context.Background(), `SELECT status, last_height FROM cometbft.blockhaul_backfills WHERE alias = 'range-1-300'`).Scan(&st, &last); err != nil {
		t.Fatal(err)
	}
	if st != "complete" || last != 300 {
		t.Fatalf("backfill row: %s at %d, want complete at 300", st, last)
	}
	var pending int64
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM cometbft.blockhaul_deferred_indexes`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Fatalf("%d deferred indexes left unbuilt", pending)
	}

	cfg = testConfig(CmdFollow, three, stg, nil, 1, 300)
	cfg.ExportStreams = 2
	err = run(t, cfg)
	if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "export-streams") {
		t.Fatalf("follow --export-streams 2: exit %d (%v), want %d naming --export-streams", ExitCode(err), err, ExitConfig)
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
