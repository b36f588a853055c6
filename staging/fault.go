package staging

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/cockroachdb/pebble/v2"
)

// A damaged store (a bad Pebble file, a full disk) must be a named error,
// never a panic and never a hang. Pebble reports such trouble in three ways,
// and each is contained here, at the staging boundary:
//
//   - a returned error, wrapped as *CorruptStoreError when Pebble says it is
//     corruption (pebble.IsCorruptionError);
//   - Options.Logger.Fatalf (a corrupt sstable, a fatal commit error) and
//     EventListener.DataCorruption/BackgroundError, which may run on
//     Pebble's own goroutines: they record the failure and never panic;
//   - a panic on the caller's goroutine (a failed WAL write panics inside
//     the commit pipeline, with its mutex held): every Store method that
//     calls Pebble recovers it and returns an error.
//
// After a fatal failure the store is broken: every later call fails fast
// with a *BrokenStoreError, and Close does not wait for a Pebble that can no
// longer close.

// CorruptStoreError reports a damaged staging store: a Pebble file that
// fails its checksums or cannot be read, or records lost from what was
// durably staged. File is the damaged file's name when Pebble names it;
// Heights is the range of heights affected, when it can be known.
// Refetching the affected heights replaces unreadable records.
type CorruptStoreError struct {
	Dir     string
	File    string
	Heights *Range
	Err     error
	// Other are the other runs of unreadable records found in the files
	// that hold Heights' (removed with them when Dropped); Unchecked says
	// those files hold more records than were read for it: repair finds
	// the rest.
	Other     []Range
	Unchecked bool
	// Dropped is set when the unreadable records of Heights and Other
	// were removed from the store, so that a fetch of those heights stages
	// them again.
	Dropped bool
	// Kept is set when they were found but left in place (a store opened
	// with KeepDamage): repair removes and refetches them.
	Kept bool
}

// heights lists Heights and Other in order.
func (e *CorruptStoreError) heights() string {
	rs := append([]Range{*e.Heights}, e.Other...)
	slices.SortFunc(rs, func(a, b Range) int { return cmp.Compare(a.From, b.From) })
	var ss []string
	for _, r := range rs {
		ss = append(ss, r.String())
	}
	return strings.Join(ss, ", ")
}

func (e *CorruptStoreError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "staging: %s is damaged", e.Dir)
	if e.File != "" {
		fmt.Fprintf(&b, ": file %s", e.File)
	}
	if e.Heights != nil {
		fmt.Fprintf(&b, " (heights %s)", e.heights())
	}
	if e.Err != nil {
		// Pebble's corruption errors carry a second line of detail.
		msg, _, _ := strings.Cut(e.Err.Error(), "\n")
		fmt.Fprintf(&b, ": %s", msg)
	}
	if e.Kept {
		fmt.Fprintf(&b, "; staging is left as it is (this command only reads it): blockhaul repair --staging %s removes the damaged records and fetches them again (run, which fetches, does too)", e.Dir)
	}
	if e.Dropped {
		fmt.Fprintf(&b, "; the unreadable records were removed: fetch heights %s again", e.heights())
		if e.Unchecked {
			fmt.Fprintf(&b, "; the damaged files hold more records than were read: blockhaul repair --staging %s reads every record and refetches all the damage", e.Dir)
		}
	}
	return b.String()
}

// Fault marks the error as data that is wrong (exit 4): a damaged store.
func (e *CorruptStoreError) Fault() fault.Class { return fault.Data }

func (e *CorruptStoreError) Unwrap() error { return e.Err }

// NoSpaceError reports that the store's filesystem has too little free
// space for the next write. It is returned before Pebble is given the write
// (the free-space reserve), or when Pebble itself met ENOSPC. Nothing of the
// refused write is staged; once space is freed the job can be run again.
type NoSpaceError struct {
	Dir        string
	Free, Need uint64 // bytes available, bytes the write needed (reserve included)
	Err        error  // Pebble's error when Pebble met ENOSPC; nil for the reserve
}

func (e *NoSpaceError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("staging: %s: no space left on device: %v; free space and run again", e.Dir, e.Err)
	}
	return fmt.Sprintf("staging: %s: no space left: %d bytes free, %d needed (the write and the free-space reserve); free space and run again", e.Dir, e.Free, e.Need)
}

func (e *NoSpaceError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return syscall.ENOSPC
}

// BrokenStoreError is returned by every call on a store after a fatal
// failure (Err) left Pebble unusable. Reopen the store (a new process) once
// the cause is fixed.
type BrokenStoreError struct {
	Dir string
	Err error
}

func (e *BrokenStoreError) Error() string {
	return fmt.Sprintf("staging: %s cannot be used after an earlier failure: %v", e.Dir, e.Err)
}

func (e *BrokenStoreError) Unwrap() error { return e.Err }

// faults is what Pebble reported about one store, shared by the Store and
// the logger and event listener it hands to Pebble (which may call them
// from any goroutine).
type faults struct {
	dir string

	mu       sync.Mutex
	failed   chan struct{} // closed when fatal is set
	fatal    error         // the first failure that made the store unusable
	wedged   bool          // the commit pipeline is stuck: db.Close would hang
	corrupt  *pebble.DataCorruptionInfo
	bgErrors int
}

// fail records err as fatal unless a failure is already recorded.
func (f *faults) fail(err error, wedged bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal == nil {
		f.fatal = err
		close(f.failed)
	}
	f.wedged = f.wedged || wedged
}

// abandon marks the commit pipeline stuck: a write was left waiting inside
// Pebble (see Store.write), so Close must not wait for it.
func (f *faults) abandon() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wedged = true
}

// broken returns a *BrokenStoreError once a fatal failure is recorded.
func (f *faults) broken() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal == nil {
		return nil
	}
	return &BrokenStoreError{Dir: f.dir, Err: f.fatal}
}

func (f *faults) isWedged() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wedged
}

// backgroundError records a failed flush or compaction. Out of space, a
// flush retries forever and Close would wait for it: the store is broken.
// Corruption is left to the reads that meet it, which name it.
func (f *faults) backgroundError(err error) {
	if errors.Is(err, syscall.ENOSPC) {
		f.fail(&NoSpaceError{Dir: f.dir, Err: err}, true)
	}
}

func (f *faults) dataCorruption(info pebble.DataCorruptionInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.corrupt = &info
}

// corruption returns the last corruption Pebble reported, if any.
func (f *faults) corruption() (file string, heights *Range) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.corrupt == nil {
		return "", nil
	}
	return filepath.Base(f.corrupt.Path), boundsHeights(f.corrupt.Bounds.Start, f.corrupt.Bounds.End.Key)
}

// boundsHeights converts Pebble user-key bounds to the heights they cover,
// when both ends are block or index keys.
func boundsHeights(lo, hi []byte) *Range {
	isHeight := func(k []byte) bool { return len(k) == 9 && (k[0] == prefixBlock || k[0] == prefixIndex) }
	if !isHeight(lo) || !isHeight(hi) {
		return nil
	}
	return &Range{From: keyHeight(lo), To: keyHeight(hi)}
}

// corruptErr wraps a Pebble error about one read as a *CorruptStoreError
// when Pebble says it is corruption; h, if not nil, is the height read.
func (s *Store) corruptErr(err error, h *uint64) error {
	if err == nil || !pebble.IsCorruptionError(err) {
		return err
	}
	var ce *CorruptStoreError
	if errors.As(err, &ce) {
		return err
	}
	file, heights := s.faults.corruption()
	if file == "" {
		file = s.fileNamed(err)
	}
	if h != nil {
		heights = &Range{From: *h, To: *h}
	}
	return &CorruptStoreError{Dir: s.dir, File: file, Heights: heights, Err: err}
}

// sizeMismatch is Pebble's consistency check at Open finding a table whose
// size on disk is not the one its MANIFEST recorded (a truncated or
// extended .sst): "L0: 000010: object size mismatch (dir/000010.sst): 99904
// (disk) != 199808 (MANIFEST)". Pebble does not mark it as corruption; the
// match is on the whole shape of that message, not on a word of it. The
// submatch is the file's path.
var sizeMismatch = regexp.MustCompile(`object size mismatch \(([^()]+)\): [0-9]+ \((?:disk|provider)\) != [0-9]+ \(MANIFEST\)`)

var pebbleFileRef = regexp.MustCompile(`(?:file |")(MANIFEST-)?0*([0-9]+)`)

// damagedOnOpen reports whether pebble.Open failed because the store's
// files are damaged: a corrupt or malformed MANIFEST, a table or blob file
// that the MANIFEST names and that is gone or unreadable.
func damagedOnOpen(err error) bool {
	if pebble.IsCorruptionError(err) || sizeMismatch.MatchString(err.Error()) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"malformed manifest", "unknown to the objstorage provider", "corrupt", "checksum mismatch", "invalid table"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// fileNamed finds the store file a Pebble error refers to by number ("file
// 000007: block …"), for errors that come without a corruption event.
func (s *Store) fileNamed(err error) string {
	if m := sizeMismatch.FindStringSubmatch(err.Error()); m != nil {
		return s.fs.PathBase(m[1])
	}
	m := pebbleFileRef.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	if m[1] != "" {
		return fmt.Sprintf("MANIFEST-%06s", m[2])
	}
	for _, ext := range []string{".blob", ".sst"} {
		name := fmt.Sprintf("%06s%s", m[2], ext)
		if _, err := s.fs.Stat(s.fs.PathJoin(s.dir, name)); err == nil {
			return name
		}
	}
	// Gone from the directory ("file 000009 (type sstable) unknown to the
	// objstorage provider").
	switch msg := err.Error(); {
	case strings.Contains(msg, "sstable"):
		return fmt.Sprintf("%06s.sst", m[2])
	case strings.Contains(msg, "blob"):
		return fmt.Sprintf("%06s.blob", m[2])
	}
	return ""
}

// contain is deferred by every Store method that calls Pebble: it turns a
// panic into an error and marks the store broken. commit says whether the
// panic came from a write, where Pebble's commit pipeline is left locked.
func (s *Store) contain(op string, commit bool, errp *error) {
	r := recover()
	if r == nil {
		return
	}
	cause, ok := r.(error)
	if !ok {
		cause = fmt.Errorf("%v", r)
	}
	cause = fmt.Errorf("pebble panicked in %s: %w", op, cause)
	s.opts.Logger.Error("staging: pebble panicked", "dir", s.dir, "op", op, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	var err error
	switch {
	case errors.Is(cause, syscall.ENOSPC):
		err = &NoSpaceError{Dir: s.dir, Free: s.freeBytes(), Err: cause}
	case commit && !pebble.IsCorruptionError(cause):
		err = fmt.Errorf("staging: %s: %w", s.dir, cause)
	default:
		// A panic while reading is Pebble meeting files it cannot make
		// sense of ("unknown metadata type" for a truncated blob file, a
		// bad block): the store is damaged.
		file, heights := s.faults.corruption()
		err = &CorruptStoreError{Dir: s.dir, File: file, Heights: heights, Err: cause}
	}
	// A write that panicked leaves Pebble's commit pipeline locked: nothing
	// can be written or closed after it. A read that panicked leaves
	// Pebble usable (other files read, records can be replaced).
	if commit || errors.Is(cause, syscall.ENOSPC) {
		s.faults.fail(err, commit)
	}
	*errp = err
}

// write runs fn, a Pebble write (a batch commit, a synced set), with its
// panics contained, and returns when fn does or when the store breaks,
// whichever comes first. Pebble may hold a write forever behind its own
// background work: with its memtables full it waits for a flush, and a
// flush that fails (out of space) is retried forever, reported only to the
// event listener. Waiting for fn then would wedge the job — the writer
// never returns, so nothing reports the failure. Once the store is broken
// the write is abandoned, with the store: the goroutine left inside Pebble
// cannot be stopped and is released by the process's exit, and Close no
// longer waits for Pebble. A write that returns is always waited for.
func (s *Store) write(op string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() { done <- err }()
		defer s.contain(op, true, &err)
		err = fn()
	}()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-s.faults.failed:
		select {
		case err := <-done: // it returned after all
			if err != nil {
				return err
			}
		default:
			s.faults.abandon()
			s.opts.Logger.Error("staging: a write is stuck in Pebble behind an earlier failure; abandoning it", "dir", s.dir, "op", op)
		}
	}
	// Pebble reports some failures (a failed WAL sync) through
	// Logger.Fatalf and then returns as if the write were done.
	return s.faults.broken()
}

// freeBytes is the space available to this process on the store's
// filesystem, or 0 when it cannot be read.
func (s *Store) freeBytes() uint64 {
	u, err := s.fs.GetDiskUsage(s.dir)
	if err != nil {
		return 0
	}
	return u.AvailBytes
}

// reserve refuses a write of n bytes that would leave less than the
// configured free-space reserve (of which small, durable metadata writes
// such as a checkpoint mirror need only half), so that Pebble never meets
// ENOSPC: its WAL writer panics on it and its flushes retry forever.
func (s *Store) reserve(n uint64, metadata bool) error {
	if s.opts.ReadOnly || s.opts.MinFreeBytes < 0 {
		return nil
	}
	res := uint64(s.opts.MinFreeBytes)
	if metadata {
		res /= 2
	}
	u, err := s.fs.GetDiskUsage(s.dir)
	if err != nil {
		// No reading (an exotic filesystem): let Pebble try; a failure is
		// still contained.
		return nil
	}
	if need := n + res; u.AvailBytes < need {
		return &NoSpaceError{Dir: s.dir, Free: u.AvailBytes, Need: need}
	}
	return nil
}

// pebbleLogger routes Pebble's logs to slog. Fatalf records the failure
// instead of exiting or panicking: Pebble calls it from its own goroutines
// too, where a panic would kill the process, and the staging call that
// caused it (if any) finds the store broken when Pebble returns.
type pebbleLogger struct {
	l *slog.Logger
	f *faults
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	var cause error
	for _, a := range args {
		if e, ok := a.(error); ok {
			cause = e
			break
		}
	}
	err := &fatalError{msg: msg, cause: cause}
	var rec error
	switch {
	case errors.Is(err, syscall.ENOSPC):
		rec = &NoSpaceError{Dir: p.f.dir, Err: err}
	case strings.Contains(msg, "fatal commit error"):
		rec = fmt.Errorf("staging: %s: %w", p.f.dir, err)
	default:
		file, heights := p.f.corruption()
		rec = &CorruptStoreError{Dir: p.f.dir, File: file, Heights: heights, Err: err}
	}
	p.f.fail(rec, strings.Contains(msg, "commit") || strings.Contains(msg, "MANIFEST"))
}

// fatalError is a message Pebble sent to Fatalf, wrapping the error among
// its arguments (if any) so that errors.Is sees ENOSPC or corruption.
type fatalError struct {
	msg   string
	cause error
}

func (e *fatalError) Error() string { return "pebble: " + strings.TrimPrefix(e.msg, "pebble: ") }
func (e *fatalError) Unwrap() error { return e.cause }
