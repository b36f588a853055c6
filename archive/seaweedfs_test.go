package archive

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/syncbuf"
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
// so. When the variable is set, the server must start and the round trip
// pass.
func TestSnapshotThroughSeaweedFS(t *testing.T) {
	weed := os.Getenv("BLOCKHAUL_TEST_WEED")
	if weed == "" || strings.HasPrefix(weed, "unavailable:") {
		t.Skipf("no SeaweedFS binary (BLOCKHAUL_TEST_WEED=%q; make test builds one with scripts/seaweedfs.sh)", weed)
	}
	const bucketName = "snapshots"
	endpoint := startSeaweedFS(t, weed, bucketName)
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

// startSeaweedFS runs `weed mini` in a temporary directory on free ports of
// 127.0.0.1, its S3 user's keys in the environment of both the server and
// this test (the AWS SDK reads them), the bucket created at start, and
// returns the S3 endpoint once the bucket answers a signed request. The
// server is stopped when the test ends.
func startSeaweedFS(t *testing.T, weed, bucketName string) string {
	t.Helper()
	ports := freePorts(t, 8)
	dir := t.TempDir()
	const access, secret = "blockhaul-test", "blockhaul-test-secret"
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_REGION", "us-east-1")
	cmd := exec.Command(weed, "mini",
		"-dir="+dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-bucket="+bucketName,
		fmt.Sprintf("-master.port=%d", ports[0]), fmt.Sprintf("-master.port.grpc=%d", ports[1]),
		fmt.Sprintf("-volume.port=%d", ports[2]), fmt.Sprintf("-volume.port.grpc=%d", ports[3]),
		fmt.Sprintf("-filer.port=%d", ports[4]), fmt.Sprintf("-filer.port.grpc=%d", ports[5]),
		fmt.Sprintf("-s3.port=%d", ports[6]), fmt.Sprintf("-s3.port.grpc=%d", ports[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-webdav=false", "-admin.ui=false", "-master.telemetry=false")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+access, "AWS_SECRET_ACCESS_KEY="+secret, "S3_BUCKET="+bucketName)
	// weed prints its banner once every component it started is running.
	out := startServer(t, cmd, "weed mini", "All enabled components are running", 120*time.Second, 20*time.Second)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", ports[6])
	url := "s3://" + bucketName + "?endpoint=" + endpoint + "&use_path_style=true&disable_https=true&region=us-east-1"
	// The bucket is created as the gateway starts: a few tries, each a
	// signed request, bounded; the last error is reported.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for try := 1; try <= 40; try++ {
		if last = bucketAnswers(url); last == nil {
			return endpoint
		}
		<-tick.C
	}
	t.Fatalf("SeaweedFS's S3 gateway runs but bucket %s does not answer (40 tries); last: %v\n%s", bucketName, last, out.String())
	return ""
}

// bucketAnswers lists one key of the bucket through the S3 API.
func bucketAnswers(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := blob.OpenBucket(ctx, url)
	if err != nil {
		return err
	}
	defer b.Close()
	it := b.List(&blob.ListOptions{})
	if _, err := it.Next(ctx); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	// A gateway whose filer is not up yet may answer 5xx: make it a plain
	// error so the caller tries again.
	if ok, err := b.IsAccessible(ctx); err != nil || !ok {
		return fmt.Errorf("bucket not accessible yet: %v", err)
	}
	return nil
}

// freePorts returns n distinct TCP ports free on 127.0.0.1 just now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
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

// startServer starts cmd, a test's server, and waits until a line of its
// standard output contains ready (at most wait); the test fails when it
// exits first or does not say so in time, with what it printed. When the
// test ends the server is interrupted, and killed if it has not exited
// after stopWait; its output is logged when the test failed. It returns the
// server's output so far, for the test's own messages.
func startServer(t *testing.T, cmd *exec.Cmd, name, ready string, wait, stopWait time.Duration) *syncbuf.Buffer {
	t.Helper()
	out := &syncbuf.Buffer{}
	cmd.Stderr = out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	said := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		seen := false
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if !seen && strings.Contains(sc.Text(), ready) {
				seen = true
				close(said)
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(stopWait):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	select {
	case <-said:
	case err := <-exited:
		t.Fatalf("%s exited before it said %q: %v\n%s", name, ready, err, out.String())
	case <-time.After(wait):
		t.Fatalf("%s did not say %q in %v:\n%s", name, ready, wait, out.String())
	}
	return out
}
