package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/syncbuf"
	"github.com/blockhaul/blockhaul/internal/testbin"
	"github.com/jackc/pgx/v5"
)

// blockhaulBin is blockhaul built for this run of the suite.
var blockhaulBin string

func TestMain(m *testing.M) { testbin.Main(m, &blockhaulBin) }

// report prints a scenario's line of figures.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	fmt.Printf("faults: %s\n", line)
	t.Log(line)
}

// proc is one running blockhaul process.
type proc struct {
	cmd   *exec.Cmd
	out   syncbuf.Buffer
	lines chan string // every output line, for tests that wait for one
	done  chan struct{}
	err   error
	start time.Time
	took  time.Duration
}

// startProc starts blockhaul with args; its output lines are also sent on
// p.lines (dropped when nobody reads).
func startProc(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(blockhaulBin, args...), lines: make(chan string, 1024), done: make(chan struct{})}
	p.cmd.Env = append(testbin.CleanEnv(), env...)
	pr, pw := io.Pipe()
	p.cmd.Stdout = io.MultiWriter(&p.out, pw)
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start blockhaul: %v", err)
	}
	p.start = time.Now()
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = p.cmd.Wait()
		p.took = time.Since(p.start)
		pw.Close()
		<-scanDone
		close(p.lines)
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// hung is the status wait returns for a process that outlived its limit.
const hung = -3

// wait waits up to limit for the process and returns its exit status: -1
// when killed by a signal, hung when it outlived limit (a hang: the test
// is failed, the process killed after a goroutine dump, and its output kept
// in a file the error names).
func (p *proc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return exitStatus(p.err)
	case <-time.After(limit):
	}
	p.cmd.Process.Signal(syscall.SIGQUIT) // a goroutine dump in the output
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	dump := p.out.String()
	kept := "(not kept)"
	if f, err := os.CreateTemp("", "blockhaul-faults-hang-*.log"); err == nil {
		f.WriteString(dump)
		f.Close()
		kept = f.Name()
	}
	t.Errorf("blockhaul %s still running after %s (hang); output and goroutine dump in %s:\n%s", strings.Join(p.cmd.Args[1:], " "), limit, kept, tail(beforeDump(dump), 15))
	return hung
}

func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1
		}
		return ee.ExitCode()
	}
	return -2
}

// kill sends SIGKILL and reports whether the process was still running (so
// that the kill counts).
func (p *proc) kill() bool {
	select {
	case <-p.done:
		return false
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return exitStatus(p.err) == -1
}

// blockhaul runs the binary to the end (at most limit) and returns its exit
// status and output.
func blockhaul(t *testing.T, limit time.Duration, args ...string) (int, string) {
	t.Helper()
	p := startProc(t, nil, args...)
	code := p.wait(t, limit)
	return code, p.out.String()
}

// mustRun runs blockhaul and fails the test unless it exits 0.
func mustRun(t *testing.T, what string, args ...string) string {
	t.Helper()
	code, out := blockhaul(t, 5*time.Minute, args...)
	if code != 0 {
		t.Fatalf("%s: exit %d:\n%s", what, code, tail(out, 40))
	}
	return out
}

// beforeDump is a hung process's output before its goroutine dump.
func beforeDump(s string) string {
	if i := strings.Index(s, "SIGQUIT"); i >= 0 {
		return s[:i]
	}
	return s
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// escapedPanic matches what a panic that escaped prints: the runtime's
// "panic:" or "fatal error:" line, Pebble's "PANIC", a goroutine dump. A
// panic the program contained and logged (a stack inside a log field) is
// not one.
var escapedPanic = regexp.MustCompile(`(?m)^(panic: |fatal error: |PANIC|goroutine \d+ \[)`)

// panicked reports whether output shows a panic that escaped.
func panicked(out string) bool { return escapedPanic.MatchString(out) }

// spanInLine is a height range as errors write it ("fetch blocks 202-217").
var spanInLine = regexp.MustCompile(`\b(\d+)-(\d+)\b`)

// namesHeight reports whether line names height h: the height itself, or a
// fetch span holding it of at most maxNamedSpan heights (a whole batch the
// node refused cannot be narrowed to one height, but the job's whole range
// does not count as naming it).
func namesHeight(line string, h uint64) bool {
	if regexp.MustCompile(`\b` + strconv.FormatUint(h, 10) + `\b`).MatchString(line) {
		return true
	}
	for _, m := range spanInLine.FindAllStringSubmatch(line, -1) {
		a, errA := strconv.ParseUint(m[1], 10, 64)
		b, errB := strconv.ParseUint(m[2], 10, 64)
		if errA == nil && errB == nil && a <= h && h <= b && b-a < maxNamedSpan {
			return true
		}
	}
	return false
}

// maxNamedSpan is the widest span namesHeight accepts as naming a height.
const maxNamedSpan = 64

// errorLine is the last line of output that carries an error, shortened.
func errorLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "err=") || strings.Contains(lines[i], "error") {
			l := lines[i]
			if j := strings.Index(l, "err="); j >= 0 {
				l = l[j:]
			}
			if len(l) > 220 {
				l = l[:220] + "…"
			}
			return l
		}
	}
	if len(lines) > 0 {
		return lines[len(lines)-1]
	}
	return ""
}

// job is the arguments of one blockhaul job on one database and staging
// directory.
type job struct {
	dsn, staging string
	chain        string // cometbft (default) or evm
	seed         string
	batch        int
	extra        []string
}

func (j job) args(cmd string, from, to uint64) []string {
	a := []string{cmd, "--staging", j.staging, "--from", fmt.Sprint(from), "--to", fmt.Sprint(to),
		"--progress-interval", "0", "--log-level", "info"}
	if cmd != "fetch" {
		a = append(a, "--pg", j.dsn)
	}
	if j.chain != "" {
		a = append(a, "--chain", j.chain)
	}
	if j.seed != "" {
		a = append(a, "--synthetic-seed", j.seed)
	} else {
		a = append(a, "--synthetic-seed", "7")
	}
	if j.batch > 0 && cmd != "fetch" {
		a = append(a, "--batch-blocks", fmt.Sprint(j.batch))
	}
	return append(a, j.extra...)
}

func (j job) schema() string {
	if j.chain == "" {
		return "cometbft"
	}
	return j.chain
}

func newJob(t *testing.T) job {
	return job{dsn: pgtest.NewDatabase(t), staging: filepath.Join(t.TempDir(), "staging"), batch: 100}
}

// digest fingerprints every table of schema order-independently: per table
// its row count and an md5 over the sorted md5s of its rows. Timestamps
// blockhaul writes into its own bookkeeping tables (started_at, updated_at,
// …) are left out: they differ between identical runs. The secondary
// indexes of the schema are one more entry, so a missing index shows.
func digest(t *testing.T, dsn, schema string) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'; SET extra_float_digits = 3; SET statement_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT table_name, column_name, data_type FROM information_schema.columns
WHERE table_schema = $1 ORDER BY table_name, ordinal_position`, schema)
	if err != nil {
		t.Fatal(err)
	}
	cols := map[string][]string{}
	for rows.Next() {
		var table, col, typ string
		if err := rows.Scan(&table, &col, &typ); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(table, "blockhaul_") && strings.HasPrefix(typ, "timestamp") {
			continue
		}
		if table == "blockhaul_chain" && (col == "height" || col == "hash") {
			// The block a schema's chain record names is the first one
			// committed into it, which streams and resumes pick in any
			// order; the chain (family and chain id) must be the same,
			// and chainRecordInChain checks the block is the chain's.
			continue
		}
		cols[table] = append(cols[table], pgx.Identifier{col}.Sanitize())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for table, cs := range cols {
		q := fmt.Sprintf(`SELECT count(*), coalesce(md5(string_agg(h, '' ORDER BY h)), '') FROM (SELECT md5(ROW(%s)::text) h FROM %s.%s) s`,
			strings.Join(cs, ", "), pgx.Identifier{schema}.Sanitize(), pgx.Identifier{table}.Sanitize())
		var n int64
		var sum string
		if err := conn.QueryRow(ctx, q).Scan(&n, &sum); err != nil {
			t.Fatalf("digest %s: %v", table, err)
		}
		out[table] = fmt.Sprintf("%d rows %s", n, sum)
	}
	var idx string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(indexname || ' ' || regexp_replace(indexdef, '^.* USING ', ''), '; ' ORDER BY indexname), '')
FROM pg_indexes WHERE schemaname = $1`, schema).Scan(&idx); err != nil {
		t.Fatal(err)
	}
	out["(indexes)"] = idx
	if _, ok := cols["blockhaul_chain"]; ok {
		out["(chain record's block)"] = chainRecordInChain(t, conn, schema)
	}
	return out
}

// chainRecordInChain says whether the block the schema's chain record names
// is the block the schema holds at that height.
func chainRecordInChain(t *testing.T, conn *pgx.Conn, schema string) string {
	t.Helper()
	ctx := context.Background()
	s := pgx.Identifier{schema}.Sanitize()
	// The blocks' height column: CometBFT's height, EVM's number.
	var height string
	if err := conn.QueryRow(ctx, `SELECT column_name FROM information_schema.columns
WHERE table_schema = $1 AND table_name = 'blocks' AND column_name IN ('height', 'number')`, schema).Scan(&height); err != nil {
		t.Fatalf("chain record of %s: the blocks' height column: %v", schema, err)
	}
	var held bool
	if err := conn.QueryRow(ctx, fmt.Sprintf(
		`SELECT EXISTS (SELECT 1 FROM %[1]s.blockhaul_chain c JOIN %[1]s.blocks b ON b.%[2]s = c.height AND b.hash = c.hash)`,
		s, pgx.Identifier{height}.Sanitize())).Scan(&held); err != nil {
		t.Fatalf("chain record of %s: %v", schema, err)
	}
	if held {
		return "a block the schema holds"
	}
	return "a block the schema does not hold"
}

// diffDigests lists the tables whose digests differ; only is a filter (nil:
// every table).
func diffDigests(got, want map[string]string, only func(string) bool) []string {
	var diffs []string
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	for k := range keys {
		if only != nil && !only(k) {
			continue
		}
		if got[k] != want[k] {
			diffs = append(diffs, fmt.Sprintf("%s: %q, want %q", k, got[k], want[k]))
		}
	}
	sort.Strings(diffs)
	return diffs
}

func dataTables(name string) bool { return !strings.HasPrefix(name, "blockhaul_") }

// rowSet is the md5 of every row of a data table, to check that a
// database holds no row the reference does not.
func rowSet(t *testing.T, dsn, schema, table string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	conn.Exec(ctx, "SET TimeZone = 'UTC'")
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT md5(t::text) FROM %s.%s t`, pgx.Identifier{schema}.Sanitize(), pgx.Identifier{table}.Sanitize()))
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return map[string]bool{}
		}
		t.Fatal(err)
	}
	set := map[string]bool{}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		set[h] = true
	}
	if err := rows.Err(); err != nil && !strings.Contains(err.Error(), "does not exist") {
		t.Fatal(err)
	}
	return set
}

// wrongRows counts the rows of the data tables of dsn that the reference
// database does not hold.
func wrongRows(t *testing.T, dsn, ref, schema string, tables []string) int {
	t.Helper()
	n := 0
	for _, table := range tables {
		want := rowSet(t, ref, schema, table)
		for h := range rowSet(t, dsn, schema, table) {
			if !want[h] {
				n++
			}
		}
	}
	return n
}

// sampler reads, on its own connection, each stream's checkpoint and the
// rows below it in one snapshot, over and over while jobs run, and counts
// the samples where a checkpoint was ahead of its rows: a checkpoint at
// height c with fewer than c-start+1 blocks in [start, c].
type sampler struct {
	samples, ahead atomic.Int64
	first          atomic.Value // string: the first sample that was ahead
	stop           chan struct{}
	done           chan struct{}
}

func startSampler(t *testing.T, dsn, schema string) *sampler {
	t.Helper()
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	sch := pgx.Identifier{schema}.Sanitize()
	// Both streams' kinds of checkpoint: backfills and the head stream.
	q := fmt.Sprintf(`SELECT k.stream, k.start, k.at,
	(SELECT count(*) FROM %[1]s.blocks b WHERE b.height BETWEEN k.start AND k.at)
FROM (SELECT 'backfill/' || alias AS stream, range_start AS start, last_height AS at FROM %[1]s.blockhaul_backfills WHERE last_height IS NOT NULL
      UNION ALL SELECT stream, start_height, height FROM %[1]s.blockhaul_checkpoints) k`, sch)
	go func() {
		defer close(s.done)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { <-s.stop; cancel() }()
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		for ctx.Err() == nil {
			if conn == nil {
				c, err := pgx.Connect(ctx, dsn)
				if err != nil {
					pause(ctx, 50*time.Millisecond)
					continue
				}
				conn = c
			}
			rows, err := conn.Query(ctx, q)
			if err != nil {
				if conn.IsClosed() {
					conn = nil
				}
				pause(ctx, 20*time.Millisecond) // the tables may not exist yet
				continue
			}
			n := 0
			for rows.Next() {
				var stream string
				var start, at, count int64
				if rows.Scan(&stream, &start, &at, &count) != nil {
					continue
				}
				n++
				if count < at-start+1 {
					s.ahead.Add(1)
					s.first.CompareAndSwap(nil, fmt.Sprintf("%s at %d with %d of its %d blocks", stream, at, count, at-start+1))
				}
			}
			rows.Close()
			if rows.Err() == nil && n > 0 {
				s.samples.Add(1)
			}
			pause(ctx, 5*time.Millisecond)
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *sampler) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

func (s *sampler) String() string {
	return fmt.Sprintf("%d/%d", s.ahead.Load(), s.samples.Load())
}

func (s *sampler) check(t *testing.T) {
	t.Helper()
	s.close()
	if s.samples.Load() == 0 {
		t.Error("the checkpoint sampler took no sample")
	}
	if s.ahead.Load() > 0 {
		t.Errorf("checkpoint ahead of its rows in %s samples, first: %v", s, s.first.Load())
	}
}

// pause waits d or until ctx ends: the sampler's polling interval.
func pause(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

func TestNamesHeight(t *testing.T) {
	for _, c := range []struct {
		line string
		want bool
	}{
		{`err="fetch blocks 202-217: HTTP 502"`, true},
		{`err="block 208: wrong hash"`, true},
		{`err="fetch blocks 193-207: HTTP 502"`, false},
		{`err="run 1-400: HTTP 502"`, false},
		{`err="block 2080: wrong hash"`, false},
	} {
		if got := namesHeight(c.line, 208); got != c.want {
			t.Errorf("namesHeight(%q, 208) = %v, want %v", c.line, got, c.want)
		}
	}
}
