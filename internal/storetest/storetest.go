// Package storetest holds what tests share for staging stores on disk.
package storetest

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// CopyFiles copies the files of a store's directory from (not its LOCK, nor
// subdirectories) into to, creating to. A file that vanishes between the
// listing and its copy (a failed flush's output, removed by Pebble
// meanwhile) is passed over.
func CopyFiles(t testing.TB, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || e.Name() == "LOCK" {
			continue
		}
		src, err := os.Open(filepath.Join(from, e.Name()))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			src.Close()
			t.Fatal(err)
		}
		_, err = io.Copy(dst, src)
		src.Close()
		if err != nil {
			dst.Close()
			t.Fatal(err)
		}
		if err := dst.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Size is the size of the file at path.
func Size(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// Largest is the path of the largest .ext file of dir; a directory without
// one fails the test.
func Largest(t testing.TB, dir, ext string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*."+ext))
	if len(files) == 0 {
		t.Fatalf("no .%s file in %s", ext, dir)
	}
	largest := files[0]
	for _, f := range files[1:] {
		if Size(t, f) > Size(t, largest) {
			largest = f
		}
	}
	return largest
}

// Garble inverts n bytes of the file at path from offset from (fewer where
// the file ends first), as a damaged disk would leave them.
func Garble(t testing.TB, path string, from int64, n int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < from+int64(n) && i < int64(len(data)); i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
