package staging

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenRefusesAStoreWithoutItsManifest: a store whose MANIFEST is gone
// is damaged, not a foreign directory and not a new store: CheckDir and
// both kinds of Open say so, naming one of its files and repair, and leave
// every file where it was (a read-write Pebble open would have made an
// empty store and deleted them as obsolete).
func TestOpenRefusesAStoreWithoutItsManifest(t *testing.T) {
	dir := corruptFixture(t)
	m, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no MANIFEST in the fixture: %v", err)
	}
	for _, f := range m {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	before := names(t, dir)
	check := func(what string, err error) {
		t.Helper()
		var cs *CorruptStoreError
		if !errors.As(err, &cs) || !errors.Is(err, ErrManifestGone) || !strings.Contains(err.Error(), "repair") || !strings.Contains(err.Error(), ".blob") {
			t.Errorf("%s: %v, want a damaged store whose MANIFEST is gone, naming a .blob file and repair", what, err)
		}
	}
	check("CheckDir", CheckDir(dir))
	for _, ro := range []bool{true, false} {
		s, err := Open(dir, Options{ReadOnly: ro})
		if err == nil {
			s.Close()
		}
		check(map[bool]string{true: "read-only Open", false: "Open"}[ro], err)
	}
	if after := names(t, dir); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("files before %v, after %v", before, after)
	}
}

// TestOpenLeavesNothingWhenRefused: an Open refused by the free-space
// reserve removes the directories it made (a job refused before it staged
// anything leaves no staging directory), and keeps one that existed.
func TestOpenLeavesNothingWhenRefused(t *testing.T) {
	root := t.TempDir()
	fs := newSmallFS(1 << 20)
	dir := filepath.Join(root, "a", "store")
	if _, err := Open(dir, Options{fs: fs, MinFreeBytes: 64 << 20}); !errors.As(err, new(*NoSpaceError)) {
		t.Fatalf("Open with 1 MiB free: %v, want a *NoSpaceError", err)
	}
	if _, err := os.Stat(filepath.Join(root, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Open left %s: %v", filepath.Join(root, "a"), err)
	}
	existing := filepath.Join(root, "given")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(existing, Options{fs: fs, MinFreeBytes: 64 << 20}); !errors.As(err, new(*NoSpaceError)) {
		t.Fatalf("Open with 1 MiB free: %v, want a *NoSpaceError", err)
	}
	if _, err := os.Stat(existing); err != nil {
		t.Errorf("a refused Open removed the directory it was given: %v", err)
	}
}

// TestReadOnlyOpenOfNoStore: an empty directory (what an open that never
// finished leaves) holds no store: a *NoStoreError, not Pebble's error.
func TestReadOnlyOpenOfNoStore(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir, Options{ReadOnly: true})
	var ns *NoStoreError
	if !errors.As(err, &ns) || ns.Dir != dir {
		t.Fatalf("read-only Open of an empty directory: %v, want a *NoStoreError", err)
	}
}

// TestNewStoreTakesLittleDisk: Pebble preallocates each write-ahead log
// to 110% of the memtable; a new store with one block took 18 MB. Its size
// on disk is now what its files hold, and Size accounts for it: the
// records, the disk, and the log within it.
func TestNewStoreTakesLittleDisk(t *testing.T) {
	s := openTest(t)
	put(t, s, 1)
	z, err := s.Size()
	if err != nil {
		t.Fatal(err)
	}
	u, err := DirUsage(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if z.Disk != u.Allocated || z.Disk > 1<<20 {
		t.Errorf("a store of one block: %s (du %d bytes), want under 1 MiB", z, u.Allocated)
	}
	if z.Blocks != 1 || z.Records == 0 || z.Records > 1<<10 || z.WAL == 0 || z.WAL > z.Disk {
		t.Errorf("size of a store of one block: %+v", z)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
