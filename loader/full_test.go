package loader

import (
	"context"
	"errors"
	"testing"

	"github.com/blockhaul/blockhaul/staging"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// When staging refuses a commit (here: the free-space reserve, set above
// what the disk has), fetch stops at once with that error instead of
// fetching, and discarding, the rest of the range.
func TestFetchStopsAtFirstWriteError(t *testing.T) {
	dir := t.TempDir()
	du, err := vfs.Default.GetDiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Open needs half the reserve free, a commit all of it.
	store, err := staging.Open(dir, staging.Options{MinFreeBytes: int64(du.AvailBytes / 2 * 3)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	src := newFake()
	const to = 200_000
	_, err = Fetch(context.Background(), src, store, 1, to, fast, nil)
	var ns *staging.NoSpaceError
	if !errors.As(err, &ns) {
		t.Fatalf("fetch on a full disk: %v, want a *staging.NoSpaceError", err)
	}
	src.mu.Lock()
	asked := len(src.asked)
	src.mu.Unlock()
	if asked > 1000 {
		t.Fatalf("fetch asked for %d of %d heights after its first commit failed", asked, to)
	}
	t.Logf("stopped after asking %d heights: %v", asked, err)
}
