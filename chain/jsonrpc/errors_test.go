package jsonrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
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
		{"exhausted", &CallError{Method: "m", Errs: []error{&HTTPError{Status: 503}}}, true},
		{"wrapped", fmt.Errorf("fetch block 12: %w", &HTTPError{Status: 502}), true},
		{"canceled", fmt.Errorf("jsonrpc: m: %w", context.Canceled), false},
		{"deadline", context.DeadlineExceeded, false},
		{"bare reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"other", errors.New("boom"), false},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("%s: Retryable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
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
