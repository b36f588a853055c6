//go:build unix

package staging

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// sharedReaders says that blockhaul's lock lets readers share a store
// (see lock.go).
const sharedReaders = true

// lockDir takes blockhaul's lock on dir, shared or exclusive, without
// waiting: refused, it returns an error that lockRefused recognises.
// Closing what it returns releases it.
func lockDir(dir string, shared bool) (io.Closer, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	for {
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: dir, Err: err}
	}
	return f, nil
}

// pebbleHolder reports the process holding Pebble's lock on dir (its LOCK
// file), testing it (F_GETLK) without taking it. Another process only: a
// lock of this process is not seen, and closing a descriptor of the file
// would drop it, so it must not be called while this process may hold it.
func pebbleHolder(dir string) (pid int, held bool, err error) {
	f, err := os.Open(filepath.Join(dir, "LOCK"))
	if err != nil {
		return 0, false, nil
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return 0, false, err
	}
	if lk.Type == syscall.F_UNLCK {
		return 0, false, nil
	}
	return int(lk.Pid), true, nil
}
