package staging

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Pebble locks the directory (its LOCK file) for as long as a store is open,
// in this process or another. The holder writes its PID beside the lock, so
// that a refused opener can say who holds it.
const pidFile = "blockhaul.pid"

// InUseError reports a staging directory held open by another blockhaul
// process (or by another Store of this one). PID is 0 when unknown.
type InUseError struct {
	Dir string
	PID int
	Err error
}

func (e *InUseError) Error() string {
	who := "another blockhaul process"
	if e.PID != 0 {
		who = fmt.Sprintf("another blockhaul process (pid %d)", e.PID)
		if e.PID == os.Getpid() {
			who = fmt.Sprintf("this process (pid %d), through another open store", e.PID)
		}
	}
	return fmt.Sprintf("staging: %s is in use by %s; wait for it to finish or use another --staging directory", e.Dir, who)
}

func (e *InUseError) Unwrap() error { return e.Err }

// lockRefused reports whether pebble.Open failed on the directory lock.
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

// writePID records this process as the holder of the directory's lock. It
// is best effort: a missing PID only makes a refusal less precise.
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
