package staging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Who may have a store open at once: a writer (fetch, run, export, prune,
// …) has it alone; any number of readers (status, verify, publish, an
// export's --merge-from) share it, but never with a writer. A reader of a
// store being written could read files a compaction has deleted.
//
// blockhaul's lock is flock(2) on the store's directory itself, shared by
// a read-only open and exclusive otherwise, taken before Pebble opens and
// released after it has closed. A lock on the directory writes nothing
// into it, so a reader leaves no trace, in a store that was restored or
// written by an older blockhaul too. flock locks belong to an open file,
// not to a process: two Stores of one process exclude each other as two
// processes do.
//
// A writer also takes Pebble's lock (its LOCK file, an fcntl lock), as
// every Pebble open does. A reader does not: Pebble takes it exclusively
// even read-only, which made readers refuse each other. A reader is still
// refused while another process holds Pebble's lock (a writer of an older
// blockhaul, which takes no other). The writer writes its PID beside the
// lock, so that a refused opener can say who holds it.
const pidFile = "blockhaul.pid"

// InUseError reports a staging directory held open by another blockhaul
// process (or by another Store of this one). PID is 0 when unknown.
//
// Reader is set when the holder only reads the store (status, verify,
// publish, a merge's source: a read-only open), where the system says so:
// such a holder is no job, and has no endpoint to ask for a checkpoint or
// a replay.
type InUseError struct {
	Dir    string
	PID    int
	Reader bool
	Err    error
}

func (e *InUseError) Error() string {
	who := "another blockhaul process"
	if e.PID != 0 {
		who = fmt.Sprintf("another blockhaul process (pid %d)", e.PID)
		if e.PID == os.Getpid() {
			who = fmt.Sprintf("this process (pid %d), through another open store", e.PID)
		}
	}
	if e.Reader {
		who += " reading it (status, verify, publish or a merge)"
	}
	return fmt.Sprintf("staging: %s is in use by %s; wait for it to finish or use another --staging directory", e.Dir, who)
}

func (e *InUseError) Unwrap() error { return e.Err }

// lockRefused reports whether err is a lock refused: blockhaul's, or
// Pebble's in pebble.Open.
func lockRefused(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// inUse builds the error for a refused lock, with the holder's PID if its
// file says it.
func inUse(fs vfs.FS, dir string, err error) error {
	e := &InUseError{Dir: dir, Err: err}
	if f, ferr := fs.Open(fs.PathJoin(dir, pidFile)); ferr == nil {
		var buf [32]byte
		n, _ := f.Read(buf[:])
		f.Close()
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); perr == nil && pid > 0 {
			e.PID = pid
		}
	}
	return e
}

// lockedBy builds the error for an open refused by blockhaul's lock on
// dir. The holder is the process the system names (a reader writes no PID
// file), else the writer its PID file names if that process is alive (a
// writer that was killed leaves its file).
func lockedBy(fs vfs.FS, dir string, err error) error {
	e := inUse(fs, dir, err).(*InUseError)
	if pid, shared := flockHolder(dir); pid != 0 {
		e.PID, e.Reader = pid, shared
	} else if !ProcessAlive(e.PID) {
		e.PID = 0
	}
	return e
}

// writePID records this process as the holder of the directory's lock. It
// is best effort: a missing PID only makes a refusal less precise. Only a
// writer writes it: it is the writer's, whom a refused reader names.
func (s *Store) writePID() {
	name := s.fs.PathJoin(s.dir, pidFile)
	f, err := s.fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return
	}
	f.Write([]byte(strconv.Itoa(os.Getpid()) + "\n"))
	f.Close()
}

// removePID is called while the lock is still held, before Pebble closes.
func (s *Store) removePID() { s.fs.Remove(s.fs.PathJoin(s.dir, pidFile)) }

// readerFS is a reader's filesystem for Pebble: its Lock takes no lock and
// creates no file. Open uses it only once it holds blockhaul's shared lock
// (see sharedReaders).
type readerFS struct{ vfs.FS }

func (readerFS) Lock(string) (io.Closer, error) { return noLock{}, nil }

type noLock struct{}

func (noLock) Close() error { return nil }
