//go:build !blockhaul_nocloud

package archive

import (
	"net/http/httptest"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// TestSnapshotThroughGCS snapshots to and restores from the Google Cloud
// Storage JSON API: fake-gcs-server, in process on 127.0.0.1, through
// gocloud.dev's gcsblob driver and Google's own storage client (pointed at
// it by STORAGE_EMULATOR_HOST, as at any emulator).
func TestSnapshotThroughGCS(t *testing.T) {
	// The client downloads from http://HOST/bucket/object, which the
	// server routes only for its public host: the address must be known
	// before the server is made.
	ts := httptest.NewUnstartedServer(nil)
	host := ts.Listener.Addr().String()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", NoListener: true, PublicHost: host, ExternalURL: "http://" + host})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ts.Config.Handler = srv.HTTPHandler()
	ts.Start()
	defer ts.Close()
	srv.CreateBucket("snapshots")
	t.Setenv("STORAGE_EMULATOR_HOST", host)
	roundTrip(t, "gs://snapshots?anonymous=true&prefix=chain-a/", families()[1], "GCS")
	// The objects are in the server's bucket, under the prefix.
	objs, _, err := srv.ListObjectsWithOptions("snapshots", fakestorage.ListOptions{Prefix: "chain-a/"})
	if err != nil {
		t.Fatal(err)
	}
	var manifest bool
	for _, o := range objs {
		manifest = manifest || o.Name == "chain-a/"+ManifestName
	}
	if len(objs) < 4 || !manifest {
		t.Fatalf("the GCS bucket holds %d objects under chain-a/ (manifest: %v)", len(objs), manifest)
	}
}
