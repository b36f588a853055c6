package staging

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckDir(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	s := openDir(t, store)
	s.Close()
	foreign := filepath.Join(root, "scripts")
	os.Mkdir(foreign, 0o755)
	os.WriteFile(filepath.Join(foreign, "demo.sh"), []byte("#!/bin/sh\n"), 0o644)
	file := filepath.Join(root, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	empty := filepath.Join(root, "empty")
	os.Mkdir(empty, 0o755)
	for _, tc := range []struct {
		dir     string
		refused bool
	}{
		{filepath.Join(root, "new"), false},
		{empty, false},
		{store, false},
		{foreign, true},
		{file, true},
	} {
		err := CheckDir(tc.dir)
		var ns *NotStoreError
		if tc.refused != errors.As(err, &ns) {
			t.Errorf("CheckDir(%s) = %v, want refused %v", filepath.Base(tc.dir), err, tc.refused)
		}
	}
	entries, _ := os.ReadDir(foreign)
	if len(entries) != 1 {
		t.Errorf("CheckDir wrote into %s: %d entries", foreign, len(entries))
	}
}
