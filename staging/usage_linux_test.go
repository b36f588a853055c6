package staging

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDirUsageCountsAllocatedSpace: a file the filesystem holds space for
// beyond its size (as Pebble preallocates its logs) counts that space in
// Allocated, not in Bytes; a sparse file the other way round.
func TestDirUsageCountsAllocatedSpace(t *testing.T) {
	dir := t.TempDir()
	pre, err := os.Create(filepath.Join(dir, "000001.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Close()
	if _, err := pre.Write([]byte("a log record")); err != nil {
		t.Fatal(err)
	}
	const keepSize = 1 // FALLOC_FL_KEEP_SIZE
	if err := syscall.Fallocate(int(pre.Fd()), keepSize, 0, 4<<20); err != nil {
		t.Skipf("this filesystem cannot preallocate: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(filepath.Join(dir, "sub", "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer sparse.Close()
	if err := sparse.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	u, err := DirUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes != 12+64<<20 {
		t.Errorf("Bytes = %d, want %d", u.Bytes, 12+64<<20)
	}
	if u.Allocated < 4<<20 || u.Allocated > 8<<20 {
		t.Errorf("Allocated = %d, want the 4 MiB preallocated (and next to nothing for the sparse file)", u.Allocated)
	}
}
