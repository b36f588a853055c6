package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// TestKeylessFillKilledResumes SIGKILLs a fresh export that runs without
// its tables' primary keys (deferred with its secondary indexes because
// the tables were empty), once its first batches are committed, and
// resumes it two ways: under the same alias (it takes the keys over and
// goes on without them) and under another alias with two export streams
// (another layout, whose sub-ranges start over: it builds the keys before
// it writes, and its batches merge with the rows there). Both end with
// every key and index built and tables identical to one uninterrupted
// export: no row lost or doubled.
func TestKeylessFillKilledResumes(t *testing.T) {
	const to = 1200
	ref := newJob(t)
	mustRun(t, "fetch", append(ref.args("fetch", 1, to), "--fetch-workers", "2")...)
	mustRun(t, "reference export", ref.args("export", 1, to)...)
	want := digest(t, ref.dsn, "cometbft")
	if !strings.Contains(want["(indexes)"], "blocks_pkey") {
		t.Fatalf("the reference has no primary key on blocks: %s", want["(indexes)"])
	}
	var parts []string
	for _, resume := range []struct {
		name  string
		extra []string
		says  string
	}{
		{"the same alias", nil, "primary keys stay deferred"},
		{"another alias over 2 streams", []string{"--alias", "again", "--export-streams", "2"}, "building them before writing"},
	} {
		j := newJob(t)
		j.staging = ref.staging
		j.batch = 50
		killed := killOnceCommitted(t, j, to)
		conn := pgtest.ConnectTo(t, j.dsn)
		var keys, deferred int
		if err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
	WHERE n.nspname = 'cometbft' AND contype = 'p' AND conname NOT LIKE 'blockhaul%'),
	(SELECT count(*) FROM cometbft.blockhaul_deferred_indexes WHERE primary_key)`).Scan(&keys, &deferred); err != nil {
			t.Fatal(err)
		}
		conn.Close(context.Background())
		if keys != 0 || deferred == 0 {
			t.Fatalf("the killed fill had %d primary keys in place and %d deferred: want none in place", keys, deferred)
		}
		out := mustRun(t, "resume under "+resume.name, append(j.args("export", 1, to), resume.extra...)...)
		if !strings.Contains(out, resume.says) {
			t.Errorf("the resume under %s does not say %q:\n%s", resume.name, resume.says, tail(out, 30))
		}
		if d := diffDigests(digest(t, j.dsn, "cometbft"), want, dataTables); len(d) > 0 {
			t.Errorf("killed at %d, resumed under %s: tables differ from one export:\n%s", killed, resume.name, strings.Join(d, "\n"))
		}
		parts = append(parts, fmt.Sprintf("%s (killed at %d, %d keys deferred)", resume.name, killed, deferred))
	}
	report(t, "keyless fill SIGKILLed and resumed under %s: tables, keys and indexes identical to one export", strings.Join(parts, ", "))
}

// killOnceCommitted starts export of [1, to] for j and SIGKILLs it once it
// has committed a few batches, returning the height it had reached.
func killOnceCommitted(t *testing.T, j job, to uint64) int64 {
	t.Helper()
	p := startProc(t, nil, j.args("export", 1, to)...)
	conn := pgtest.ConnectTo(t, j.dsn)
	defer conn.Close(context.Background())
	for {
		var h int64
		// The backfill's row, once the schema exists; polled, as the
		// sampler of sigkill_test.go polls.
		err := conn.QueryRow(context.Background(), `SELECT coalesce(max(last_height), 0) FROM cometbft.blockhaul_backfills`).Scan(&h)
		if err == nil && h >= 100 {
			if !p.kill() {
				t.Fatalf("the export ended before the kill (exit %d): the test does not reproduce a kill mid-fill", exitStatus(p.err))
			}
			return h
		}
		select {
		case <-p.done:
			t.Fatalf("the export ended before the kill (exit %d): %s", exitStatus(p.err), errorLine(p.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}
