package staging

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestHelperHoldsStore is not a test: re-executed by
// TestSecondProcessIsToldWhoHoldsTheStore, it opens the store named by
// STAGING_HOLD_DIR, says so on stdout, and holds it until stdin closes.
func TestHelperHoldsStore(t *testing.T) {
	dir := os.Getenv("STAGING_HOLD_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	s, err := Open(dir, Options{})
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
// the store; it holds it until stdin is closed, or it is killed (at the
// test's end at the latest).
func startHolder(t *testing.T, dir string) (*exec.Cmd, io.Closer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsStore$")
	cmd.Env = append(os.Environ(), "STAGING_HOLD_DIR="+dir)
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
