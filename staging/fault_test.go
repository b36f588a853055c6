package staging

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/storetest"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// smallFS is the real filesystem with a capacity: writes past it fail with
// ENOSPC, as on a full disk, and GetDiskUsage reports what is left (or, with
// lie set, plenty, so that the free-space reserve cannot see it coming and
// Pebble meets ENOSPC itself).
type smallFS struct {
	vfs.FS
	mu      sync.Mutex
	limit   int64
	written int64
	lie     bool
	refuse  func(name string) bool // which files fail once full; nil: all
	refused chan struct{}          // closed at the first refused write
	once    sync.Once
}

func newSmallFS(limit int64) *smallFS {
	return &smallFS{FS: vfs.Default, limit: limit, refused: make(chan struct{})}
}

func (f *smallFS) setLimit(n int64) { f.mu.Lock(); f.limit = n; f.mu.Unlock() }

// take accounts for n bytes written to file name, or refuses them.
func (f *smallFS) take(name string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil && !f.refuse(name) {
		return nil // neither refused nor counted
	}
	if f.written+int64(n) > f.limit {
		f.once.Do(func() { close(f.refused) })
		return syscall.ENOSPC
	}
	f.written += int64(n)
	return nil
}

func (f *smallFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &smallFile{File: file, fs: f, name: name}, nil
}

func (f *smallFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return f.wrap(name, file, err)
}

func (f *smallFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	return f.wrap(name, file, err)
}

func (f *smallFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(old, name, c)
	return f.wrap(name, file, err)
}

func (f *smallFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lie {
		return vfs.DiskUsage{AvailBytes: 1 << 40, TotalBytes: 1 << 40}, nil
	}
	free := max(f.limit-f.written, 0)
	return vfs.DiskUsage{AvailBytes: uint64(free), TotalBytes: uint64(f.limit), UsedBytes: uint64(f.written)}, nil
}

func (f *smallFS) Unwrap() vfs.FS { return f.FS }

type smallFile struct {
	vfs.File
	fs   *smallFS
	name string
}

func (f *smallFile) Write(p []byte) (int, error) {
	if err := f.fs.take(f.name, len(p)); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: err}
	}
	return f.File.Write(p)
}

func (f *smallFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.take(f.name, len(p)); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: err}
	}
	return f.File.WriteAt(p, off)
}

// bigBlock is a block with a record of n bytes that barely compress.
func bigBlock(h uint64, n int) chain.Block {
	b := testBlock(h)
	b.Raw = noise(h, n)
	return b
}

// fillUntilError commits batches of 16 blocks of 16 KiB from height from on
// until a commit fails, returning the heights committed, the failed batch's
// heights and the error. A panic fails the test.
func fillUntilError(t *testing.T, s *Store, from uint64, maxBatches int) (committed, failed []uint64, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic escaped the staging store: %v", r)
		}
	}()
	b := s.NewBatch()
	defer b.Close()
	h := from
	for i := 0; i < maxBatches; i++ {
		var batch []uint64
		for j := 0; j < 16; j++ {
			if err := b.Put(bigBlock(h, 16<<10)); err != nil {
				return committed, batch, err
			}
			batch = append(batch, h)
			h++
		}
		if err := b.Commit(); err != nil {
			return committed, batch, err
		}
		committed = append(committed, batch...)
	}
	return committed, nil, nil
}

// checkWhole asserts that every record staged in s reads back intact and
// that the staged heights are exactly 1..k for some k that ends a batch of
// 16: nothing half-written, no hole. want is the least k (the heights whose
// commit was durable); max the most (every height ever given to a batch).
func checkWhole(t *testing.T, s *Store, want, max uint64) {
	t.Helper()
	it, err := s.Scan(0, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var n uint64
	for it.Next() {
		b := it.Block()
		n++
		if b.Height != n {
			t.Fatalf("staged heights have a hole: %d follows %d", b.Height, n-1)
		}
		if !bytes.Equal(b.Raw, bigBlock(b.Height, 16<<10).Raw) {
			t.Fatalf("height %d reads back different bytes", b.Height)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if n%16 != 0 || n < want || n > max {
		t.Fatalf("store holds heights 1-%d, want a whole number of batches of 16 in [%d, %d]", n, want, max)
	}
}

// The reserve refuses a batch before Pebble sees it: a *NoSpaceError naming
// the directory and the bytes, nothing of the batch written, the store still
// usable, and once space is freed the same batch commits.
func TestFullDiskStopsAtReserve(t *testing.T) {
	dir := t.TempDir()
	fs := newSmallFS(12 << 20)
	s := openBoundWith(t, dir, Options{fs: fs, MemTableSize: 1 << 20, MinFreeBytes: 2 << 20}, chain.FamilyCometBFT, "test-1")
	defer s.Close()
	committed, failed, err := fillUntilError(t, s, 1, 1000)
	var ns *NoSpaceError
	if !errors.As(err, &ns) {
		t.Fatalf("after %d heights: err = %v, want a *NoSpaceError", len(committed), err)
	}
	if ns.Err != nil {
		t.Fatalf("Pebble met ENOSPC (%v): the reserve should have refused the batch first", ns.Err)
	}
	msg := err.Error()
	for _, want := range []string{dir, "no space left", fmt.Sprint(ns.Free), fmt.Sprint(ns.Need)} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if !errors.Is(err, syscall.ENOSPC) || ns.Need <= ns.Free {
		t.Errorf("error %v: Is(ENOSPC)=%v, need %d free %d", err, errors.Is(err, syscall.ENOSPC), ns.Need, ns.Free)
	}
	if len(committed) == 0 {
		t.Fatal("nothing committed before the disk filled")
	}
	// Still usable: reads and the missing-heights query answer.
	checkWhole(t, s, uint64(len(committed)), uint64(len(committed)))
	if _, err := s.Get(failed[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("height %d of the refused batch: %v, want not found", failed[0], err)
	}
	// Space freed: the run resumes where it stopped.
	fs.setLimit(1 << 30)
	more, _, err := fillUntilError(t, s, failed[0], 4)
	if err != nil {
		t.Fatalf("after space was freed: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openDir(t, dir)
	defer s2.Close()
	n := uint64(len(committed) + len(more))
	checkWhole(t, s2, n, n)
}

// When Pebble itself meets ENOSPC (the reserve is blinded), its WAL writer
// panics inside the commit pipeline. The panic is contained: Commit returns
// a *NoSpaceError, every later call fails fast instead of hanging, Close
// returns, and the files hold only whole batches.
//
// Two paths: the WAL write fails (Pebble panics in the committing
// goroutine, its commit pipeline locked for good), or a flush fails (Pebble
// retries it forever in the background).
func TestENOSPCInPebbleIsContained(t *testing.T) {
	t.Run("wal", func(t *testing.T) {
		if os.Getenv(enospcChildEnv) != "" {
			testENOSPCInPebble(t, true)
			return
		}
		runENOSPCWALChild(t)
	})
	t.Run("flush", func(t *testing.T) { testENOSPCInPebble(t, false) })
}

// enospcChildEnv marks the child process that runs the "wal" case, and
// carries the WAL byte count at which its writes start to fail.
const enospcChildEnv = "BLOCKHAUL_TEST_ENOSPC_WAL_AT"

// runENOSPCWALChild runs the "wal" case in a child process. The WAL writer
// fails asynchronously: when its refused write is first met by a WAL
// rotation instead of a commit (a matter of scheduling on a loaded machine),
// Pebble panics with its mutex unlocked and the deferred unlock is a fatal
// runtime error no recover can stop — the case only the free-space reserve
// prevents (TestReserveRefusesBeforePebbleSeesENOSPC). That fatal ends the
// child, not the suite; the case is tried again with the failure placed
// elsewhere in the memtable, and must be contained in at least one of three
// tries. Any other failure fails at once.
func runENOSPCWALChild(t *testing.T) {
	var last []byte
	for _, at := range []int{12 << 20, 5 << 20, 22 << 20} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestENOSPCInPebbleIsContained$/^wal$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", enospcChildEnv, at))
		out, err := cmd.CombinedOutput()
		if err == nil {
			if !bytes.Contains(out, []byte("--- PASS: TestENOSPCInPebbleIsContained/wal")) {
				t.Fatalf("the child ran no wal case:\n%s", out)
			}
			return
		}
		if bytes.Contains(out, []byte("unlock of unlocked mutex")) && bytes.Contains(out, []byte("rotateWAL")) {
			t.Logf("WAL failing at %d bytes was met by a WAL rotation (Pebble's unrecoverable case); trying elsewhere", at)
			last = out
			continue
		}
		t.Fatalf("wal case failed (WAL failing at %d bytes): %v\n%s", at, err, out)
	}
	t.Fatalf("every try was met by a WAL rotation; last output:\n%s", last)
}

func testENOSPCInPebble(t *testing.T, wal bool) {
	// Not t.TempDir: the wedged Pebble is never closed, and its flush
	// goroutine may still write there when the test ends.
	dir, err := os.MkdirTemp("", "staging-enospc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fs := newSmallFS(1 << 40)
	fs.lie = true
	// wal: only the WAL fails, 12 MiB into it (or where the child is told):
	// in the middle of a memtable (Pebble's grow from 256 KiB, doubling), so
	// that the failure is usually met by a WAL write, not by a WAL rotation. At a rotation Pebble panics with
	// its mutex unlocked, and the deferred unlock is a fatal runtime error
	// that no recover can stop: only the reserve prevents that one.
	// flush: only flush output fails, at once.
	memtable := uint64(64 << 20)
	if !wal {
		memtable = 1 << 20
	}
	s := openBoundWith(t, dir, Options{fs: fs, MemTableSize: memtable}, chain.FamilyCometBFT, "test-1")
	var committed, failed []uint64
	if wal {
		fs.refuse = func(name string) bool { return strings.HasSuffix(name, ".log") }
		at, perr := strconv.Atoi(os.Getenv(enospcChildEnv))
		if perr != nil {
			t.Fatalf("%s: %v", enospcChildEnv, perr)
		}
		fs.setLimit(int64(at))
		committed, failed, err = fillUntilError(t, s, 1, 1000)
	} else {
		fs.refuse = func(name string) bool { return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") }
		fs.setLimit(0)
		// Commit until a commit fails or a flush has been refused; in the
		// latter case wait (bounded) for the store to record the background
		// failure, and commit once more.
		h := uint64(1)
		for err == nil && h < 1<<20 {
			select {
			case <-fs.refused:
				select {
				case <-s.faults.failed:
				case <-time.After(10 * time.Second):
					t.Fatal("a refused flush did not break the store in 10 s")
				}
				_, failed, err = fillUntilError(t, s, h, 1)
				if err == nil {
					t.Fatal("commit after a failed flush succeeded")
				}
			default:
				var c []uint64
				c, failed, err = fillUntilError(t, s, h, 1)
				committed = append(committed, c...)
				h += 16
			}
		}
	}
	var ns *NoSpaceError
	if !errors.As(err, &ns) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("after %d heights: err = %v, want a *NoSpaceError naming %s", len(committed), err, dir)
	}
	t.Logf("Pebble met ENOSPC after %d heights: %v", len(committed), err)
	// Fail fast, never hang: each call runs under a bound.
	calls := map[string]func() error{
		"get":     func() error { _, err := s.Get(committed[0]); return err },
		"missing": func() error { _, err := s.Missing(1, 100); return err },
		"commit": func() error {
			b := s.NewBatch()
			defer b.Close()
			if err := b.Put(bigBlock(1<<20, 10)); err != nil {
				return err
			}
			return b.Commit()
		},
		"mirror": func() error { return s.SetMirror("t", Checkpoint{Height: 1}) },
		"flush":  func() error { return s.Flush() },
		"close":  func() error { return s.Close() },
	}
	for _, name := range []string{"get", "missing", "commit", "mirror", "flush", "close"} {
		done := make(chan error, 1)
		go func() { done <- calls[name]() }()
		select {
		case err := <-done:
			var be *BrokenStoreError
			if !errors.As(err, &be) || !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("%s on the broken store: %v, want a *BrokenStoreError wrapping ENOSPC", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s on the broken store did not return in 10 s", name)
		}
	}
	// The files as the process would leave them: copy them (the wedged
	// Pebble keeps its in-process lock) and open the copy. Commits are not
	// synced, and Pebble writes the WAL behind them: batches committed
	// before the failure may be lost (fetch stages them again), but only
	// whole batches, from the end.
	cp := t.TempDir()
	storetest.CopyFiles(t, dir, cp)
	// Let the abandoned Pebble's retried flush succeed, or it spins.
	fs.setLimit(1 << 40)
	s2 := openDir(t, cp)
	defer s2.Close()
	checkWhole(t, s2, 0, uint64(len(committed)+len(failed)))
}

// A real small filesystem (tmpfs, 8 MiB), when this process may mount one:
// the run stops at the reserve with a named error, a read-write open of
// the full store is refused rather than hanging in Pebble's retried
// flush, a read-only open (status) answers, and once space is freed the
// run resumes.
func TestTmpfsFillsUp(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); TestFullDiskStopsAtReserve covers the same through an injected filesystem", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	dir := filepath.Join(mnt, "staging")
	junk := filepath.Join(mnt, "junk")
	if err := os.WriteFile(junk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{MemTableSize: 1 << 20, MinFreeBytes: 4 << 20} // four memtables, as the default
	s := openBoundWith(t, dir, opts, chain.FamilyCometBFT, "test-1")
	committed, failed, err := fillUntilError(t, s, 1, 1000)
	var ns *NoSpaceError
	if !errors.As(err, &ns) || ns.Err != nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("after %d heights: %v, want the reserve's *NoSpaceError naming %s", len(committed), err, dir)
	}
	t.Logf("stopped after %d heights: %v", len(committed), err)
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Fill what is left, as another writer on the disk would.
	f, err := os.OpenFile(junk, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	f.Write(make([]byte, 4<<10))
	f.Close()
	if _, err := Open(dir, opts); !errors.As(err, &ns) {
		t.Fatalf("read-write open of the full store: %v, want a *NoSpaceError", err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of the full store: %v", err)
	}
	checkWhole(t, ro, uint64(len(committed)), uint64(len(committed)))
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(junk); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("open after space was freed: %v", err)
	}
	defer s.Close()
	more, _, err := fillUntilError(t, s, failed[0], 2)
	if err != nil {
		t.Fatalf("resume after space was freed: %v", err)
	}
	n := uint64(len(committed) + len(more))
	checkWhole(t, s, n, n)
}
