package staging

import (
	"context"
	"os"
	"strings"
	"testing"
)

// blobBytes is the sum of the sizes of the store's blob files.
func blobBytes(t *testing.T, s *Store) int64 {
	t.Helper()
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".blob") {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

// TestPruneGivesTheSpaceBack: records flushed together share one blob file,
// and a blob file is removed only when no key refers to it. Pruning the
// lower half of a store held in one blob file must still give back about
// half of the blob bytes, and keep every record above.
func TestPruneGivesTheSpaceBack(t *testing.T) {
	s := openTest(t)
	const n = 400
	putNoise(t, s, n)
	if m := s.db.Metrics(); m.BlobFiles.LiveCount != 1 {
		t.Fatalf("the test needs every record in one blob file: %d blob files", m.BlobFiles.LiveCount)
	}
	before := blobBytes(t, s)
	if err := s.Prune(context.Background(), n/2+1); err != nil {
		t.Fatal(err)
	}
	after := blobBytes(t, s)
	if after > before*6/10 {
		t.Errorf("pruning half the records left %d of %d blob bytes", after, before)
	}
	if got := s.blobs.target(); got != garbageTarget {
		t.Errorf("garbage target after the prune = %v, want %v", got, garbageTarget)
	}
	for _, h := range []uint64{1, n / 2} {
		if _, err := s.Get(h); err == nil {
			t.Errorf("height %d is still staged after the prune", h)
		}
	}
	for h := uint64(n/2 + 1); h <= n; h++ {
		got, err := s.Get(h)
		if err != nil {
			t.Fatalf("height %d after the prune: %v", h, err)
		}
		if string(got.Raw) != string(noise(h, 8<<10)) {
			t.Fatalf("height %d after the prune: record differs", h)
		}
	}
}
