package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

type dataErr struct{}

func (dataErr) Error() string { return "bad record" }
func (dataErr) Fault() Class  { return Data }

func TestOfReadsTheOutermostMark(t *testing.T) {
	timeout := &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name string
		err  error
		want Class
		exit int
	}{
		{"typed", fmt.Errorf("export: %w", dataErr{}), Data, 4},
		{"marked", Mark(errors.New("no such flag"), Config), Config, 2},
		{"marked over typed", Mark(fmt.Errorf("wrap: %w", dataErr{}), Config), Config, 2},
		{"errorf", Errorf(Data, "height %d: %w", 5, io.EOF), Data, 4},
		{"canceled", fmt.Errorf("stop: %w", context.Canceled), Interrupted, 3},
		{"caller's deadline", context.DeadlineExceeded, Failed, 1},
		{"network timeout", timeout, Transient, 1},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, Transient, 1},
		{"cut body", io.ErrUnexpectedEOF, Transient, 1},
		{"unsound", Mark(errors.New("hash"), Unsound), Unsound, 4},
		{"plain", errors.New("boom"), Failed, 1},
		{"permission denied", fmt.Errorf("staging: open: %w", &os.PathError{Op: "mkdir", Path: "/x", Err: syscall.EACCES}), Config, 2},
		{"spent transient", Spent(timeout, 6), Failed, 1},
		{"spent unsound", Spent(Mark(errors.New("hash"), Unsound), 6), Data, 4},
	} {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("%s: Of = %v, want %v", tc.name, got, tc.want)
		}
		if got := ExitStatus(tc.err); got != tc.exit {
			t.Errorf("%s: ExitStatus = %d, want %d", tc.name, got, tc.exit)
		}
	}
	if ExitStatus(nil) != ExitComplete || Retryable(nil) {
		t.Error("nil is not complete, or is retryable")
	}
}

func TestMarksKeepTheChain(t *testing.T) {
	base := dataErr{}
	err := Spent(Mark(fmt.Errorf("fetch: %w", base), Transient), 3)
	var d dataErr
	if !errors.As(err, &d) || !errors.Is(err, base) {
		t.Fatalf("%v: the chain is lost", err)
	}
	if err.Error() != "fetch: bad record (after 3 attempts)" {
		t.Fatalf("message %q", err.Error())
	}
	if n, ok := Attempts(fmt.Errorf("span: %w", err)); !ok || n != 3 {
		t.Fatalf("Attempts = %d %v, want 3", n, ok)
	}
	if _, ok := Attempts(base); ok {
		t.Fatal("an error that spent nothing reports attempts")
	}
	if Retryable(err) || !Retryable(Mark(base, Transient)) || !Retryable(Mark(base, Unsound)) {
		t.Fatal("Retryable: a spent budget must not be retried; transient and unsound must")
	}
	if Mark(nil, Data) != nil || Spent(nil, 2) != nil {
		t.Fatal("marking nil gives an error")
	}
}
