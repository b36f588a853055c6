package staging

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// vanishingFS lists a file and a directory that are gone by the time they
// are looked at, as Pebble's background deletions make them, and wraps its
// errors as Pebble's filesystems do.
type vanishingFS struct{ vfs.FS }

func (f vanishingFS) List(dir string) ([]string, error) {
	names, err := f.FS.List(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return append(names, "OPTIONS-000025", "gone-dir"), nil
}

func (f vanishingFS) Stat(name string) (vfs.FileInfo, error) {
	fi, err := f.FS.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	return fi, nil
}

func TestDirUsageSkipsFilesDeletedSinceTheListing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "000001.log"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	u, err := dirUsage(vanishingFS{vfs.Default}, dir)
	if err != nil {
		t.Fatalf("dirUsage with files deleted since the listing: %v", err)
	}
	if u.Bytes != 4096 || u.WAL == 0 {
		t.Fatalf("usage %+v, want the 4096-byte log counted", u)
	}
}
