package faults

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/storetest"
	"github.com/jackc/pgx/v5"
)

// jobError is the ERROR line a job ended with ("" if none), whole.
func jobError(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "level=ERROR") {
			return l
		}
	}
	return ""
}

// damagedFileNamed matches what a job says of a damaged staging file: the
// file and the heights it held.
var damagedFileNamed = regexp.MustCompile(`is damaged: file (\d+\.blob) \(heights? \d+[-, \d]*\)`)

// TestTwoStreamExportReportsTheCause: an export of two streams ends with
// what stopped it, whichever stream saw it, not with what stopping the
// other stream caused (a two-stream export of a store with a damaged .blob
// tail exited 1 with the other stream's "use of closed network
// connection"; under a 25 ms statement_timeout the job said the other
// stream's bare "canceling statement due to statement timeout"):
//   - damage: exit 4, naming the file and its heights, for damage in the
//     first stream's part, in the second's, and in both;
//   - a statement timeout no batch meets: exit 1, saying the retries were
//     spent and their cause.
func TestTwoStreamExportReportsTheCause(t *testing.T) {
	const to = 8000
	pristine := newJob(t)
	mustRun(t, "fetch", pristine.args("fetch", 1, to)...)
	blobs, err := filepath.Glob(filepath.Join(pristine.staging, "*.blob"))
	if err != nil || len(blobs) < 2 {
		t.Fatalf("the store holds %d blob files (%v), want 2 or more to damage one at a time", len(blobs), err)
	}
	sort.Strings(blobs)
	var lines []string
	for _, tc := range []struct {
		name   string
		damage []string // file names in the store
	}{
		{"first file", []string{filepath.Base(blobs[0])}},
		{"last file", []string{filepath.Base(blobs[len(blobs)-1])}},
		{"every file", baseNames(blobs)},
	} {
		j := newJob(t)
		storetest.CopyFiles(t, pristine.staging, j.staging)
		for _, name := range tc.damage {
			damageTail(t, filepath.Join(j.staging, name))
		}
		code, out := blockhaul(t, 5*time.Minute, append(j.args("export", 1, to), "--export-streams", "2")...)
		line := jobError(out)
		m := damagedFileNamed.FindStringSubmatch(line)
		if code != 4 || m == nil || !slices.Contains(tc.damage, m[1]) {
			t.Errorf("%s damaged (%s): exit %d, want 4 naming the file and its heights: %s", tc.name, strings.Join(tc.damage, " "), code, line)
			continue
		}
		lines = append(lines, tc.name+": exit 4, "+m[0])
	}

	// Every statement of the job's sessions times out after 25 ms.
	j := newJob(t)
	j.staging = pristine.staging
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, j.dsn)
	if err != nil {
		t.Fatal(err)
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" SET statement_timeout = '25ms'"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	code, out := blockhaul(t, 5*time.Minute, append(j.args("export", 1, to), "--export-streams", "2", "--pg-retries", "2", "--pg-retry-max-wait", "200ms")...)
	line := jobError(out)
	if code != 1 || !strings.Contains(line, "gave up after 2 retries of transient database faults (last cause: statement_timeout)") {
		t.Errorf("25 ms statement_timeout: exit %d, want 1 saying the retries were spent: %s", code, line)
	} else {
		lines = append(lines, "25 ms statement_timeout: exit 1, gave up after 2 retries (statement_timeout)")
	}
	report(t, "two-stream export, cause reported: %s", strings.Join(lines, "; "))
}

// damageTail overwrites 4 KiB a little before the end of file with other
// bytes: the tail of its records no longer reads.
func damageTail(t *testing.T, file string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	off := max(fi.Size()-fi.Size()/50-4096, 0)
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] ^= 0x5a
	}
	if _, err := f.WriteAt(buf, off); err != nil {
		t.Fatal(err)
	}
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}
