package pipeline

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// follow without --from on a target holding a complete backfill starts
// after it: the head exports only the heights above (no batch through the
// merge path), its checkpoint starts there, and the tables equal one plain
// load. A head stream that has started goes on after a backfill that
// reaches its checkpoint instead of exporting that backfill's heights again.
func TestFollowWithoutFromStartsAfterTheHeightsHeld(t *testing.T) {
	fc := newForkChain(1000, 0, ^uint64(0), 0)
	t.Run("after a backfill", func(t *testing.T) {
		dsn := pgtest.NewDatabase(t)
		bf := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "run"), nil, 1, 300)
		bf.Source = tipView{fc}
		mustRunCfg(t, bf)

		cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "follow"), fc, 1, 400)
		cfg.FromSet = false // follow without --from
		sum := runSaying(t, cfg, "follow: heights 301-400, complete")
		if head, _ := streamRows(t, dsn); head != "start 301 height 400" {
			t.Fatalf("head checkpoint %q, want start 301 height 400", head)
		}
		if sum.Export.Blocks != 100 || sum.Export.Conflicts != 0 {
			t.Fatalf("head exported %d blocks with %d merged batches, want 100 blocks and none merged", sum.Export.Blocks, sum.Export.Conflicts)
		}
		everyHeightOnce(t, dsn, 400)
		if got, want := fingerprint(t, dsn), plainLoad(t, 400); got != want {
			t.Fatalf("contents differ from one plain load:\n%s\nwant\n%s", got, want)
		}
		// Started: the same command resumes after its checkpoint.
		cfg.To = 450
		if sum, err := Run(context.Background(), cfg, io.Discard, quiet); err != nil || sum.Export.Blocks != 50 {
			t.Fatalf("follow again: %v, %d blocks, want 50", err, sum.Export.Blocks)
		}
		if head, _ := streamRows(t, dsn); head != "start 301 height 450" {
			t.Fatalf("head checkpoint %q, want start 301 height 450", head)
		}
	})
	t.Run("a started head after a backfill above it", func(t *testing.T) {
		dsn := pgtest.NewDatabase(t)
		head := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "follow"), fc, 1, 100)
		head.FromSet = true
		mustRunCfg(t, head)
		bf := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "run"), nil, 101, 300)
		bf.Source = tipView{fc}
		mustRunCfg(t, bf)

		head.FromSet, head.To = false, 400
		sum, err := Run(context.Background(), head, io.Discard, quiet)
		if err != nil || sum.Export.Blocks != 100 || sum.Export.Conflicts != 0 {
			t.Fatalf("follow: %v, %d blocks, %d merged batches; want 100 blocks, none merged", err, sum.Export.Blocks, sum.Export.Conflicts)
		}
		if h, _ := streamRows(t, dsn); h != "start 1 height 400" {
			t.Fatalf("head checkpoint %q, want start 1 height 400", h)
		}
		everyHeightOnce(t, dsn, 400)
	})
}

// follow without --from refuses (exit 2), naming the heights it could start
// at and changing nothing, where no start is right: heights held that do
// not begin at the chain's first height, or a backfill not finished across
// where it would start (a backfill registered and still restoring or
// exporting, as a Kubernetes export Job's beside the follow Deployment).
func TestFollowWithoutFromRefusesWhereNoStartIsRight(t *testing.T) {
	fc := newForkChain(1000, 0, ^uint64(0), 0)
	cases := []struct {
		name    string
		prepare func(t *testing.T, dsn string)
		want    []string
	}{
		{"heights above the first", func(t *testing.T, dsn string) {
			bf := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "run"), nil, 101, 300)
			bf.Source = tipView{fc}
			mustRunCfg(t, bf)
		}, []string{"holds heights 101-300 but not the chain's first height 1", "could start at --from 301 or --from 1"}},
		{"a backfill not finished above one complete", func(t *testing.T, dsn string) {
			bf := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "run"), nil, 1, 300)
			bf.Source = tipView{fc}
			mustRunCfg(t, bf)
			registerBackfill(t, dsn, export.Stream{Alias: "next", From: 301, To: 600})
		}, []string{"holds backfill next (301-600) not finished (it has committed none of it yet", "could start at --from 601 or --from 301"}},
		{"a backfill registered on an empty target", func(t *testing.T, dsn string) {
			bf := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "run"), nil, 1, 300)
			bf.Source = tipView{fc}
			mustRunCfg(t, bf)
			if _, err := pgConn(t, dsn).Exec(context.Background(), "DELETE FROM cometbft.blockhaul_backfills; TRUNCATE cometbft.blocks, cometbft.transactions, cometbft.events"); err != nil {
				t.Fatal(err)
			}
			registerBackfill(t, dsn, export.Stream{Alias: "k8s", From: 1, To: 400})
		}, []string{"holds backfill k8s (1-400) not finished", "could start at --from 401 or --from 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			tc.prepare(t, dsn)
			want := targetState(t, dsn, "cometbft")
			cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "follow"), fc, 1, 700)
			cfg.FromSet = false
			_, err := Run(context.Background(), cfg, io.Discard, quiet)
			if ExitCode(err) != ExitConfig {
				t.Fatalf("got %v (exit %d), want a refusal with exit %d", err, ExitCode(err), ExitConfig)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q: %v", w, err)
				}
			}
			if got := targetState(t, dsn, "cometbft"); got != want {
				t.Errorf("the target changed:\nbefore %s\nafter  %s", want, got)
			}
			if !emptyStore(t, cfg.Staging) {
				t.Errorf("the refused follow staged blocks: %s", stagingState(t, cfg.Staging))
			}
		})
	}
}

// registerBackfill registers a backfill's row as an export does before its
// first batch.
func registerBackfill(t *testing.T, dsn string, s export.Stream) {
	t.Helper()
	if _, err := export.LoadCursor(context.Background(), pgConn(t, dsn), "cometbft", s); err != nil {
		t.Fatal(err)
	}
}
