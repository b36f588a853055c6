package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/testbin"
)

// eventsPrint is the row count and an md5 over cometbft.events with its
// columns named, so that a table whose columns an upgrade appended compares
// equal to a fresh one.
func eventsPrint(t *testing.T, dsn string) string {
	t.Helper()
	conn := connect(t, dsn)
	var s string
	if err := conn.QueryRow(context.Background(), `SELECT count(*) || ' ' || md5(string_agg(md5(ROW(height, block_time, event_index, tx_index, tx_hash, source, type, attributes)::text), '' ORDER BY height, event_index))
	FROM cometbft.events`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReplaySIGKILLedResumes: export --replay of a table an older blockhaul
// filled (events without block_time and tx_hash), SIGKILLed after its
// second chunk commits, resumes at the next chunk and ends equal to a fresh
// export; the head stream's checkpoint is the same before and after.
func TestReplaySIGKILLedResumes(t *testing.T) {
	const from, to = 1, 600
	stg := filepath.Join(t.TempDir(), "staging")
	ref := pgtest.NewDatabase(t)
	if code, out := blockhaul(t, runArgs("run", ref, stg, from, to)...); code != 0 {
		t.Fatalf("reference run exited %d:\n%s", code, out)
	}
	want := eventsPrint(t, ref)
	dsn := pgtest.NewDatabase(t)
	if code, out := blockhaul(t, runArgs("follow", dsn, stg, from, to)...); code != 0 {
		t.Fatalf("follow exited %d:\n%s", code, out)
	}
	conn := connect(t, dsn)
	if _, err := conn.Exec(context.Background(), `ALTER TABLE cometbft.events DROP COLUMN block_time, DROP COLUMN tx_hash; DROP TABLE cometbft.blockhaul_schema_versions`); err != nil {
		t.Fatal(err)
	}
	replay := []string{"export", "--pg", dsn, "--staging", stg, "--replay", "events", "--batch-blocks", "100", "--progress-interval", "0", "--log-level", "warn"}
	cmd := exec.Command(binary, replay...)
	cmd.Env = append(testbin.CleanEnv(), "BLOCKHAUL_CRASHPOINT=after-commit:2")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("the replay was not killed: %v\n%s", err, out.String())
	}
	var last int64
	var status string
	if err := conn.QueryRow(context.Background(), `SELECT last_height, status FROM cometbft.blockhaul_replays WHERE alias = 'replay/events'`).Scan(&last, &status); err != nil {
		t.Fatal(err)
	}
	if last != 200 || status != "in_progress" {
		t.Errorf("after the kill the replay's row is at %d, %s; want 200, in_progress", last, status)
	}
	if code, out := blockhaul(t, replay...); code != 0 {
		t.Fatalf("resumed replay exited %d:\n%s", code, out)
	} else if !strings.Contains(out, "replayed: events through height 600 (no checkpoint moves in a replay)") || strings.Contains(out, "checkpoint: height") {
		t.Errorf("the resumed replay's summary does not say what it replayed, or claims a checkpoint:\n%s", out)
	}
	if got := eventsPrint(t, dsn); got != want {
		t.Errorf("events after the resumed replay: %s, want %s (a fresh export's)", got, want)
	}
	var head int64
	if err := conn.QueryRow(context.Background(), `SELECT height FROM cometbft.blockhaul_checkpoints WHERE stream = 'head'`).Scan(&head); err != nil || head != to {
		t.Errorf("head checkpoint %d (%v), want %d", head, err, to)
	}
}
