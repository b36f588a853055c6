package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// stoppingSource stops a job part way through every export stream: a fetch
// at or above the threshold of its stream's sub-range waits for the job to
// end, and once every stream has asked for one the job is cancelled, as a
// SIGINT cancels it. What each stream has committed by then is whatever
// its export reached: the test compares what the job prints with it.
type stoppingSource struct {
	*countingSource
	parts     [][2]uint64
	threshold []uint64
	stop      func()

	mu      sync.Mutex
	reached []bool
}

func newStopping(src *countingSource, parts [][2]uint64, stop func()) *stoppingSource {
	s := &stoppingSource{countingSource: src, parts: parts, stop: stop, reached: make([]bool, len(parts))}
	for _, p := range parts {
		s.threshold = append(s.threshold, p[0]+(p[1]-p[0])*3/5)
	}
	return s
}

func (s *stoppingSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	for i, p := range s.parts {
		if from < s.threshold[i] || from > p[1] || to > p[1] {
			continue // below the threshold, or the seams' fetch before the streams start
		}
		s.mu.Lock()
		s.reached[i] = true
		all := true
		for _, r := range s.reached {
			all = all && r
		}
		s.mu.Unlock()
		if all {
			s.stop()
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.countingSource.Fetch(ctx, from, to)
}

// Issue 20 §3: a run over 2, 3 and 4 export streams stopped part way prints
// only numbers PostgreSQL bears out: the last progress line's heights done,
// the summary's blocks and rows per table, each stream's checkpoint, and
// what remains (before: progress and "checkpoint: height N" took the
// highest height any stream had committed, 6500 done with 1,000 blocks in
// PostgreSQL).
func TestStoppedExportStreamsPrintWhatPostgreSQLHolds(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("%d streams", n), func(t *testing.T) {
			const to = 1600
			dsn := pgtest.NewDatabase(t)
			cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, to)
			cfg.ExportStreams = n
			cfg.Progress = time.Hour // one line at the start, the last at the end
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			parts := export.SplitRange(1, to, n)
			cfg.Source = newStopping(newCounting(5000), parts, cancel)
			var out, logs bytes.Buffer
			sum, err := Run(ctx, cfg, &out, slog.New(slog.NewJSONHandler(&logs, nil)))
			if ExitCode(err) != ExitInterrupted || sum.Complete {
				t.Fatalf("run: %v (exit %d), complete %v: want interrupted", err, ExitCode(err), sum.Complete)
			}
			text := out.String()
			t.Logf("summary:\n%s", text)

			conn := pgConn(t, dsn)
			bg := context.Background()
			var blocks uint64
			if err := conn.QueryRow(bg, `SELECT count(*) FROM cometbft.blocks`).Scan(&blocks); err != nil {
				t.Fatal(err)
			}
			if blocks == 0 || blocks >= to {
				t.Fatalf("%d blocks in PostgreSQL: the job was to stop part way, after committing some", blocks)
			}

			// The last progress line.
			var done, total uint64
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var rec struct {
					Msg    string
					Export *struct{ Done, Total uint64 }
				}
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "progress" && rec.Export != nil {
					done, total = rec.Export.Done, rec.Export.Total
				}
			}
			if done != blocks || total != to {
				t.Errorf("last progress line: export done %d of %d; PostgreSQL holds %d of %d heights", done, total, blocks, to)
			}

			// Blocks and rows, per table.
			m := regexp.MustCompile(`export:  (\d+) blocks, (\d+) rows`).FindStringSubmatch(text)
			if m == nil {
				t.Fatalf("no export line in the summary")
			}
			var rows uint64
			for _, tm := range regexp.MustCompile(`(?m)^ {11}(\w+) +(\d+) rows$`).FindAllStringSubmatch(text, -1) {
				var want uint64
				if err := conn.QueryRow(bg, "SELECT count(*) FROM cometbft."+tm[1]).Scan(&want); err != nil {
					t.Fatal(err)
				}
				if tm[2] != fmt.Sprint(want) {
					t.Errorf("summary: %s %s rows; PostgreSQL holds %d", tm[1], tm[2], want)
				}
				rows += want
			}
			if m[1] != fmt.Sprint(blocks) || m[2] != fmt.Sprint(rows) {
				t.Errorf("summary: %s blocks, %s rows; PostgreSQL holds %d blocks, %d rows", m[1], m[2], blocks, rows)
			}

			// Each stream's checkpoint against its row, and what remains
			// against the heights missing from blocks.
			cps := regexp.MustCompile(`checkpoint: stream (\d+) of (\d+) \(heights (\d+)-(\d+)\) at (height (\d+)|nothing committed)`).FindAllStringSubmatch(text, -1)
			if len(cps) != n {
				t.Fatalf("%d stream checkpoints in the summary, want %d", len(cps), n)
			}
			for i, c := range cps {
				var last *int64
				alias := export.PartAlias(export.DefaultAlias(1, to), i, n)
				if err := conn.QueryRow(bg, `SELECT last_height FROM cometbft.blockhaul_backfills WHERE alias = $1`, alias).Scan(&last); err != nil {
					t.Fatalf("%s: %v", alias, err)
				}
				want := "nothing committed"
				if last != nil {
					want = "height " + strconv.FormatInt(*last, 10)
				}
				if c[3] != fmt.Sprint(parts[i][0]) || c[4] != fmt.Sprint(parts[i][1]) || c[5] != want {
					t.Errorf("summary: stream %s of %s (heights %s-%s) at %s; PostgreSQL: %s heights %d-%d at %s", c[1], c[2], c[3], c[4], c[5], alias, parts[i][0], parts[i][1], want)
				}
			}
			gaps := pgtest.Strings(t, conn, `SELECT min(h) || '-' || max(h) FROM (
				SELECT h, h - row_number() OVER (ORDER BY h) AS g FROM generate_series(1, $1::bigint) h
				WHERE NOT EXISTS (SELECT 1 FROM cometbft.blocks b WHERE b.height = h)) s GROUP BY g ORDER BY min(h)`, to)
			want := fmt.Sprintf("remaining: %d of %d heights not in PostgreSQL: %s (", to-blocks, to, strings.Join(gaps, ", "))
			if !strings.Contains(text, want) {
				t.Errorf("summary does not say %q", want)
			}
		})
	}
}
