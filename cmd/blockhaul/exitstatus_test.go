package main

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/syncbuf"
	"github.com/blockhaul/blockhaul/internal/testbin"
)

// The cases of docs/exit-status.md that a user meets off the tested path,
// each asserted on the built binary: one rule, the same from every command.

// A staging directory a command reads that is not there is exit 2 from
// every command, naming its flag or argument (status said "none" and exited
// 0, merge exited 1).
func TestExitStatusOfAMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	stg := filepath.Join(dir, "staging")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--staging", missing}, "--staging (BLOCKHAUL_STAGING): no staging directory"},
		{[]string{"verify", "--staging", missing}, "--staging (BLOCKHAUL_STAGING): no staging directory"},
		{[]string{"restore", missing, "--staging", stg}, "SRC: " + missing},
		{[]string{"merge", "--merge-from", missing, "--staging", stg}, "--merge-from (BLOCKHAUL_MERGE_FROM): no staging directory"},
	} {
		code, out := blockhaul(t, tc.args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, out)
		}
	}
	if _, err := os.Stat(stg); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused restore or merge left %s behind (%v)", stg, err)
	}
	// With --pg too: the directory is refused before the database is asked.
	dsn := pgtest.NewDatabase(t)
	code, out := blockhaul(t, "status", "--staging", missing, "--pg", dsn)
	if code != 2 || !strings.Contains(out, "--staging (BLOCKHAUL_STAGING): no staging directory") {
		t.Errorf("status --pg of a missing directory: exit %d, want 2:\n%s", code, out)
	}
}

// A path the process may not use (permission denied) is configuration,
// exit 2, from every command (it was 1: a runtime failure).
func TestExitStatusOfPermissionDenied(t *testing.T) {
	// A directory of its own, readable by the user the binary runs as
	// (t.TempDir's parents are the test user's alone).
	base, err := os.MkdirTemp("", "blockhaul-perm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o755) })
		os.RemoveAll(base)
	})
	bin := filepath.Join(base, "blockhaul")
	copyFile(t, binary, bin, 0o755)
	good := filepath.Join(base, "good")
	if code, out := blockhaul(t, "fetch", "--staging", good, "--from", "1", "--to", "20", "--progress-interval", "0"); code != 0 {
		t.Fatalf("fetch: exit %d:\n%s", code, out)
	}
	readOnly := filepath.Join(base, "ro")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	// The store's files are readable, none writable: merge cannot write
	// its own store beside it; status and verify read it (a reader takes
	// no Pebble lock and writes nothing), as from a read-only mount.
	must(t, filepath.Walk(good, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return os.Chmod(p, 0o555)
		}
		return os.Chmod(p, 0o444)
	}))
	must(t, os.Chmod(base, 0o755))
	for _, args := range [][]string{
		{"fetch", "--from", "1", "--to", "5", "--staging", filepath.Join(readOnly, "s")},
		{"merge", "--merge-from", good, "--staging", filepath.Join(base, "m")},
	} {
		cmd := exec.Command(bin, append(args, "--progress-interval", "0")...)
		cmd.Env = testbin.CleanEnv()
		if os.Geteuid() == 0 {
			// root may write anywhere: run as nobody.
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "permission denied") {
			t.Errorf("%q: %v, want exit 2 naming the permission denied:\n%s", args, err, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--staging", good}, "staged:   20 blocks in 1-20"},
		{[]string{"verify", "--staging", good}, "result: clean"},
	} {
		cmd := exec.Command(bin, append(tc.args, "--progress-interval", "0")...)
		cmd.Env = testbin.CleanEnv()
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%q on a store no file of which is writable: %v, want %q:\n%s", tc.args, err, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(good, "blockhaul.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a reader left blockhaul.pid: %v", err)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	must(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	must(t, err)
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	must(t, out.Close())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A flag the command does not use draws a warning and is ignored, its value
// unchecked; the variable of such a flag is ignored, unread (fetch warned
// that --batch-blocks had no effect and then refused its 0; estimate
// refused another command's variable). The command's own flags and
// variables are still checked.
func TestUnusedFlagsAndVariablesAreIgnored(t *testing.T) {
	dir := t.TempDir()
	stg := filepath.Join(dir, "staging")
	code, out := blockhaul(t, "fetch", "--batch-blocks", "0", "--staging", stg, "--from", "1", "--to", "5", "--progress-interval", "0")
	if code != 0 || !strings.Contains(out, "--batch-blocks has no effect on fetch") || strings.Contains(out, "invalid configuration") {
		t.Errorf("fetch --batch-blocks 0: exit %d, want 0 with the warning alone:\n%s", code, out)
	}
	// follow's --confirmations is not estimate's: its variable is ignored.
	code, out = blockhaulEnv(t, []string{"BLOCKHAUL_CONFIRMATIONS=abc"}, "estimate", "--staging", stg, "--from", "1", "--to", "100")
	if code != 0 || strings.Contains(out, "CONFIRMATIONS") {
		t.Errorf("BLOCKHAUL_CONFIRMATIONS=abc estimate: exit %d, want 0 with the variable ignored:\n%s", code, out)
	}
	// estimate --rpc probes the node with --fetch-workers requests in
	// flight: the flag is its own, and checked.
	code, out = blockhaulEnv(t, []string{"BLOCKHAUL_FETCH_WORKERS=abc"}, "estimate", "--staging", stg, "--from", "1", "--to", "100")
	if code != 2 || !strings.Contains(out, `--fetch-workers (BLOCKHAUL_FETCH_WORKERS): "abc"`) {
		t.Errorf("BLOCKHAUL_FETCH_WORKERS=abc estimate: exit %d, want 2 naming the variable:\n%s", code, out)
	}
	code, out = blockhaulEnv(t, []string{"BLOCKHAUL_FETCH_WORKERS=abc"}, "fetch", "--staging", stg, "--from", "1", "--to", "5")
	if code != 2 || !strings.Contains(out, `--fetch-workers (BLOCKHAUL_FETCH_WORKERS): "abc"`) {
		t.Errorf("BLOCKHAUL_FETCH_WORKERS=abc fetch: exit %d, want 2 naming the variable:\n%s", code, out)
	}
	code, out = blockhaul(t, "fetch", "--batch-blocks", "0", "--fetch-workers", "0", "--staging", stg, "--from", "1", "--to", "5")
	if code != 2 || !strings.Contains(out, "--fetch-workers") || strings.Contains(out, "--batch-blocks (") {
		t.Errorf("fetch --fetch-workers 0: exit %d, want 2 naming --fetch-workers alone:\n%s", code, out)
	}
}

// follow stopped by a signal exits 3 whether it was caught up or busy (it
// exited 0 when caught up): a stopped follow has not completed anything.
func TestFollowStoppedBySignalExitsInterrupted(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "staging")
	cmd := exec.Command(binary, "follow", "--pg", dsn, "--staging", stg, "--synthetic-seed", seed, "--synthetic-tip", "150",
		"--poll-interval", "50ms", "--batch-blocks", "50", "--progress-interval", "0", "--log-level", "info")
	cmd.Env = testbin.CleanEnv()
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	conn := connect(t, dsn)
	eventually(t, 2*time.Minute, "follow catches up with the tip (150)", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("follow exited (%v):\n%s", err, out.String())
		default:
		}
		return headHeight(t, conn) == 150
	})
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	err := <-exited
	exited <- err
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("follow caught up, then SIGTERM: %v, want exit 3:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), `level=WARN msg="follow interrupted by a signal`) {
		t.Errorf("the interruption is not logged as one:\n%s", out.String())
	}
}

// A database that never answered at the job's start is no transient fault:
// the job fails at once, exit 1, saying it did not retry (it retried for
// 41 s). Faults after a connection worked are still retried
// (pipeline's TestPG* retry tests).
func TestUnansweredDatabaseFailsAtOnce(t *testing.T) {
	// A port nothing listens on: bound, then closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stg := filepath.Join(t.TempDir(), "staging")
	code, out := blockhaul(t, "run", "--pg", "postgres://postgres@"+addr+"/postgres?sslmode=disable", "--staging", stg,
		"--from", "1", "--to", "10", "--progress-interval", "0")
	if code != 1 || !strings.Contains(out, "no server answered, so it is not retried") || strings.Contains(out, "retrying") {
		t.Fatalf("run against %s (nothing listening): exit %d, want 1 at once, no retries:\n%s", addr, code, out)
	}
}
