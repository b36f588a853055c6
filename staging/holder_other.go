//go:build !unix

package staging

import "github.com/cockroachdb/pebble/v2/vfs"

// Holder reports whether a process holds the store in dir open, and which.
// Without fcntl locks to test, a directory with a PID file counts as held.
func Holder(dir string) (pid int, held bool) {
	if ie, ok := inUse(vfs.Default, dir, nil).(*InUseError); ok && ie.PID != 0 {
		return ie.PID, true
	}
	return 0, false
}

// ProcessAlive reports whether a process with this PID exists; where that
// cannot be asked, any positive PID counts as alive.
func ProcessAlive(pid int) bool { return pid > 0 }
