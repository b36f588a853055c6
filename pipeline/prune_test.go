package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
	"github.com/jackc/pgx/v5"
)

// TestPruneRefusesHeightsNoTargetHasExported: a store no target has
// exported from is refused (exit 2, naming the heights), and so are the
// heights no target holds when two targets hold parts of the range;
// --dry-run lists what a prune deletes (heights, size, which target holds
// them) and deletes nothing; --force deletes.
func TestPruneRefusesHeightsNoTargetHasExported(t *testing.T) {
	stg := archiveFixture(t, "cometbft", 600)
	prune := func(below uint64, force, dry bool) (string, error) { return runPrune(stg, below, force, dry) }
	staged := func() []staging.Range { return stagedIn(t, stg) }
	whole := []staging.Range{{From: 1, To: 600}}
	var refused *archive.PruneRefusedError
	out, err := prune(500, false, false)
	if !errorsAs(err, &refused) || ExitCode(err) != ExitConfig || refused.Target != "" || refused.Missing != (archive.Gap{From: 1, To: 499}) ||
		!strings.Contains(err.Error(), "no target has exported heights 1-499") {
		t.Fatalf("nothing exported: exit %d, %v\n%s", ExitCode(err), err, out)
	}
	if rs := staged(); len(rs) != 1 || rs[0] != whole[0] {
		t.Fatalf("a refused prune deleted something: %v", rs)
	}
	out, err = prune(500, false, true)
	if !errorsAs(err, &refused) || !strings.Contains(out, "heights 1-499: no target has exported them") || !strings.Contains(out, "would delete 499 heights") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if rs := staged(); len(rs) != 1 || rs[0] != whole[0] {
		t.Fatalf("a dry run deleted something: %v", rs)
	}

	// Two targets: A holds 1-300, B 200-450; 451-499 are nowhere else.
	a, b := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	for _, e := range []struct {
		dsn      string
		from, to uint64
	}{{a, 1, 300}, {b, 200, 450}} {
		if _, err := Run(context.Background(), synthConfig(CmdExport, "cometbft", e.dsn, stg, e.from, e.to), &bytes.Buffer{}, quiet); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := prune(500, false, false); !errorsAs(err, &refused) || refused.Target != "" || refused.Missing != (archive.Gap{From: 451, To: 499}) || refused.Unexported != 49 {
		t.Fatalf("451-499 exported by no target: %v", err)
	}
	cfg := DefaultConfig()
	cfg.Command, cfg.Staging, cfg.Below, cfg.BelowSet, cfg.Force, cfg.DryRun, cfg.JSON = CmdPrune, stg, 500, true, true, true, true
	cfg.PG = pgtest.BaseURL()
	var js bytes.Buffer
	if _, err := Run(context.Background(), cfg, &js, quiet); err != nil {
		t.Fatalf("dry run --force: %v", err)
	}
	var r archive.PruneReport
	if err := json.Unmarshal(js.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Held) != 4 || r.Heights != 499 || r.RecordBytes == 0 || r.Pruned || r.Refusal == "" {
		t.Fatalf("dry run report: %+v", r)
	}
	for i, want := range []struct {
		from, to uint64
		targets  int
	}{{1, 199, 1}, {200, 300, 2}, {301, 450, 1}, {451, 499, 0}} {
		if h := r.Held[i]; h.From != want.from || h.To != want.to || len(h.Targets) != want.targets {
			t.Errorf("held[%d] = %+v, want %d-%d by %d targets", i, h, want.from, want.to, want.targets)
		}
	}
	if !strings.HasSuffix(r.Held[0].Targets[0], "/cometbft") || r.Held[0].Targets[0] == r.Held[2].Targets[0] {
		t.Errorf("heights 1-199 held by %v and 301-450 by %v: want A and B", r.Held[0].Targets, r.Held[2].Targets)
	}
	if rs := staged(); len(rs) != 1 || rs[0] != whole[0] {
		t.Fatalf("a dry run deleted something: %v", rs)
	}
	out, err = prune(500, true, false)
	if err != nil || !strings.Contains(out, "pruned (forced): 499 heights deleted") {
		t.Fatalf("--force: %v\n%s", err, out)
	}
	if rs := staged(); len(rs) != 1 || rs[0] != (staging.Range{From: 500, To: 600}) {
		t.Fatalf("after a forced prune below 500: %v", rs)
	}
}

// runPrune runs prune on stg and returns what it printed.
func runPrune(stg string, below uint64, force, dry bool) (string, error) {
	cfg := DefaultConfig()
	cfg.Command, cfg.Staging, cfg.Below, cfg.BelowSet, cfg.Force, cfg.DryRun = CmdPrune, stg, below, true, force, dry
	cfg.PG = pgtest.BaseURL()
	var out bytes.Buffer
	_, err := Run(context.Background(), cfg, &out, quiet)
	return out.String(), err
}

// stagedIn is what the store in stg holds.
func stagedIn(t *testing.T, stg string) []staging.Range {
	t.Helper()
	s := stagingtest.Open(t, stg, staging.Options{ReadOnly: true})
	defer s.Close()
	rs, err := s.Staged(0, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestPruneAsksTheTarget: a prune trusts no mirrored checkpoint the target
// itself does not confirm. A database dropped, a schema dropped, its
// checkpoints reset or behind the staging mirror, rows missing under a
// checkpoint, a server that does not answer, or no --pg at all: each is
// refused with exit 4, naming the target and what it found, and nothing is
// deleted; --force deletes and says what it forced past.
func TestPruneAsksTheTarget(t *testing.T) {
	exec := func(t *testing.T, dsn, sql string) {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, tc := range []struct {
		name  string
		harm  func(t *testing.T, dsn string) // what happens to the target
		pg    func(dsn string) string        // prune's --pg
		found string
	}{
		{"database dropped", func(t *testing.T, dsn string) {
			pc, _ := pgx.ParseConfig(dsn)
			exec(t, pgtest.BaseURL(), "DROP DATABASE "+pc.Database+" WITH (FORCE)")
		}, nil, "does not exist on the server --pg reaches (dropped?)"},
		{"schema dropped", func(t *testing.T, dsn string) { exec(t, dsn, "DROP SCHEMA cometbft CASCADE") }, nil, "has no schema cometbft"},
		{"checkpoints reset", func(t *testing.T, dsn string) { exec(t, dsn, "DELETE FROM cometbft.blockhaul_backfills") }, nil, "has no checkpoint there (reset?)"},
		{"behind the mirror", func(t *testing.T, dsn string) {
			exec(t, dsn, "UPDATE cometbft.blockhaul_backfills SET last_height = range_start + 9")
		}, nil, "behind the staging mirror's"},
		{"rows missing", func(t *testing.T, dsn string) {
			exec(t, dsn, "DELETE FROM cometbft.blocks WHERE height BETWEEN 100 AND 109")
		}, nil, "10 of heights 1-"},
		{"server unreachable", nil, func(string) string {
			return "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5"
		}, "not reached:"},
		{"no --pg", nil, func(string) string { return "" }, "no --pg given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stg := archiveFixture(t, "cometbft", 600)
			dsn := pgtest.NewDatabase(t)
			if _, err := Run(context.Background(), synthConfig(CmdExport, "cometbft", dsn, stg, 1, 600), &bytes.Buffer{}, quiet); err != nil {
				t.Fatal(err)
			}
			if tc.harm != nil {
				tc.harm(t, dsn)
			}
			cfg := DefaultConfig()
			cfg.Command, cfg.Staging, cfg.Below, cfg.BelowSet, cfg.PG = CmdPrune, stg, 500, true, pgtest.BaseURL()
			if tc.pg != nil {
				cfg.PG = tc.pg(dsn)
			}
			var out bytes.Buffer
			_, err := Run(context.Background(), cfg, &out, quiet)
			var unconfirmed *archive.PruneUnconfirmedError
			if !errorsAs(err, &unconfirmed) || ExitCode(err) != ExitData || !strings.Contains(unconfirmed.Target, "/cometbft") ||
				!strings.Contains(err.Error(), tc.found) || !strings.Contains(out.String(), "could NOT confirm") {
				t.Fatalf("exit %d, %v\n%s", ExitCode(err), err, out.String())
			}
			if rs := stagedIn(t, stg); len(rs) != 1 || rs[0] != (staging.Range{From: 1, To: 600}) {
				t.Fatalf("a refused prune deleted something: %v", rs)
			}
			cfg.Force = true
			out.Reset()
			if _, err := Run(context.Background(), cfg, &out, quiet); err != nil || !strings.Contains(out.String(), "forced past a refusal; the heights deleted may have been the only copy") {
				t.Fatalf("--force: %v\n%s", err, out.String())
			}
			if rs := stagedIn(t, stg); len(rs) != 1 || rs[0] != (staging.Range{From: 500, To: 600}) {
				t.Fatalf("after a forced prune: %v", rs)
			}
		})
	}
}
