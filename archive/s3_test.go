package archive

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
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

	f := families()[0]
	s := stage(t, filepath.Join(t.TempDir(), "s"), f, 1, 300)
	ctx := context.Background()
	bucket, err := OpenBucket(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	r, err := Snapshot(ctx, s, bucket, RedactURL(url))
	if err != nil {
		t.Fatalf("snapshot to S3: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	rr, err := Restore(ctx, bucket, RedactURL(url), dir)
	if err != nil {
		t.Fatalf("restore from S3: %v", err)
	}
	if rr.Files != r.Files || rr.Bytes != r.Bytes || rr.Verify.Records != 300 || rr.Verify.Problems() != 0 {
		t.Fatalf("restored %d files %d bytes (snapshot %d, %d): %s", rr.Files, rr.Bytes, r.Files, r.Bytes, summary(rr.Verify))
	}
}
