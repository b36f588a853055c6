package staging

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// heldFlushFS holds every flush's output file (.sst, .blob) at Create until
// released, then refuses it with ENOSPC: a flush that waits on a full disk
// and then fails, again at each of Pebble's retries.
type heldFlushFS struct {
	vfs.FS
	started chan struct{} // closed at the first flush output
	release chan struct{}
	once    sync.Once
}

func (f *heldFlushFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") {
		f.once.Do(func() { close(f.started) })
		<-f.release
		return nil, &os.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
	}
	return f.FS.Create(name, c)
}

func (f *heldFlushFS) Unwrap() vfs.FS { return f.FS }

// stallSeen is a slog handler that closes stalled at Pebble's first write
// stall.
type stallSeen struct {
	stalled chan struct{}
	once    *sync.Once
}

func (h stallSeen) Enabled(context.Context, slog.Level) bool { return true }
func (h stallSeen) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "pebble write stall" {
		h.once.Do(func() { close(h.stalled) })
	}
	return nil
}
func (h stallSeen) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h stallSeen) WithGroup(string) slog.Handler      { return h }

// A commit that Pebble holds in a write stall behind a flush that then
// fails (out of space) returns the failure: Pebble itself would hold it
// forever, retrying the flush, and a fetch's writer waiting there left the
// whole job waiting with it, reporting nothing. The bound below is the
// test's: reaching it is that hang.
func TestCommitStuckBehindAFailedFlushReturns(t *testing.T) {
	// Not t.TempDir: the wedged Pebble is never closed, and its flush
	// goroutine may still touch the directory when the test ends.
	dir, err := os.MkdirTemp("", "staging-stuck-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fs := &heldFlushFS{FS: vfs.Default, started: make(chan struct{}), release: make(chan struct{})}
	seen := stallSeen{stalled: make(chan struct{}), once: new(sync.Once)}
	s := openBoundWith(t, dir, Options{fs: fs, MemTableSize: 1 << 20, MinFreeBytes: -1, Logger: slog.New(seen)}, chain.FamilyCometBFT, "test-1")
	// Commit until Pebble stalls the writer: the first memtable's flush
	// is held, the second fills, and the next commit waits for the flush.
	committed := make(chan error, 1)
	go func() {
		_, _, err := fillUntilError(t, s, 1, 1000)
		committed <- err
	}()
	select {
	case <-seen.stalled:
	case err := <-committed:
		t.Fatalf("1000 batches committed without a write stall (err %v): the test did not reach its case", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no write stall in 30 s")
	}
	<-fs.started
	close(fs.release) // the held flush fails: ENOSPC
	select {
	case err = <-committed:
	case <-time.After(30 * time.Second):
		t.Fatal("a commit held behind a failed flush did not return in 30 s")
	}
	var ns *NoSpaceError
	if !errors.As(err, &ns) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("commit behind a failed flush: %v, want a *NoSpaceError naming %s", err, dir)
	}
	// The store is broken; every call fails fast, Close does not wait.
	for name, call := range map[string]func() error{
		"mirror": func() error { return s.SetMirror("t", Checkpoint{Height: 1}) },
		"close":  func() error { return s.Close() },
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			var be *BrokenStoreError
			if !errors.As(err, &be) {
				t.Errorf("%s on the broken store: %v, want a *BrokenStoreError", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s on the broken store did not return in 10 s", name)
		}
	}
}
