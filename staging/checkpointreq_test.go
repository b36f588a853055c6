package staging

import (
	"context"
	"errors"
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
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Bind(chain.FamilyCometBFT, "c"); err != nil {
		t.Fatal(err)
	}
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
		served := make(chan int, 1)
		stop := make(chan struct{})
		go func() { // the holder's poll loop, in miniature
			n := 0
			for {
				select {
				case <-stop:
					served <- n
					return
				default:
					n += s.ServeCheckpointRequests()
				}
			}
		}()
		pid, err := RequestCheckpoint(context.Background(), dir, dest, wait, time.Millisecond)
		close(stop)
		<-served
		return pid, err
	}
	dest := filepath.Join(parent, ".snap", "store")
	os.MkdirAll(filepath.Dir(dest), 0o755)
	pid, err := request(dest, time.Minute)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("request: pid %d, %v", pid, err)
	}
	cp, err := Open(dest, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
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
	if left, _ := filepath.Glob(filepath.Join(dir, checkpointReqPrefix+"*")); len(left) != 0 {
		t.Fatalf("request files left behind: %v", left)
	}
}
