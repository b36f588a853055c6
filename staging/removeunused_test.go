package staging

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
)

// RemoveUnused removes the directories a job made when it staged nothing,
// keeps a store that holds a record, and says nothing was to be removed
// (no error) when the job was refused before it made the directory (before:
// "stat …: no such file or directory", logged as a store left behind).
func TestRemoveUnused(t *testing.T) {
	root := t.TempDir()

	never := filepath.Join(root, "never", "staging")
	made := ToMake(never)
	if made != filepath.Join(root, "never") {
		t.Fatalf("ToMake(%s) = %q, want the first missing parent", never, made)
	}
	if removed, err := RemoveUnused(never, made); removed || err != nil {
		t.Fatalf("a directory never made: removed %v, err %v; want false, nil", removed, err)
	}

	empty := filepath.Join(root, "empty", "staging")
	made = ToMake(empty)
	s, err := Open(empty, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if removed, err := RemoveUnused(empty, made); !removed || err != nil {
		t.Fatalf("a store holding nothing: removed %v, err %v; want true, nil", removed, err)
	}
	if _, err := os.Stat(made); !os.IsNotExist(err) {
		t.Fatalf("%s still there after RemoveUnused: %v", made, err)
	}

	held := filepath.Join(root, "held", "staging")
	made = ToMake(held)
	s, err = Open(held, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(chain.FamilyCometBFT, "test"); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	if err := b.Put(chain.Block{Height: 1, Hash: []byte{1}, ParentHash: []byte{0}, Raw: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if removed, err := RemoveUnused(held, made); removed || err != nil {
		t.Fatalf("a store holding a record: removed %v, err %v; want false, nil", removed, err)
	}
	if _, err := os.Stat(held); err != nil {
		t.Fatalf("the store holding a record is gone: %v", err)
	}
}
