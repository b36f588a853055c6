package archive

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/testserver"
	"gocloud.dev/blob"
)

// TestSnapshotThroughSeaweedFS snapshots to and restores from a real
// S3-compatible server: SeaweedFS (`weed mini`: master, volume server, filer
// and S3 gateway in one process) started by the test on 127.0.0.1, with
// credentials of its own, so that every request is signed (SigV4) and
// checked. A byte flipped in one object through the S3 API is refused by
// restore, by name.
//
// make test builds weed from the Go module proxy (scripts/seaweedfs.sh) and
// names it in BLOCKHAUL_TEST_WEED; a plain go test without it skips, saying
// so, and fails under CI=true. When the variable is set, the server must
// start and the round trip pass.
func TestSnapshotThroughSeaweedFS(t *testing.T) {
	weed := testserver.Weed(t)
	const bucketName = "snapshots"
	endpoint := testserver.SeaweedFS(t, weed, bucketName)
	url := "s3://" + bucketName + "?endpoint=" + endpoint + "&use_path_style=true&disable_https=true&region=us-east-1&prefix=chain-a/"

	bucket := roundTrip(t, url, families()[1], "SeaweedFS")
	ctx := context.Background()
	refusesTampered(t, bucket, url, strings.Replace(url, "&prefix=chain-a/", "", 1), "chain-a/", "SeaweedFS")

	// The server checks the signature: the same request with another
	// secret is refused.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	wrong, err := OpenBucket(ctx, url, true)
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if _, err := wrong.ReadAll(ctx, ManifestName); err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Fatalf("SeaweedFS, asked with the wrong secret: %v; want SignatureDoesNotMatch", err)
	}
}

// refusesTampered flips a byte in the middle of the largest file of the
// snapshot in bucket (opened at url), through the server's own API at
// rawURL (the same bucket without the prefix, under which the keys are
// prefix+name), and checks that restore then refuses, naming the file and
// its SHA-256, and leaves nothing behind.
func refusesTampered(t *testing.T, bucket *blob.Bucket, url, rawURL, prefix, server string) {
	t.Helper()
	ctx := context.Background()
	mb, err := bucket.ReadAll(ctx, ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	// The largest file holds the records (a WAL or a table, as the store
	// last flushed).
	victim, size := "", int64(0)
	for _, fe := range m.Files {
		if fe.Size > size {
			victim, size = fe.Name, fe.Size
		}
	}
	if size < 1000 {
		t.Fatalf("no file of the records in the snapshot's manifest: %+v", m.Files)
	}
	key := prefix + victim
	raw, err := OpenBucket(ctx, rawURL, true)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	data, err := raw.ReadAll(ctx, key)
	if err != nil {
		t.Fatalf("read %s back from %s: %v", key, server, err)
	}
	data[len(data)/2] ^= 0x40
	if err := raw.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	var re *RestoreError
	if _, err := Restore(ctx, bucket, RedactURL(url), dir); !errors.As(err, &re) || !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("restore of a snapshot with %s altered on %s: %v", victim, server, err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("a refused restore left %s", dir)
	}
}
