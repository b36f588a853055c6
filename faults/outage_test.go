package faults

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/bench"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
)

// outageNode serves a synthetic chain of to blocks, except that after its
// first `after` requests it answers 503 to the next `down` (negative: to
// every one after them).
func outageNode(t *testing.T, to uint64, after, down int64) (url string, requests *atomic.Int64) {
	t.Helper()
	srv, err := bench.NewRPCServer(context.Background(), cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 7}), 1, to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	requests = &atomic.Int64{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		if n > after && (down < 0 || n <= after+down) {
			http.Error(w, "node restarting", http.StatusServiceUnavailable)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, requests
}

// TestNodeDownIsWaitedOutWithinItsBound: a node that stops answering part
// way (every request 503, many times the retries of any span) and comes
// back is waited out, and the fetch completes; one that stays down past
// --rpc-down-after ends the job with exit 1 naming the bound. (The first
// span to spend its retries ended the job, whether the node came back or
// not.)
func TestNodeDownIsWaitedOutWithinItsBound(t *testing.T) {
	const to = 400
	url, requests := outageNode(t, to, 10, 300)
	j := newJob(t)
	j.extra = []string{"--rpc", url, "--rpc-down-after", "10m"}
	code, out := blockhaul(t, 10*time.Minute, j.args("fetch", 1, to)...)
	if code != 0 {
		t.Fatalf("through 300 failed requests: exit %d: %s\n%s", code, errorLine(out), tail(out, 40))
	}
	if n := requests.Load(); n <= 310 {
		t.Fatalf("%d requests: the outage did not happen", n)
	}
	report(t, "node down for 300 requests: exit 0 after %d requests", requests.Load())

	url, _ = outageNode(t, to, 10, -1)
	j = newJob(t)
	j.extra = []string{"--rpc", url, "--rpc-down-after", "3s"}
	code, out = blockhaul(t, 10*time.Minute, j.args("fetch", 1, to)...)
	line := jobError(out)
	if code != 1 || !strings.Contains(line, "past its bound of 3s (--rpc-down-after)") || !strings.Contains(line, "503") {
		t.Fatalf("a node down for good: exit %d, want 1 naming the bound and the last failure: %s\n%s", code, line, tail(out, 30))
	}
	report(t, "node down for good: exit 1, %s", line[strings.Index(line, "the source"):])
}
