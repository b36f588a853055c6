package staging

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestHelperHoldsStore is not a test: re-executed by
// TestSecondProcessIsToldWhoHoldsTheStore, it opens the store named by
// STAGING_HOLD_DIR (read-only when STAGING_HOLD_READONLY is set, with
// Pebble alone when STAGING_HOLD_PEBBLE is), says so on stdout, and holds
// it until stdin closes.
func TestHelperHoldsStore(t *testing.T) {
	dir := os.Getenv("STAGING_HOLD_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	var s io.Closer
	var err error
	if os.Getenv("STAGING_HOLD_PEBBLE") != "" {
		// Pebble's lock alone, as a writer of an older blockhaul holds it.
		s, err = pebble.Open(dir, &pebble.Options{})
	} else {
		s, err = Open(dir, Options{ReadOnly: os.Getenv("STAGING_HOLD_READONLY") != ""})
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("holding", os.Getpid())
	bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
	if err := s.Close(); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startHolder starts TestHelperHoldsStore on dir and waits until it holds
// the store open for writing; it holds it until stdin is closed, or it is
// killed (at the test's end at the latest).
func startHolder(t *testing.T, dir string) (*exec.Cmd, io.Closer) {
	t.Helper()
	return startHolderEnv(t, dir)
}

// startReader is startHolder with the store open read-only.
func startReader(t *testing.T, dir string) (*exec.Cmd, io.Closer) {
	t.Helper()
	return startHolderEnv(t, dir, "STAGING_HOLD_READONLY=1")
}

func startHolderEnv(t *testing.T, dir string, env ...string) (*exec.Cmd, io.Closer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsStore$")
	cmd.Env = append(append(os.Environ(), "STAGING_HOLD_DIR="+dir), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "holding ") {
		t.Fatalf("helper: %q, %v", line, err)
	}
	return cmd, stdin
}

// A second process opening a staging directory in use is told that another
// blockhaul process holds it, and which, instead of "resource temporarily
// unavailable"; once the holder exits, the directory opens.
func TestSecondProcessIsToldWhoHoldsTheStore(t *testing.T) {
	dir := t.TempDir()
	cmd, stdin := startHolder(t, dir)
	for _, ro := range []bool{false, true} {
		_, err := Open(dir, Options{ReadOnly: ro})
		var iu *InUseError
		if !errors.As(err, &iu) || iu.PID != cmd.Process.Pid || !errors.Is(err, syscall.EAGAIN) {
			t.Fatalf("open (read-only %v) while pid %d holds it: %v, want an *InUseError naming that pid", ro, cmd.Process.Pid, err)
		}
		msg := err.Error()
		for _, want := range []string{dir, "in use by another blockhaul process", fmt.Sprintf("pid %d", cmd.Process.Pid)} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not say %q", msg, want)
			}
		}
		if ro {
			t.Logf("second process: %v", err)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open after the holder exited: %v", err)
	}
	s.Close()
}

// Pebble's lock is per process too: a second Store on the same directory in
// one process is refused the same way, naming this process.
func TestSecondOpenInOneProcess(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	defer s.Close()
	_, err := Open(dir, Options{})
	var iu *InUseError
	if !errors.As(err, &iu) || iu.PID != os.Getpid() || !strings.Contains(err.Error(), "in use by this process") {
		t.Fatalf("second open: %v, want an *InUseError naming this process", err)
	}
}

// Holder names the process that holds a store, and sees it gone as soon as
// it is killed, though its PID file is left behind; within one process it
// sees this process's own open store, and its closing.
func TestHolderSeesAKilledHolderGone(t *testing.T) {
	dir := t.TempDir()
	if pid, held := Holder(dir); held {
		t.Fatalf("an empty directory is held by pid %d", pid)
	}
	cmd, _ := startHolder(t, dir)
	if pid, held := Holder(dir); !held || pid != cmd.Process.Pid {
		t.Fatalf("while pid %d holds it: Holder says pid %d, held %v", cmd.Process.Pid, pid, held)
	}
	if !ProcessAlive(cmd.Process.Pid) {
		t.Fatalf("the helper (pid %d) is not alive", cmd.Process.Pid)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(dir + "/" + pidFile); err != nil {
		t.Fatalf("the killed holder's PID file: %v (the test means a holder that left it)", err)
	}
	if pid, held := Holder(dir); held {
		t.Fatalf("after the holder was killed: Holder says held by pid %d", pid)
	}
	if ProcessAlive(cmd.Process.Pid) {
		t.Fatalf("the killed helper (pid %d) is alive", cmd.Process.Pid)
	}
	s := openDir(t, dir)
	if pid, held := Holder(dir); !held || pid != os.Getpid() {
		t.Fatalf("open in this process: Holder says pid %d, held %v", pid, held)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if pid, held := Holder(dir); held {
		t.Fatalf("after Close: held by pid %d", pid)
	}
}

// stagedDir is a directory holding a closed store with heights 1-10.
func stagedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	w := openBound(t, dir)
	putBig(t, w, 1, 10)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wantInUse fails the test unless err is an *InUseError naming pid.
func wantInUse(t *testing.T, what string, err error, pid int) {
	t.Helper()
	var iu *InUseError
	if !errors.As(err, &iu) || iu.PID != pid || !strings.Contains(err.Error(), "is in use by") {
		t.Fatalf("%s: %v, want an *InUseError naming pid %d", what, err, pid)
	}
}

// Read-only opens of one store share it, in one process: each reads it,
// none writes a file into the directory (no PID file) or leaves one; a
// writer is refused while any of them has it open, naming this process,
// and opens once they are closed; a reader is refused beside that writer.
func TestReadersShareTheStore(t *testing.T) {
	dir := stagedDir(t)
	before := names(t, dir)
	var readers []*Store
	for i := range 3 {
		r, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only open %d beside %d others: %v", i+1, i, err)
		}
		readers = append(readers, r)
	}
	for i, r := range readers {
		if b, err := r.Get(7); err != nil || b.Height != 7 {
			t.Fatalf("reader %d: get 7: %v", i+1, err)
		}
	}
	if got := names(t, dir); !slices.Equal(got, before) {
		t.Errorf("with readers open the directory holds %v, before %v", got, before)
	}
	_, err := Open(dir, Options{})
	wantInUse(t, "open for writing beside readers", err, os.Getpid())
	for _, r := range readers {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(t, dir); !slices.Equal(got, before) {
		t.Errorf("after the readers closed the directory holds %v, before %v", got, before)
	}
	w := openDir(t, dir)
	defer w.Close()
	_, err = Open(dir, Options{ReadOnly: true})
	wantInUse(t, "read-only open beside a writer", err, os.Getpid())
}

// Readers in two processes share a store; a writer is refused beside a
// reader of another process, naming it where the system says who holds a
// lock (Linux), and opens once it has exited. The reader leaves no PID
// file, and a reader refused beside a writer leaves the writer's.
func TestReadersInTwoProcesses(t *testing.T) {
	dir := stagedDir(t)
	cmd, stdin := startReader(t, dir)
	r, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open beside a reader in pid %d: %v", cmd.Process.Pid, err)
	}
	if b, err := r.Get(3); err != nil || b.Height != 3 {
		t.Fatalf("get 3 beside another reader: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	want := cmd.Process.Pid
	if runtime.GOOS != "linux" {
		want = 0
	}
	_, err = Open(dir, Options{})
	wantInUse(t, "open for writing beside a reader in another process", err, want)
	if _, err := os.Stat(filepath.Join(dir, pidFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("with a reader open, the PID file: %v, want none", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("reader: %v", err)
	}

	cmd, stdin = startHolder(t, dir)
	_, err = Open(dir, Options{ReadOnly: true})
	wantInUse(t, "read-only open beside a writer in another process", err, cmd.Process.Pid)
	if pid, _ := os.ReadFile(filepath.Join(dir, pidFile)); strings.TrimSpace(string(pid)) != fmt.Sprint(cmd.Process.Pid) {
		t.Errorf("after a refused reader, the writer's PID file says %q, want %d", pid, cmd.Process.Pid)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	s := openDir(t, dir)
	s.Close()
}

// A writer of an older blockhaul takes Pebble's lock alone: a reader is
// refused beside it all the same, naming it.
func TestReaderRefusedBesidePebblesLock(t *testing.T) {
	dir := stagedDir(t)
	cmd, _ := startHolderEnv(t, dir, "STAGING_HOLD_PEBBLE=1")
	_, err := Open(dir, Options{ReadOnly: true})
	wantInUse(t, "read-only open beside Pebble's lock", err, cmd.Process.Pid)
}
