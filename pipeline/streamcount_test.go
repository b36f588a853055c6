package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// TestAutoStreams: --export-streams auto by the machine, the server and
// the range.
func TestAutoStreams(t *testing.T) {
	for _, c := range []struct {
		f    streamFacts
		want int
		why  []string
	}{
		// The measured machine: 2 CPUs, the server local, the default
		// indexes (BRIN on block time): one stream, height order kept.
		{streamFacts{CPUs: 2, Local: true, FreeConns: 90, Blocks: 10_000, BatchBlocks: 500, BRIN: []string{"events_block_time_idx"}}, 1, []string{"height order", "events_block_time_idx", "--export-streams N"}},
		{streamFacts{CPUs: 16, Local: true, FreeConns: 90, Blocks: 1e6, BatchBlocks: 500, BRIN: []string{"events_block_time_idx"}}, 1, []string{"16 CPUs shared"}},
		// The server elsewhere: its cores are its own; the split is kept.
		{streamFacts{CPUs: 2, FreeConns: 90, Blocks: 10_000, BatchBlocks: 500, BRIN: []string{"events_block_time_idx"}}, 4, []string{"another machine"}},
		// No BRIN index (--indexes minimal or none): 2 CPUs, the server
		// local: 2.
		{streamFacts{CPUs: 2, Local: true, FreeConns: 90, Blocks: 10_000, BatchBlocks: 500}, 2, []string{"2 CPUs shared", "3/4"}},
		{streamFacts{CPUs: 1, Local: true, FreeConns: 90, Blocks: 10_000, BatchBlocks: 500}, 1, nil},
		{streamFacts{CPUs: 4, Local: true, FreeConns: 90, Blocks: 10_000, BatchBlocks: 500}, 3, nil},
		{streamFacts{CPUs: 16, Local: true, FreeConns: 90, Blocks: 1e6, BatchBlocks: 500}, 12, nil},
		// A server elsewhere: 2 a CPU, at most 16.
		{streamFacts{CPUs: 2, FreeConns: 90, Blocks: 10_000, BatchBlocks: 500}, 4, []string{"another machine", "2 a CPU"}},
		{streamFacts{CPUs: 32, FreeConns: 90, Blocks: 1e6, BatchBlocks: 500}, 16, []string{"at most 16"}},
		// Half the free connections.
		{streamFacts{CPUs: 8, FreeConns: 7, Blocks: 1e6, BatchBlocks: 500}, 3, []string{"7 free connections"}},
		{streamFacts{CPUs: 8, FreeConns: 0, Blocks: 1e6, BatchBlocks: 500}, 1, []string{"0 free connections"}},
		{streamFacts{CPUs: 8, FreeConns: -1, Blocks: 1e6, BatchBlocks: 500}, 16, nil}, // unknown: no bound
		// A stream a batch at least.
		{streamFacts{CPUs: 2, Local: true, FreeConns: 90, Blocks: 999, BatchBlocks: 500}, 1, []string{"999 blocks fill 1 whole batch of 500"}},
		{streamFacts{CPUs: 16, FreeConns: 90, Blocks: 1500, BatchBlocks: 500}, 3, []string{"1500 blocks fill 3 whole batches of 500"}},
		// Issue 20: "50 blocks make 0 batches of 500".
		{streamFacts{CPUs: 16, FreeConns: 90, Blocks: 10, BatchBlocks: 500}, 1, []string{"10 blocks are less than one batch of 500"}},
	} {
		n, why := autoStreams(c.f)
		if n != c.want {
			t.Errorf("%+v: %d streams (%s), want %d", c.f, n, why, c.want)
		}
		for _, w := range c.why {
			if !strings.Contains(why, w) {
				t.Errorf("%+v: reason %q lacks %q", c.f, why, w)
			}
		}
		if !strings.HasPrefix(why, "auto: ") {
			t.Errorf("%+v: reason %q does not say auto", c.f, why)
		}
	}
}

// withCPUs makes autoStreams see n CPUs until the test ends.
func withCPUs(t *testing.T, n int) {
	prev := machineCPUs
	machineCPUs = func() int { return n }
	t.Cleanup(func() { machineCPUs = prev })
}

// TestAutoStreamsOnThisServer: auto asks the server (local here: the test
// server is on 127.0.0.1) and the range, logs the count and why, and the
// summary says it.
func TestAutoStreamsOnThisServer(t *testing.T) {
	stg := filepath.Join(t.TempDir(), "s")
	dsn := pgtest.NewDatabase(t)
	if err := run(t, testConfig(CmdFetch, dsn, stg, nil, 1, 300)); err != nil {
		t.Fatal(err)
	}
	// The default indexes (BRIN on block time), the server local: one
	// stream, whatever the CPUs, and the summary says why.
	withCPUs(t, 4)
	cfg := testConfig(CmdExport, dsn, stg, nil, 1, 300)
	cfg.ExportStreams = 0
	if sum, err := Run(context.Background(), cfg, io.Discard, quiet); err != nil || !sum.Complete || sum.Streams != 1 || !strings.Contains(sum.StreamsWhy, "BRIN indexes") {
		t.Fatalf("auto export with the default indexes: err %v, %d streams (%s); want 1, for the BRIN indexes", err, sum.Streams, sum.StreamsWhy)
	}
	if c := heightCorrelation(t, dsn, "cometbft.events"); c < 0.999 {
		t.Errorf("after one stream the events heap's correlation with height is %v, want 1", c)
	}

	// Without BRIN indexes (--indexes minimal) the CPUs decide. local: 3
	// streams.
	dsn = pgtest.NewDatabase(t)
	cfg = testConfig(CmdExport, dsn, stg, nil, 1, 300)
	cfg.ExportStreams = 0
	if err := cfg.Indexes.Set("minimal"); err != nil {
		t.Fatal(err)
	}
	cfg.MemoryLimitPerStream = 96 << 20 // as cmd/blockhaul sets it with the default limit
	prevLimit := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prevLimit)
	cgroup := withCgroupMemory(t, "max\n") // no container limit
	var out bytes.Buffer
	sum, err := Run(context.Background(), cfg, &out, quiet)
	if err != nil || !sum.Complete || sum.Streams != 3 || !strings.Contains(sum.StreamsWhy, "4 CPUs shared with a PostgreSQL server on this machine") {
		t.Fatalf("auto export: err %v, complete %v, %d streams (%s); want 3 for 4 CPUs beside a local server", err, sum.Complete, sum.Streams, sum.StreamsWhy)
	}
	if got := debug.SetMemoryLimit(-1); got != 3*96<<20 {
		t.Errorf("heap limit %d MiB after splitting into 3 streams, want 3 × 96", got>>20)
	}
	if !strings.Contains(out.String(), "export streams: 3 (auto: 4 CPUs") {
		t.Errorf("summary does not give the streams and why:\n%s", out.String())
	}
	_, bfs := streamRows(t, dsn)
	if want := "[range-1-300 1-300 last 300 complete range-1-300/part-1-of-3 1-100 last 100 complete range-1-300/part-2-of-3 101-200 last 200 complete range-1-300/part-3-of-3 201-300 last 300 complete]"; fmt.Sprint(bfs) != want {
		t.Fatalf("backfill rows %q, want %s", bfs, want)
	}

	// A range of fewer batches than CPUs: one stream a batch.
	dsn2 := pgtest.NewDatabase(t)
	withCPUs(t, 64)
	cfg = testConfig(CmdExport, dsn2, stg, nil, 1, 120)
	cfg.ExportStreams = 0
	if err := cfg.Indexes.Set("none"); err != nil {
		t.Fatal(err)
	}
	// In a container of 256 MiB, two streams' 2 × 128 MiB is held at 3/4
	// of it.
	cfg.MemoryLimitPerStream = 128 << 20
	if err := os.WriteFile(cgroup, []byte("268435456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err = Run(context.Background(), cfg, io.Discard, quiet)
	if err != nil || sum.Streams != 2 || !strings.Contains(sum.StreamsWhy, "120 blocks fill 2 whole batches of 50") {
		t.Fatalf("auto export of 120 blocks in batches of 50: err %v, %d streams (%s), want 2", err, sum.Streams, sum.StreamsWhy)
	}
	if got := debug.SetMemoryLimit(-1); got != 192<<20 {
		t.Errorf("heap limit %d MiB in a 256 MiB container, want 192", got>>20)
	}
}

// withCgroupMemory makes memoryCeiling read content as the container's
// memory limit until the test ends; it returns the file's path.
func withCgroupMemory(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "memory.max")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	prev := cgroupMemoryFiles
	cgroupMemoryFiles = []string{p}
	t.Cleanup(func() { cgroupMemoryFiles = prev })
	return p
}

// A job resumed where auto chooses another count (another machine) carries
// on with the sub-ranges an earlier run recorded instead of splitting the
// range again: killed part way with 3 streams, then resumed by auto on "8
// CPUs" (6 streams), it ends with the three parts' rows alone, every height
// once and the tables of a one-stream export. An explicit other count is
// refused and changes nothing. A one-stream export killed part way resumes
// with one stream too.
func TestResumedExportKeepsTheRecordedStreams(t *testing.T) {
	const to = 900
	stg := filepath.Join(t.TempDir(), "s")
	one := pgtest.NewDatabase(t)
	if err := run(t, testConfig(CmdFetch, one, stg, nil, 1, to)); err != nil {
		t.Fatal(err)
	}
	if err := run(t, testConfig(CmdExport, one, stg, nil, 1, to)); err != nil {
		t.Fatal(err)
	}
	want := fingerprint(t, one)

	for _, first := range []int{3, 1} {
		t.Run(fmt.Sprintf("first %d", first), func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			cfg := testConfig(CmdExport, dsn, stg, nil, 1, to)
			cfg.ExportStreams = first
			kills, restore := killAfterCommits(4, 1)
			err := run(t, cfg)
			restore()
			if !errors.Is(err, errKilled) || kills.Load() != 1 {
				t.Fatalf("first export: %v after %d kills, want killed once", err, kills.Load())
			}
			checkCheckpointsBehindRows(t, dsn)
			_, before := streamRows(t, dsn)

			if first > 1 {
				cfg.ExportStreams = 2
				err = run(t, cfg)
				var ce *ConfigError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--export-streams") || !strings.Contains(err.Error(), "split into 3 by an earlier run") {
					t.Fatalf("resume with --export-streams 2: %v, want a configuration error naming the 3 recorded", err)
				}
				if _, after := streamRows(t, dsn); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Fatalf("the refused resume changed the backfill rows: %q, were %q", after, before)
				}
			}

			withCPUs(t, 8) // auto would choose 6 here
			cfg.ExportStreams = 0
			sum, err := Run(context.Background(), cfg, io.Discard, quiet)
			if err != nil || !sum.Complete || sum.Streams != first || !strings.Contains(sum.StreamsWhy, "resuming") {
				t.Fatalf("auto resume: err %v, complete %v, %d streams (%s); want the %d recorded", err, sum.Complete, sum.Streams, sum.StreamsWhy, first)
			}
			_, bfs := streamRows(t, dsn)
			wantRows := []string{"range-1-900 1-900 last 900 complete"}
			if first == 3 {
				wantRows = append(wantRows,
					"range-1-900/part-1-of-3 1-300 last 300 complete",
					"range-1-900/part-2-of-3 301-600 last 600 complete",
					"range-1-900/part-3-of-3 601-900 last 900 complete")
			}
			if fmt.Sprint(bfs) != fmt.Sprint(wantRows) {
				t.Fatalf("backfill rows %q, want %q", bfs, wantRows)
			}
			if sum.Export.Blocks >= to {
				t.Errorf("the resume exported %d blocks: it started over", sum.Export.Blocks)
			}
			everyHeightOnce(t, dsn, to)
			if got := fingerprint(t, dsn); got != want {
				t.Fatalf("resumed export:\n%s\none stream:\n%s", got, want)
			}
		})
	}
}

// TestAutoIndexWorkers: --index-workers auto is one build a CPU beside a
// local server, at most 4; 4 for a server elsewhere.
func TestAutoIndexWorkers(t *testing.T) {
	for _, c := range []struct {
		cpus  int
		local bool
		want  int
		why   string
	}{
		{2, true, 2, "one build a CPU of its 2"},
		{1, true, 1, "of its 1"},
		{0, true, 1, "of its 0"},
		{3, true, 3, "of its 3"},
		{16, true, 4, "at most 4"},
		{2, false, 4, "another machine"},
		{64, false, 4, "another machine"},
	} {
		n, why := autoIndexWorkers(c.cpus, c.local)
		if n != c.want || !strings.Contains(why, c.why) || !strings.HasPrefix(why, "auto: ") {
			t.Errorf("%d CPUs, local %v: %d (%s), want %d saying %q", c.cpus, c.local, n, why, c.want, c.why)
		}
	}
}

// TestAutoIndexWorkersOnThisServer: a fresh fill's deferred builds run
// with --index-workers auto resolved from this (local) server and the
// CPUs, logged with why; a count given is kept and not logged as chosen.
func TestAutoIndexWorkersOnThisServer(t *testing.T) {
	stg := filepath.Join(t.TempDir(), "s")
	if err := run(t, testConfig(CmdFetch, "", stg, nil, 1, 200)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cpus, given int
		want        string
		summary     string // the summary's word on it
	}{
		{2, 0, `msg="index workers" workers=2 reason="auto: PostgreSQL on this machine, one build a CPU of its 2, at most 4"`,
			"2 at once (auto: PostgreSQL on this machine, one build a CPU of its 2, at most 4)"},
		{8, 0, `msg="index workers" workers=4 reason="auto: PostgreSQL on this machine, one build a CPU of its 8, at most 4"`,
			"4 at once (auto: PostgreSQL on this machine, one build a CPU of its 8, at most 4)"},
		{2, 3, "", "3 at once (--index-workers)"},
	} {
		withCPUs(t, c.cpus)
		dsn := pgtest.NewDatabase(t)
		cfg := testConfig(CmdExport, dsn, stg, nil, 1, 200)
		cfg.IndexWorkers = c.given
		var logs, out bytes.Buffer
		sum, err := Run(context.Background(), cfg, &out, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil || !sum.Complete || len(sum.IndexesPending) != 0 {
			t.Fatalf("export with %d CPUs, --index-workers %d: err %v, complete %v, pending %v", c.cpus, c.given, err, sum.Complete, sum.IndexesPending)
		}
		got := strings.Contains(logs.String(), `msg="index workers"`)
		switch {
		case c.want != "" && !strings.Contains(logs.String(), c.want):
			t.Errorf("%d CPUs, auto: the log lacks %s:\n%s", c.cpus, c.want, logs.String())
		case c.want == "" && got:
			t.Errorf("--index-workers %d given: the log says it chose:\n%s", c.given, logs.String())
		}
		if !strings.Contains(logs.String(), "indexes built") && !strings.Contains(logs.String(), "index built") {
			t.Errorf("%d CPUs: no deferred build logged; the fill deferred nothing:\n%s", c.cpus, logs.String())
		}
		// The summary says what was built after the fill, and it is what
		// the log shows: every build logged once, every key of the
		// family's tables among them, every table filled analyzed.
		a := sum.AfterFill
		builds := strings.Count(logs.String(), `msg="index built"`)
		fam, err := family.Lookup(cfg.Chain)
		if err != nil {
			t.Fatal(err)
		}
		keys := 0
		for _, tb := range fam.Tables() {
			if len(tb.PrimaryKey) > 0 {
				keys++
			}
		}
		if a.Indexes+a.Keys != builds || a.Keys != keys || a.Indexes == 0 || a.Analyzed != len(filledTables(sum.Export)) || a.Took <= 0 {
			t.Errorf("%d CPUs, --index-workers %d: after the fill %+v; the log shows %d builds, the family %d keys, the fill %d tables",
				c.cpus, c.given, a, builds, keys, len(filledTables(sum.Export)))
		}
		// And it is what the store holds: a fresh fill defers every index
		// and key of the family's tables, and analyzes each table it filled.
		names := make([]string, 0, len(fam.Tables()))
		for _, tb := range fam.Tables() {
			names = append(names, "'"+tb.Name+"'")
		}
		in := "(" + strings.Join(names, ",") + ")"
		schema := cmp.Or(cfg.Schema, fam.Name) // a schema not given is the family's
		if n := countRows(t, dsn, "pg_indexes WHERE schemaname = '"+schema+"' AND tablename IN "+in); n != int64(a.Indexes+a.Keys) {
			t.Errorf("%d CPUs: the summary says %d indexes and keys built, the store has %d", c.cpus, a.Indexes+a.Keys, n)
		}
		if n := countRows(t, dsn, "pg_constraint WHERE contype = 'p' AND connamespace = '"+schema+"'::regnamespace AND conrelid::regclass::text IN (SELECT quote_ident('"+schema+"') || '.' || quote_ident(t) FROM unnest(ARRAY["+strings.Join(names, ",")+"]) AS t)"); n != int64(a.Keys) {
			t.Errorf("%d CPUs: the summary says %d primary keys built, the store has %d", c.cpus, a.Keys, n)
		}
		if n := countRows(t, dsn, "pg_stat_user_tables WHERE schemaname = '"+schema+"' AND last_analyze IS NOT NULL AND relname IN "+in); n != int64(a.Analyzed) {
			t.Errorf("%d CPUs: the summary says %d tables analyzed, the store has %d", c.cpus, a.Analyzed, n)
		}
		line := fmt.Sprintf("  after the fill: %d deferred indexes and %d primary keys built, %s; %d tables analyzed, in ", a.Indexes, a.Keys, c.summary, a.Analyzed)
		if !strings.Contains(out.String(), line) {
			t.Errorf("the summary lacks %q:\n%s", line, out.String())
		}
	}
}

// TestSplitExportSaysWhatItCostsBRIN: an export split over streams says,
// once it has chosen them, that its rows leave height order and which BRIN
// indexes that costs; one stream, or an index set without BRIN, says
// nothing of it.
func TestSplitExportSaysWhatItCostsBRIN(t *testing.T) {
	stg := filepath.Join(t.TempDir(), "s")
	if err := run(t, testConfig(CmdFetch, "", stg, nil, 1, 200)); err != nil {
		t.Fatal(err)
	}
	const said = `brin_indexes=transactions_block_time_idx,events_block_time_idx,messages_block_time_idx`
	for _, c := range []struct {
		streams int
		indexes string
		says    bool
	}{
		{2, "default", true},
		{1, "default", false},
		{2, "minimal", false},
	} {
		cfg := testConfig(CmdExport, pgtest.NewDatabase(t), stg, nil, 1, 200)
		cfg.ExportStreams = c.streams
		set, err := export.ParseIndexSet(c.indexes)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Indexes = set
		var logs bytes.Buffer
		sum, err := Run(context.Background(), cfg, io.Discard, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil || !sum.Complete || sum.Streams != c.streams {
			t.Fatalf("%d streams, --indexes %s: err %v, complete %v, streams %d", c.streams, c.indexes, err, sum.Complete, sum.Streams)
		}
		if got := strings.Contains(logs.String(), said) && strings.Contains(logs.String(), "out of height order"); got != c.says {
			t.Errorf("%d streams, --indexes %s: says the BRIN cost %v, want %v:\n%s", c.streams, c.indexes, got, c.says, logs.String())
		}
	}
}

// heightCorrelation is pg_stats.correlation of table's height column after
// an ANALYZE: 1 when the heap is in height order.
func heightCorrelation(t *testing.T, dsn, table string) float64 {
	t.Helper()
	conn := pgtest.ConnectTo(t, dsn)
	ctx := context.Background()
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ANALYZE "+table); err != nil {
		t.Fatal(err)
	}
	schema, name, _ := strings.Cut(table, ".")
	var c float64
	if err := conn.QueryRow(ctx, "SELECT correlation FROM pg_stats WHERE schemaname = $1 AND tablename = $2 AND attname = 'height'", schema, name).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}
