package archive

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
	"gocloud.dev/blob"
)

// localBucket opens a snapshot location in a new temporary directory; it
// is closed when the test ends.
func localBucket(t *testing.T) (*blob.Bucket, string) {
	t.Helper()
	loc := filepath.Join(t.TempDir(), "snapshots")
	bucket, err := OpenBucket(context.Background(), loc, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	return bucket, loc
}

// TestRestoreShardsMergesEveryShard: three shards' snapshots under one
// location, written in the order 2, 0, 1, restore and merge into one store
// holding exactly their heights, with nothing left beside it.
func TestRestoreShardsMergesEveryShard(t *testing.T) {
	f := families()[0]
	ctx := context.Background()
	bucket, loc := localBucket(t)
	shards := []Shard{{0, true, 1, 99}, {1, true, 100, 199}, {2, true, 200, 250}}
	for _, i := range []int{2, 0, 1} {
		s := stage(t, filepath.Join(t.TempDir(), "s"), f, shards[i].From, shards[i].To)
		if _, err := Snapshot(ctx, s, ShardBucket(bucket, i), loc); err != nil {
			t.Fatal(err)
		}
	}
	base := t.TempDir()
	dir := filepath.Join(base, "merged")
	r, err := RestoreShards(ctx, bucket, loc, dir, shards, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if r.Merged != 250 || len(r.Shards) != 3 {
		t.Errorf("merged %d blocks from %d shards, want 250 from 3", r.Merged, len(r.Shards))
	}
	s := stagingtest.Open(t, dir, staging.Options{ReadOnly: true})
	rs, err := s.Staged(0, 1<<40)
	s.Close()
	if err != nil || len(rs) != 1 || rs[0].From != 1 || rs[0].To != 250 {
		t.Fatalf("merged store holds %v (%v), want 1-250", rs, err)
	}
	if left, _ := filepath.Glob(filepath.Join(base, "*")); len(left) != 1 {
		t.Errorf("beside the store: %v", left)
	}
}

// TestRestoreShardsNamesWhatIsMissing: a shard with no snapshot and one
// whose snapshot holds another range are named, with what each place
// holds, after the wait; the store the restore began is gone.
func TestRestoreShardsNamesWhatIsMissing(t *testing.T) {
	f := families()[0]
	ctx := context.Background()
	bucket, loc := localBucket(t)
	for i, r := range [][2]uint64{{1, 99}, {300, 350}} {
		s := stage(t, filepath.Join(t.TempDir(), "s"), f, r[0], r[1])
		if _, err := Snapshot(ctx, s, ShardBucket(bucket, i), loc); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "merged")
	shards := []Shard{{0, true, 1, 99}, {1, true, 100, 199}, {2, true, 200, 299}}
	_, err := RestoreShards(ctx, bucket, loc, dir, shards, 0, slog.New(slog.DiscardHandler))
	var me *ShardsMissingError
	if !errors.As(err, &me) {
		t.Fatalf("got %v, want a *ShardsMissingError", err)
	}
	for _, want := range []string{"without --wait, 2 shards without a finished snapshot",
		"shard-1/ holds a snapshot of 300-350, not of its slice 100-199", "shard-2/ holds no " + ManifestName} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("a failed restore left %s (%v)", dir, serr)
	}
}
