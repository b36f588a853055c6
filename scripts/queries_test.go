package scripts

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/pipeline"
)

// queryChains are the synthetic chains the example queries of docs/querying.md are
// written for: query-bench.sh loads the same ones, 100,000 blocks each;
// here the first few hundred blocks, which hold every value the examples
// name.
var queryChains = []struct {
	family   string
	from, to uint64
	txs      float64 // --synthetic-txs (0: the family's default)
}{
	{"cometbft", 1, 400, 0},
	{"evm", 0, 200, 15},
}

// Every SQL example of docs/querying.md's "Example queries" runs against a
// small exported database and returns rows, so the examples cannot rot: a
// column renamed, a table dropped or a value no longer in the synthetic
// chain fails here, naming the query.
func TestExampleQueriesRun(t *testing.T) {
	for _, qc := range queryChains {
		t.Run(qc.family, func(t *testing.T) {
			queries := exampleQueries(t, qc.family)
			if len(queries) < 5 {
				t.Fatalf("docs/querying.md has %d %s queries, want at least 5", len(queries), qc.family)
			}
			dsn := pgtest.NewDatabase(t)
			cfg := pipeline.DefaultConfig()
			cfg.Command, cfg.Chain, cfg.PG = pipeline.CmdRun, qc.family, dsn
			cfg.Staging = filepath.Join(t.TempDir(), "staging")
			cfg.From, cfg.To, cfg.ToSet = qc.from, qc.to, true
			cfg.SyntheticTxs, cfg.Progress = qc.txs, 0
			if _, err := pipeline.Run(context.Background(), cfg, io.Discard, slog.New(slog.DiscardHandler)); err != nil {
				t.Fatal(err)
			}
			conn := pgtest.ConnectTo(t, dsn)
			defer conn.Close(context.Background())
			for name, sql := range queries {
				rows, err := conn.Query(context.Background(), sql)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				n := 0
				for rows.Next() {
					n++
				}
				if err := rows.Err(); err != nil {
					t.Errorf("%s: %v", name, err)
				} else if n == 0 {
					t.Errorf("%s: no rows on blocks %d-%d of the synthetic chain", name, qc.from, qc.to)
				}
			}
		})
	}
}

// exampleQueries extracts the family's example queries from docs/querying.md
// with example-queries.awk, as query-bench.sh does, keyed by their title line.
func exampleQueries(t *testing.T, family string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("awk", "-v", "family="+family, "-v", "out="+dir, "-f", "example-queries.awk", "../docs/querying.md").CombinedOutput(); err != nil {
		t.Fatalf("example-queries.awk: %v\n%s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	queries := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		title, _, _ := strings.Cut(string(b), "\n")
		queries[filepath.Base(f)+" "+title] = string(b)
	}
	return queries
}
