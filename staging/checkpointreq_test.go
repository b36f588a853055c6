package staging

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
)

// TestCheckpointRequest: a request is answered by the store's holder with
// a checkpoint that opens and holds what was staged; a destination outside
// the store's parent, or inside the store, is refused in the answer; a
// request nobody serves ends in a *NoAnswerError and leaves no file.
func TestCheckpointRequest(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "s")
	s := openBoundWith(t, dir, Options{}, chain.FamilyCometBFT, "c")
	defer s.Close()
	b := s.NewBatch()
	for h := uint64(1); h <= 50; h++ {
		if err := b.Put(chain.Block{Height: h, Hash: []byte{byte(h)}, ParentHash: []byte{byte(h - 1)}, Raw: []byte(`{"h":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()

	request := func(dest string, wait time.Duration) (int, error) {
		// The holder's endpoint, in miniature.
		ln, err := ListenEndpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST "+CheckpointRoute, s.CheckpointHandler())
		ctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- ServeEndpoint(ctx, ln, mux) }()
		pid, err := RequestCheckpoint(context.Background(), dir, dest, wait, time.Millisecond)
		stop()
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		return pid, err
	}
	dest := filepath.Join(parent, ".snap", "store")
	os.MkdirAll(filepath.Dir(dest), 0o755)
	pid, err := request(dest, time.Minute)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("request: pid %d, %v", pid, err)
	}
	cp := openDirWith(t, dest, Options{ReadOnly: true})
	rs, err := cp.Staged(0, 1000)
	cp.Close()
	if err != nil || len(rs) != 1 || rs[0].From != 1 || rs[0].To != 50 {
		t.Fatalf("checkpoint holds %v (%v), want 1-50", rs, err)
	}
	for _, bad := range []string{filepath.Join(t.TempDir(), "elsewhere"), filepath.Join(dir, "inside"), dest} {
		if _, err := request(bad, time.Minute); err == nil || !strings.Contains(err.Error(), "could not take a checkpoint") {
			t.Fatalf("destination %s: %v, want a refusal", bad, err)
		}
	}
	_, err = RequestCheckpoint(context.Background(), dir, filepath.Join(parent, "never"), 20*time.Millisecond, time.Millisecond)
	var na *NoAnswerError
	if !errors.As(err, &na) || na.PID != os.Getpid() {
		t.Fatalf("unserved request: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "blockhaul-checkpoint*")); len(left) != 0 {
		t.Fatalf("request files left behind: %v", left)
	}
	if _, err := os.Lstat(filepath.Join(dir, SocketName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the endpoint's socket is left behind: %v", err)
	}
}

// TestEndpointStaleSocket: a socket left by a killed job (nobody answers on
// it) does not keep the next job from serving; one a live process answers
// on is refused, naming it; a directory path too long for a socket address
// is served and reached all the same.
func TestEndpointStaleSocket(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	for _, dir := range []string{t.TempDir(), long} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// A killed job's socket: bound, never unlinked, nobody listening.
		stale, err := ListenEndpoint(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if ul, ok := stale.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(false)
			stale.Close()
		} else {
			stale.(unlinkOnClose).Listener.Close()
		}
		if _, err := os.Lstat(filepath.Join(dir, SocketName)); err != nil {
			t.Fatalf("no stale socket to test with: %v", err)
		}
		ln, err := ListenEndpoint(dir)
		if err != nil {
			t.Fatalf("a stale socket blocks the next job: %v", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "pong") })
		ctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- ServeEndpoint(ctx, ln, mux) }()
		_, err = ListenEndpoint(dir)
		var inUse *EndpointInUseError
		if !errors.As(err, &inUse) || !strings.Contains(err.Error(), SocketName) {
			t.Errorf("a second listener beside a live one: %v", err)
		}
		resp, err := EndpointClient(dir).Get(EndpointURL + "/ping")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "pong" {
			t.Errorf("endpoint answered %q", b)
		}
		stop()
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(dir, SocketName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the socket is left behind: %v", dir, err)
		}
	}
}
