// Package testserver is what the tests that need a real server of their
// own share: the servers make test provides (SeaweedFS for S3, Azurite for
// Azure Blob Storage), started on free ports of 127.0.0.1 in a test's
// temporary directory and stopped when it ends, and the rule for when one
// is not there: a plain go test skips, saying why; under CI (CI=true) the
// test fails, so that a run without its server never passes.
package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/syncbuf"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob" // s3:// URLs
)

// Binary returns the server binary that make test named in the variable
// env (set by script). When it is unset or says "unavailable: REASON" (the
// script could not build or install it), the test skips with the reason,
// or, under CI=true, fails with it.
func Binary(t testing.TB, env, what, script string) string {
	t.Helper()
	v := os.Getenv(env)
	if v != "" && !strings.HasPrefix(v, "unavailable:") {
		return v
	}
	msg := fmt.Sprintf("no %s (%s=%q; make test provides one with %s)", what, env, v, script)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: under CI=true a test whose server cannot be set up fails", msg)
	}
	t.Skip(msg)
	return ""
}

// Weed is the SeaweedFS binary of make test (scripts/seaweedfs.sh), as
// Binary gives it.
func Weed(t testing.TB) string {
	t.Helper()
	return Binary(t, "BLOCKHAUL_TEST_WEED", "SeaweedFS binary", "scripts/seaweedfs.sh")
}

// SeaweedFS runs `weed mini` in a temporary directory on free ports of
// 127.0.0.1, its S3 user's keys in the environment of both the server and
// this test (the AWS SDK reads them), the bucket created at start, and
// returns the S3 endpoint once the bucket answers a signed request. The
// server is stopped when the test ends.
func SeaweedFS(t *testing.T, weed, bucketName string) string {
	t.Helper()
	ports := FreePorts(t, 8)
	dir := t.TempDir()
	const access, secret = "blockhaul-test", "blockhaul-test-secret"
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_REGION", "us-east-1")
	// -logdir: weed's log files go to the test's directory, not /tmp.
	cmd := exec.Command(weed, "-logdir="+dir, "mini",
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
	out := Start(t, cmd, "weed mini", "All enabled components are running", 120*time.Second, 20*time.Second)
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

// FreePorts returns n distinct TCP ports free on 127.0.0.1 just now.
func FreePorts(t *testing.T, n int) []int {
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

// Start starts cmd, a test's server, and waits until a line of its
// standard output contains ready (at most wait); the test fails when it
// exits first or does not say so in time, with what it printed. When the
// test ends the server is interrupted, and killed if it has not exited
// after stopWait; its output is logged when the test failed. It returns the
// server's output so far, for the test's own messages.
func Start(t *testing.T, cmd *exec.Cmd, name, ready string, wait, stopWait time.Duration) *syncbuf.Buffer {
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
