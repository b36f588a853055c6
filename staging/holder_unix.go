//go:build unix

package staging

import (
	"errors"
	"os"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Holder reports whether a process holds the store in dir open for
// writing, and which: Pebble's lock on dir/LOCK, which only a writer takes,
// is an fcntl lock, which the kernel drops when its process ends however it
// ends, so a holder that was killed is seen gone at once even though its
// PID file remains. It only reads: the lock is tested (F_GETLK), never
// taken. A store open in this process is told by the PID file alone (fcntl
// locks do not conflict within a process, and closing a descriptor of the
// lock file would drop this process's lock).
func Holder(dir string) (pid int, held bool) {
	if ie, ok := inUse(vfs.Default, dir, nil).(*InUseError); ok && ie.PID == os.Getpid() {
		return ie.PID, true
	}
	pid, held, err := pebbleHolder(dir)
	if err != nil {
		// Cannot tell: take it as held, so that a waiter keeps to its own
		// bounds rather than deciding the holder is gone.
		return 0, true
	}
	return pid, held
}

// ProcessAlive reports whether a process with this PID exists (signal 0:
// nothing is sent). A PID of another user's process counts as alive.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
