package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/testbin"
)

// The binary SIGKILLed at each named crash point (BLOCKHAUL_CRASHPOINT) —
// after a batch's COPY, before its commit, after its commit before the
// staging mirror, during the final index build — resumes at the first
// attempt to the tables of an uninterrupted run, every index valid.
func TestSIGKILLAtEachCrashPointResumesFirstTime(t *testing.T) {
	const from, to = 1, 600
	ref := referenceRun(t, from, to)
	want := fingerprint(t, ref)
	for _, spec := range []string{"after-copy:2", "before-commit:2", "after-commit:2", "mid-index-build:2", "mid-index-build:1:20ms"} {
		t.Run(spec, func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			stg := filepath.Join(t.TempDir(), "staging")
			cmd := exec.Command(binary, append(runArgs("run", dsn, stg, from, to), "--batch-blocks", "100")...)
			cmd.Env = append(testbin.CleanEnv(), "BLOCKHAUL_CRASHPOINT="+spec)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
				t.Fatalf("the run at %s was not killed: %v\n%s", spec, err, out.String())
			}
			if code, out := blockhaul(t, runArgs("run", dsn, stg, from, to)...); code != 0 {
				t.Fatalf("first resume after a kill at %s exited %d:\n%s", spec, code, out)
			}
			sameFingerprint(t, "after a kill at "+spec, fingerprint(t, dsn), want)
			conn := connect(t, dsn)
			var valid, invalid, pending int
			if err := conn.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE i.indisvalid), count(*) FILTER (WHERE NOT i.indisvalid),
	(SELECT count(*) FROM cometbft.blockhaul_deferred_indexes)
	FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = 'cometbft' AND c.relname LIKE '%_idx'`).Scan(&valid, &invalid, &pending); err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, tb := range cometbft.NewDecoder().Tables() {
				want += len(tb.Indexes)
			}
			if valid != want || invalid != 0 || pending != 0 {
				t.Fatalf("after the resume: %d valid, %d invalid secondary indexes, %d pending (want %d, 0, 0)", valid, invalid, pending, want)
			}
		})
	}
}

func TestCrashpointSpecIsChecked(t *testing.T) {
	for _, bad := range []string{"nowhere", "after-copy:0", "after-copy:x", "mid-index-build:1:soon", "after-copy:1:1s:9"} {
		if err := crashpoint.ArmFromEnv(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
