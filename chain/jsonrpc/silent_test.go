package jsonrpc

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/internal/rpctest"
)

// A node that accepts connections and never answers: the first failing
// request is named at its timeout, the wait is reported while it lasts, and
// once nothing has answered for SilentAfter the call fails, naming the
// endpoint and what was asked, without spending the rest of its retries.
// It once failed after every retry's timeout (183 s at the defaults),
// silent for the first 90 s.
func TestSilentNodeEndsTheCall(t *testing.T) {
	url := rpctest.Silent(t)
	c, logs := newClient(t, Config{Endpoints: []string{url}, Timeout: 300 * time.Millisecond,
		SilentAfter: 1500 * time.Millisecond, WaitReport: 50 * time.Millisecond, MaxRetries: 1000})
	err := c.Call(context.Background(), "block", map[string]string{"height": "7"}, nil)
	var se *SilentError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *SilentError", err)
	}
	if fault.Retryable(err) || fault.ExitStatus(err) != 1 {
		t.Errorf("a silent node's error is retryable %v, exit %d; want not retried, exit 1", fault.Retryable(err), fault.ExitStatus(err))
	}
	if msg := err.Error(); !strings.Contains(msg, url) || !strings.Contains(msg, `block {"height":"7"}`) || !strings.Contains(msg, "answered nothing") {
		t.Errorf("error %q does not name the endpoint and what was asked", msg)
	}
	if se.For < 1500*time.Millisecond {
		t.Errorf("gave up after %s, before SilentAfter", se.For)
	}
	out := logs.String()
	first := strings.Index(out, "request failed; retrying")
	if first < 0 || !strings.Contains(out[first:], "endpoint="+url) || !strings.Contains(out[first:], "reason=timeout") {
		t.Errorf("the first failing request is not named (Warn, endpoint, reason):\n%s", out)
	}
	if n := strings.Count(out, "level=WARN msg=\"jsonrpc: request failed; retrying\""); n != 1 {
		t.Errorf("%d Warn lines for failed requests, want the first only:\n%s", n, out)
	}
	wait := strings.Index(out, "waiting for the node's first answer")
	if wait < 0 || !strings.Contains(out[wait:], "endpoint="+url) || !strings.Contains(out[wait:], "asked=") {
		t.Errorf("no report of the wait naming the endpoint and the request:\n%s", out)
	}
	// The client stays ended: a later call fails at once, naming it again.
	if err := c.Call(context.Background(), "status", nil, nil); !errors.As(err, &se) || se.Asked != "status" {
		t.Errorf("a later call: %v, want a *SilentError asking status", err)
	}
}

// A node that has answered once is not silent: a later hang is a timeout
// retried as before, not the end of the job.
func TestNodeThatAnsweredIsNotSilent(t *testing.T) {
	var calls sync.Mutex
	n := 0
	release := make(chan struct{})
	srv := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Lock()
		n++
		first := n == 1
		calls.Unlock()
		if first {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":"ok"}`))
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer func() { close(release); srv.Close() }()
	url := "http://" + ln.Addr().String()
	c, _ := newClient(t, Config{Endpoints: []string{url}, Timeout: 100 * time.Millisecond,
		SilentAfter: 10 * time.Millisecond, WaitReport: time.Hour, MaxRetries: 2})
	var res string
	if err := c.Call(context.Background(), "status", nil, &res); err != nil || res != "ok" {
		t.Fatalf("first call: %q, %v", res, err)
	}
	err = c.Call(context.Background(), "status", nil, nil)
	var se *SilentError
	var ce *CallError
	if errors.As(err, &se) || !errors.As(err, &ce) || ce.Attempts != 3 {
		t.Fatalf("a hang after an answer: %v; want the call's retries spent (3 attempts), not a silent node", err)
	}
}
