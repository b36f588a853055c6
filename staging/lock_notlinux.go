//go:build unix && !linux

package staging

// flockHolder is a process holding an flock(2) lock on dir, and whether
// its lock is shared, where the system says it; here it does not (0).
func flockHolder(dir string) (int, bool) { return 0, false }
