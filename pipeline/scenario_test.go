package pipeline

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/monitor"
)

// countingSource serves a synthetic chain with a fixed tip and counts calls.
type countingSource struct {
	*cometbftsynth.Synthetic
	tip   uint64
	calls atomic.Int64
	// onFetch, if set, runs before each Fetch (to observe a run from inside).
	onFetch func(from uint64)
}

func newCounting(tip uint64) *countingSource {
	return &countingSource{Synthetic: cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 3}), tip: tip}
}

func (s *countingSource) Tip(context.Context) (uint64, error) { s.calls.Add(1); return s.tip, nil }
func (s *countingSource) ChainID(ctx context.Context) (string, error) {
	s.calls.Add(1)
	return s.Synthetic.ChainID(ctx)
}
func (s *countingSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	s.calls.Add(1)
	if s.onFetch != nil {
		s.onFetch(from)
	}
	return s.Synthetic.Fetch(ctx, from, to)
}

func runWith(t *testing.T, cfg Config, src *countingSource) (Summary, error) {
	t.Helper()
	cfg.Source = src
	return Run(context.Background(), cfg, io.Discard, quiet)
}

// mustRunWith runs cfg on src and fails the test on an error.
func mustRunWith(t *testing.T, cfg Config, src *countingSource) {
	t.Helper()
	if _, err := runWith(t, cfg, src); err != nil {
		t.Fatal(err)
	}
}

func TestCoveredRangeWithStaleTipSucceedsWithoutRPC(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	mustRunWith(t, testConfig(CmdRun, dsn, stg, nil, 1, 400), newCounting(1000))
	lagging := newCounting(100) // a node whose tip is below the range
	sum, err := runWith(t, testConfig(CmdRun, dsn, stg, nil, 1, 400), lagging)
	if err != nil || !sum.Complete || ExitCode(err) != ExitComplete {
		t.Fatalf("covered range: %v complete=%v", err, sum.Complete)
	}
	if n := lagging.calls.Load(); n != 0 {
		t.Fatalf("a covered range made %d source calls, want 0", n)
	}
	// export and fetch of the same range say the same.
	mustRunWith(t, testConfig(CmdExport, dsn, stg, nil, 1, 400), lagging)
	mustRunWith(t, testConfig(CmdFetch, dsn, stg, nil, 1, 400), lagging)
	if n := lagging.calls.Load(); n != 0 {
		t.Fatalf("covered export/fetch made %d source calls", n)
	}
}

func TestRangePastTipIsRefusedWithBothHeights(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	for _, cmd := range []string{CmdRun, CmdFetch} {
		_, err := runWith(t, testConfig(cmd, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 500), newCounting(420))
		if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "420") {
			t.Fatalf("%s past the tip: %v, want a refusal naming 500 and 420", cmd, err)
		}
		if ExitCode(err) == ExitComplete {
			t.Fatalf("%s past the tip exited 0", cmd)
		}
	}
}

func TestInvalidConfigurationsNameEachField(t *testing.T) {
	base := DefaultConfig()
	base.Command, base.PG = CmdRun, "postgres://u:secretpw@127.0.0.1/db"
	tests := []refusedConfig{
		{"to below from", func(c *Config) { c.From, c.To, c.ToSet = 10, 5, true }, []string{"--to (BLOCKHAUL_TO_HEIGHT)"}},
		{"dsn", func(c *Config) { c.PG = "postgres://u:secretpw@host:notaport/db" }, []string{"--pg (BLOCKHAUL_PG)"}},
		{"chain", func(c *Config) { c.Chain = "solana" }, []string{"--chain (BLOCKHAUL_CHAIN)", "solana"}},
		{"workers", func(c *Config) { c.FetchWorkers = 0 }, []string{"--fetch-workers (BLOCKHAUL_FETCH_WORKERS)"}},
		{"batch", func(c *Config) { c.BatchBlocks = -1 }, []string{"--batch-blocks (BLOCKHAUL_BATCH_BLOCKS)"}},
		{"rpc scheme", func(c *Config) { c.RPC = []string{"localhost:26657"} }, []string{"--rpc (BLOCKHAUL_RPC)", "scheme"}},
		{"missing pg", func(c *Config) { c.PG = "" }, []string{"--pg (BLOCKHAUL_PG)", "required"}},
		{"all at once", func(c *Config) {
			c.From, c.To, c.ToSet, c.FetchWorkers, c.BatchBlocks, c.Chain = 9, 1, true, -2, 0, "x"
		}, []string{"--to", "--fetch-workers", "--batch-blocks", "--chain"}},
	}
	checkRefused(t, base, tests)
	base.EnsureDefaults()
	if err := base.Validate(); err != nil {
		t.Fatalf("the base configuration is invalid: %v", err)
	}
}

func TestBackfillWithoutEndStopsWhereHeadStarted(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	src := newCounting(5000)
	head := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "h"), nil, 700, 800)
	mustRunWith(t, head, src)
	bf := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "b"), nil, 1, 0)
	bf.Alias = "history"
	sum, err := runWith(t, bf, src)
	if err != nil || !sum.Complete {
		t.Fatalf("backfill: %v complete=%v", err, sum.Complete)
	}
	if sum.To != 699 {
		t.Fatalf("backfill ran to %d, want 699 (where the head started)", sum.To)
	}
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	var n, distinct int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT height) FROM cometbft.blocks").Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != 800 || distinct != 800 {
		t.Fatalf("%d blocks (%d heights), want 1-800 once each", n, distinct)
	}
}

func TestDeferIndexesModes(t *testing.T) {
	want := 0
	for _, tb := range cometbft.NewDecoder().Tables() {
		want += len(tb.Indexes)
	}
	if want == 0 {
		t.Fatal("the cometbft tables have no secondary index to defer")
	}
	for _, tc := range []struct {
		name   string
		mode   IndexMode
		before string // what happened to the schema before the measured run
		during int    // secondary indexes while it fills
	}{
		{"always, empty tables", IndexesAlways, "", 0},
		{"auto, empty tables", IndexesAuto, "", 0},
		{"never, empty tables", IndexesNever, "", want},
		{"auto beside rows already exported", IndexesAuto, "filled", want},
		{"auto after a deferred run stopped", IndexesAuto, "deferred", 0},
		{"always beside rows already exported", IndexesAlways, "filled", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			stg := filepath.Join(t.TempDir(), "s")
			conn := pgtest.ConnectTo(t, dsn)
			defer conn.Close(context.Background())
			secondary := func() int {
				var n int
				if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_indexes WHERE schemaname = 'cometbft' AND indexname NOT LIKE '%pkey'`).Scan(&n); err != nil {
					t.Error(err)
				}
				return n
			}
			from := uint64(1)
			if tc.before != "" {
				first := testConfig(CmdRun, dsn, stg, nil, 1, 100)
				first.DeferIndexes = IndexesNever
				mustRunWith(t, first, newCounting(5000))
				if tc.before == "deferred" {
					if err := export.DeferIndexes(context.Background(), conn, "cometbft", cometbft.NewDecoder().Tables(), quiet); err != nil {
						t.Fatal(err)
					}
				}
				from = 101
			}
			src := newCounting(5000)
			var during atomic.Int64
			during.Store(-1)
			src.onFetch = func(h uint64) {
				if h > from+200 && during.Load() < 0 {
					during.Store(int64(secondary()))
				}
			}
			cfg := testConfig(CmdRun, dsn, stg, nil, from, from+399)
			cfg.DeferIndexes = tc.mode
			cfg.FetchWorkers = 1
			mustRunWith(t, cfg, src)
			if got := during.Load(); got != int64(tc.during) {
				t.Fatalf("%d secondary indexes existed during the fill, want %d", got, tc.during)
			}
			if got := secondary(); got != want {
				t.Fatalf("%d secondary indexes after the fill, want %d", got, want)
			}
		})
	}
}

func TestFollowNeverDefersIndexesOnItsOwn(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	src := newCounting(300)
	var during atomic.Int64
	during.Store(-1)
	src.onFetch = func(h uint64) {
		if h > 100 && during.Load() < 0 {
			var n int64
			if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_indexes WHERE schemaname = 'cometbft' AND indexname NOT LIKE '%pkey'`).Scan(&n); err != nil {
				t.Error(err)
			}
			during.Store(n)
		}
	}
	cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 300)
	cfg.FetchWorkers = 1
	mustRunWith(t, cfg, src)
	if during.Load() <= 0 {
		t.Fatalf("%d secondary indexes while follow filled empty tables, want all of them", during.Load())
	}
}

func TestMetricsAdvanceDuringRun(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	m := monitor.New(monitor.Options{Logger: quiet, Out: io.Discard, Terminal: new(bool)})
	src := newCounting(10000)
	var scrapes []float64
	var ready []int
	src.onFetch = func(from uint64) {
		// Scrape from inside the run at a few points of its progress.
		if from%400 == 1 {
			scrapes = append(scrapes, scrape(t, addr, "blockhaul_heights_staged_total"))
			if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
				ready = append(ready, resp.StatusCode)
				resp.Body.Close()
			}
		}
	}
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 2000)
	cfg.Monitor, cfg.HTTPAddr, cfg.FetchWorkers, cfg.FetchSpan = m, addr, 1, 16
	mustRunWith(t, cfg, src)
	if len(scrapes) < 3 {
		t.Fatalf("only %d scrapes", len(scrapes))
	}
	advanced := false
	for i := 1; i < len(scrapes); i++ {
		if scrapes[i] < scrapes[i-1] {
			t.Fatalf("counter went back: %v", scrapes)
		}
		if scrapes[i] > scrapes[i-1] {
			advanced = true
		}
	}
	if !advanced {
		t.Fatalf("blockhaul_heights_staged_total never advanced during the run: %v", scrapes)
	}
	if len(ready) != len(scrapes) {
		t.Fatalf("/readyz answered %d of %d probes", len(ready), len(scrapes))
	}
	for _, code := range ready {
		if code != http.StatusOK {
			t.Fatalf("/readyz answered %v during the run, want 200s", ready)
		}
	}
}

// scrape reads one unlabelled metric from /metrics.
func scrape(t *testing.T, addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Errorf("scrape: %v", err)
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(line, name+" "), 64)
			return v
		}
	}
	return 0
}
