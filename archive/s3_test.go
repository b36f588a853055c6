package archive

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"
)

// TestSnapshotThroughS3 snapshots to and restores from a real S3 API: the
// gofakes3 server, in process on 127.0.0.1, through gocloud.dev's s3blob
// driver (the AWS SDK's own client).
func TestSnapshotThroughS3(t *testing.T) {
	backend := s3mem.New()
	ts := httptest.NewServer(gofakes3.New(backend).Server())
	defer ts.Close()
	if err := backend.CreateBucket("snapshots"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	url := "s3://snapshots?endpoint=" + ts.URL + "&use_path_style=true&disable_https=true&region=us-east-1&prefix=chain-a/"

	roundTrip(t, url, families()[0], "S3")
}

// roundTrip stages 300 heights of f, snapshots them to the bucket at url,
// restores them into a new directory and checks that the restored store
// holds the same files and verifies clean. It returns the bucket, open
// until the test ends.
func roundTrip(t *testing.T, url string, f family, server string) *blob.Bucket {
	t.Helper()
	s := stage(t, filepath.Join(t.TempDir(), "s"), f, 1, 300)
	ctx := context.Background()
	bucket, err := OpenBucket(ctx, url, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	r, err := Snapshot(ctx, s, bucket, RedactURL(url))
	if err != nil {
		t.Fatalf("snapshot to %s: %v", server, err)
	}
	if r.Files < 3 || r.Bytes == 0 {
		t.Fatalf("snapshot to %s wrote %d files, %d bytes", server, r.Files, r.Bytes)
	}
	rr, err := Restore(ctx, bucket, RedactURL(url), filepath.Join(t.TempDir(), "restored"))
	if err != nil {
		t.Fatalf("restore from %s: %v", server, err)
	}
	if rr.Files != r.Files || rr.Bytes != r.Bytes || rr.Verify.Records != 300 || rr.Verify.Problems() != 0 {
		t.Fatalf("restored from %s %d files %d bytes (snapshot %d, %d): %s", server, rr.Files, rr.Bytes, r.Files, r.Bytes, summary(rr.Verify))
	}
	return bucket
}
