//go:build !unix

package staging

import "io"

// sharedReaders says that blockhaul's lock lets readers share a store.
// Without flock it does not: a reader takes Pebble's lock, as a writer
// does, and readers refuse each other.
const sharedReaders = false

// lockDir takes no lock: Pebble's is the only one here.
func lockDir(dir string, shared bool) (io.Closer, error) { return noLock{}, nil }

// pebbleHolder is not asked where readers take Pebble's lock themselves.
func pebbleHolder(dir string) (pid int, held bool, err error) { return 0, false, nil }

// flockHolder: no flock here.
func flockHolder(dir string) (int, bool) { return 0, false }
