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
