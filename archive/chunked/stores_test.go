//go:build !blockhaul_nocloud

package chunked_test

import (
	"net/http/httptest"
	"testing"

	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/testserver"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// The archive through the object stores the suite runs: publish from one
// store, rebuild an empty one from the archive alone, every record equal.
// Each URL has a prefix: the chain's folder is found below it.

// TestArchiveThroughSeaweedFS: a real S3-compatible server (make test
// builds it; without it the test skips, and fails under CI=true).
func TestArchiveThroughSeaweedFS(t *testing.T) {
	weed := testserver.Weed(t)
	endpoint := testserver.SeaweedFS(t, weed, "archives")
	roundTrip(t, "s3://archives?endpoint="+endpoint+"&use_path_style=true&disable_https=true&region=us-east-1&prefix=pub/", "SeaweedFS", family.CometBFT)
}

// TestArchiveThroughAzurite: Microsoft's emulator of Azure Blob Storage.
func TestArchiveThroughAzurite(t *testing.T) {
	host := testserver.StartAzurite(t, testserver.Azurite(t))
	roundTrip(t, testserver.AzuriteContainer(t, host, "archives")+"&prefix=pub/", "Azurite", family.EVM)
}

// TestArchiveThroughGCS: the Google Cloud Storage JSON API of
// fake-gcs-server, in process.
func TestArchiveThroughGCS(t *testing.T) {
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
	srv.CreateBucket("archives")
	t.Setenv("STORAGE_EMULATOR_HOST", host)
	roundTrip(t, "gs://archives?anonymous=true&prefix=pub/", "GCS", family.CometBFT)
}

// TestArchiveThroughS3: the S3 API of gofakes3, in process, through the
// AWS SDK.
func TestArchiveThroughS3(t *testing.T) {
	backend := s3mem.New()
	ts := httptest.NewServer(gofakes3.New(backend).Server())
	defer ts.Close()
	if err := backend.CreateBucket("archives"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	roundTrip(t, "s3://archives?endpoint="+ts.URL+"&use_path_style=true&disable_https=true&region=us-east-1&prefix=pub/", "S3", family.EVM)
}
