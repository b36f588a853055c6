package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/internal/rpctest"
)

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"app error", &RPCError{Code: -32000, Message: "height 5 is not available"}, false},
		{"throttle code", &RPCError{Code: -32005, Message: "limit exceeded"}, true},
		{"throttle words", &RPCError{Code: -32000, Message: "Too Many Requests, slow down"}, true},
		{"http 500", &HTTPError{Status: 500}, true},
		{"http 429", &HTTPError{Status: 429}, true},
		{"http 408", &HTTPError{Status: 408}, true},
		{"http 404", &HTTPError{Status: 404}, false},
		{"transport", &TransportError{Op: "post", Err: syscall.ECONNREFUSED}, true},
		// One request, one retry budget: a call whose budget is spent is
		// not retried by a loop around it (issue 21; it was true).
		{"exhausted", &CallError{Method: "m", Errs: []error{&HTTPError{Status: 503}}}, false},
		{"wrapped", fmt.Errorf("fetch block 12: %w", &HTTPError{Status: 502}), true},
		{"canceled", fmt.Errorf("jsonrpc: m: %w", context.Canceled), false},
		{"deadline", context.DeadlineExceeded, false},
		{"bare reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"other", errors.New("boom"), false},
	} {
		if got := fault.Retryable(tc.err); got != tc.want {
			t.Errorf("%s: fault.Retryable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestMessageClassifiers(t *testing.T) {
	for _, tc := range []struct {
		msg                     string
		throttle, large, refuse bool
	}{
		{msg: "batch too large", large: true},
		{msg: "response too large", large: true},
		{msg: "Batch size limit exceeded", large: true},
		{msg: "batch requests are not supported", refuse: true},
		{msg: "Batch is not allowed", refuse: true},
		{msg: "rate limit exceeded", throttle: true},
		{msg: "Your app has exceeded its compute units per second capacity, throttled", throttle: true},
		{msg: "header not found"},
		{msg: "block range limit exceeded"},
	} {
		if got := isThrottle(-32000, tc.msg); got != tc.throttle {
			t.Errorf("isThrottle(%q) = %v", tc.msg, got)
		}
		if got := isBatchTooLarge(tc.msg); got != tc.large {
			t.Errorf("isBatchTooLarge(%q) = %v", tc.msg, got)
		}
		if got := isBatchRefused(tc.msg); got != tc.refuse {
			t.Errorf("isBatchRefused(%q) = %v", tc.msg, got)
		}
	}
}

func TestCallErrorMessage(t *testing.T) {
	e := &CallError{Method: "eth_getBlockByNumber", Attempts: 3, NoHealthy: true, Errs: []error{
		&HTTPError{Endpoint: "https://a.example/v3/***", Status: 503},
		&TransportError{Endpoint: "http://b.example", Op: "post", Err: syscall.ECONNREFUSED},
	}}
	want := "jsonrpc: eth_getBlockByNumber: no healthy endpoint: failed after 3 attempts: " +
		"https://a.example/v3/***: HTTP 503 Service Unavailable; http://b.example: post: connection refused"
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e, want)
	}
	if !errors.Is(e, ErrNoEndpoint) || !errors.Is(e, syscall.ECONNREFUSED) {
		t.Error("CallError does not match ErrNoEndpoint and its causes")
	}
	e.NoHealthy = false
	if errors.Is(e, ErrNoEndpoint) {
		t.Error("ErrNoEndpoint matched while an endpoint is healthy")
	}
}

// TestRPCErrorShowsData checks that the node's reason, which CometBFT sends
// in data under a bare "Internal error", reaches the error message, scrubbed
// of the endpoint's credentials, for single calls and batch elements alike.
func TestRPCErrorShowsData(t *testing.T) {
	s := newServer(t, rpctest.Config{Handler: func(_ string, params json.RawMessage) (any, *rpctest.Error) {
		if strings.Contains(string(params), "echo") {
			// A provider quoting the request URL back, key and all.
			return nil, &rpctest.Error{Code: -32000, Message: "bad key " + secrets[2], Data: map[string]string{"url": "/v3/" + secrets[2] + "?apikey=" + secrets[3]}}
		}
		return nil, &rpctest.Error{Code: -32603, Message: "Internal error", Data: "replay: no recorded block at height 374387"}
	}})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})
	err := c.Call(context.Background(), "block", map[string]string{"height": "374387"}, nil)
	want := "rpc error -32603: Internal error: replay: no recorded block at height 374387"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("single call: %v, want it to say %q", err, want)
	}
	calls := []Call{{Method: "block", Params: []string{"1"}}, {Method: "block", Params: []string{"echo"}}}
	if err := c.Batch(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	if calls[0].Err == nil || !strings.Contains(calls[0].Err.Error(), want) {
		t.Errorf("batch element: %v, want it to say %q", calls[0].Err, want)
	}
	echoed := calls[1].Err
	if echoed == nil || !strings.Contains(echoed.Error(), `{"url":"/v3/***?apikey=***"}`) {
		t.Errorf("echoed credentials: %v, want them masked in message and data", echoed)
	} else {
		assertNoSecrets(t, "error", echoed.Error())
		var re *RPCError
		if errors.As(echoed, &re) {
			assertNoSecrets(t, "data", string(re.Data))
			assertNoSecrets(t, "message", re.Message)
		}
	}
}

func TestRPCErrorDataText(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes, cut on a rune boundary
	for _, tc := range []struct{ data, want string }{
		{``, ""},
		{`null`, ""},
		{`"  height 3 is not available  "`, "height 3 is not available"},
		{`{"reason":"pruned"}`, `{"reason":"pruned"}`},
		{`12`, "12"},
		{`"` + long + `"`, strings.Repeat("é", 256) + "…"},
	} {
		e := &RPCError{Code: 1, Message: "m", Data: json.RawMessage(tc.data)}
		if got := e.DataText(); got != tc.want {
			t.Errorf("DataText(%.40s) = %.40q, want %.40q", tc.data, got, tc.want)
		}
	}
	// Data that repeats the message is not said twice.
	e := &RPCError{Code: -32000, Message: "header not found", Data: json.RawMessage(`"header not found"`)}
	if e.Error() != "jsonrpc: : rpc error -32000: header not found" {
		t.Errorf("got %q", e.Error())
	}
}
