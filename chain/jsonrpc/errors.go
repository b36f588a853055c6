package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/blockhaul/blockhaul/internal/fault"
)

// ErrNoEndpoint is matched (errors.Is) by a *CallError whose retry budget
// ran out while no endpoint was healthy.
var ErrNoEndpoint = errors.New("jsonrpc: no healthy endpoint")

// RPCError is a JSON-RPC error object returned by an endpoint. Most are
// application errors (a pruned height, an unknown method) and come back at
// once; the source decides what they mean. Throttling errors are the
// exception: they are marked transient (fault.Transient).
//
// The client scrubs Message and Data of the endpoint's credentials before
// anyone sees them (a provider may echo its key back).
type RPCError struct {
	Endpoint string          `json:"-"` // redacted
	Code     int             `json:"code"`
	Message  string          `json:"message"`
	Data     json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return "jsonrpc: " + e.Endpoint + ": " + e.detail() }

// detail is "rpc error CODE: MESSAGE: DATA": the node's reason is often in
// data only (CometBFT's message is a bare "Internal error").
func (e *RPCError) detail() string {
	d := fmt.Sprintf("rpc error %d: %s", e.Code, e.Message)
	if data := e.DataText(); data != "" && data != e.Message {
		d += ": " + data
	}
	return d
}

// maxDataText bounds the data an error message quotes: some nodes put a
// stack trace there.
const maxDataText = 512

// DataText returns the error's data as text: a JSON string unquoted, other
// JSON as sent, "" for none or null; cut at maxDataText bytes.
func (e *RPCError) DataText() string {
	raw := strings.TrimSpace(string(e.Data))
	if raw == "" || raw == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(e.Data, &s) == nil {
		raw = strings.TrimSpace(s)
	}
	if len(raw) > maxDataText {
		cut := maxDataText
		for cut > 0 && !utf8.RuneStart(raw[cut]) {
			cut--
		}
		raw = raw[:cut] + "…"
	}
	return raw
}

// redactRPCError names e's endpoint and scrubs its credentials from what
// the node sent back.
func redactRPCError(ep *endpoint, e *RPCError) {
	e.Endpoint = ep.name
	e.Message = scrub(e.Message, ep.secrets)
	if len(e.Data) == 0 {
		return
	}
	// A JSON string is scrubbed unquoted: its escapes ("\/") could hide a
	// secret from a search of the raw bytes.
	var s string
	if json.Unmarshal(e.Data, &s) == nil {
		if c := scrub(s, ep.secrets); c != s {
			e.Data, _ = json.Marshal(c)
		}
		return
	}
	if d := scrub(string(e.Data), ep.secrets); d != string(e.Data) {
		e.Data = json.RawMessage(d)
	}
}

// Fault marks provider throttling, which passes, as transient; any other
// error object is the node's answer (the source decides what it means).
func (e *RPCError) Fault() fault.Class {
	if e.throttled() {
		return fault.Transient
	}
	return fault.Failed
}

func (e *RPCError) throttled() bool { return isThrottle(e.Code, e.Message) }

// HTTPError is a response with a non-2xx status.
type HTTPError struct {
	Endpoint string // redacted
	Status   int
}

func (e *HTTPError) Error() string { return "jsonrpc: " + e.Endpoint + ": " + e.detail() }

func (e *HTTPError) detail() string {
	if t := http.StatusText(e.Status); t != "" {
		return fmt.Sprintf("HTTP %d %s", e.Status, t)
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// Fault marks 408, 429 and 5xx transient: the endpoint may serve the same
// request later. Other statuses say the request or the URL is wrong.
func (e *HTTPError) Fault() fault.Class {
	if e.transient() {
		return fault.Transient
	}
	return fault.Failed
}

func (e *HTTPError) transient() bool {
	return e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// SilentError ends the calls of a client none of whose endpoints answered
// anything (Config.SilentAfter) since its first request: a node that
// accepts connections and never responds. It is not retried: waiting
// longer on such a node only delays the job's end.
type SilentError struct {
	Endpoints []string // redacted
	For       time.Duration
	Asked     string // the request that was waiting, as "method params"
}

func (e *SilentError) Error() string {
	return fmt.Sprintf("jsonrpc: %s answered nothing in %s (asked: %s): the node accepts connections but sends no response; check that it is up and serving RPC, or give another --rpc",
		strings.Join(e.Endpoints, ", "), e.For.Round(100*time.Millisecond), e.Asked)
}

// Fault marks it a failure no retry is expected to cure (exit status 1).
func (e *SilentError) Fault() fault.Class { return fault.Failed }

// TransportError is a failure to get a well-formed response at all: the
// connection failed or was reset, no response came within the timeout, or
// the body was cut short or not JSON-RPC. All of these are transient.
type TransportError struct {
	Endpoint string // redacted
	Op       string // "post", "read response" or "decode response"
	Timeout  bool   // no response within Config.Timeout
	Err      error
}

func (e *TransportError) Error() string { return "jsonrpc: " + e.Endpoint + ": " + e.detail() }

func (e *TransportError) detail() string { return e.Op + ": " + e.Err.Error() }

func (e *TransportError) Unwrap() error { return e.Err }

// Fault marks the error transient: another attempt, on this or another
// endpoint, may succeed.
func (e *TransportError) Fault() fault.Class { return fault.Transient }

// CallError is returned when a call was not answered within the retry
// budget. It names the method and, for each endpoint that was tried, the
// last failure seen there.
type CallError struct {
	Method   string
	Attempts int
	// NoHealthy is set when no endpoint was healthy at the end; the error
	// then also matches ErrNoEndpoint.
	NoHealthy bool
	// Errs holds the last failure per endpoint tried, in Config.Endpoints
	// order; each is a *HTTPError, *TransportError or throttling *RPCError.
	Errs []error
}

func (e *CallError) Error() string {
	var b strings.Builder
	b.WriteString("jsonrpc: ")
	b.WriteString(e.Method)
	if e.NoHealthy {
		b.WriteString(": no healthy endpoint")
	}
	fmt.Fprintf(&b, ": failed after %d attempts", e.Attempts)
	for i, err := range e.Errs {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(errorDetail(err))
	}
	return b.String()
}

// errorDetail renders one endpoint's failure as "endpoint: what happened",
// without repeating the package prefix inside a CallError.
func errorDetail(err error) string {
	switch e := err.(type) {
	case *RPCError:
		return e.Endpoint + ": " + e.detail()
	case *HTTPError:
		return e.Endpoint + ": " + e.detail()
	case *TransportError:
		return e.Endpoint + ": " + e.detail()
	}
	return err.Error()
}

func (e *CallError) Unwrap() []error { return e.Errs }

func (e *CallError) Is(target error) bool { return target == ErrNoEndpoint && e.NoHealthy }

// Fault marks the error failed, not transient: every failure behind it was
// transient, but the call's one retry budget is spent, so no loop around
// the call retries it again with a budget of its own (one request, one
// budget). A loader may still put the span back in its queue.
func (e *CallError) Fault() fault.Class { return fault.Failed }

// SpentAttempts is the attempts the call made (see fault.Attempts).
func (e *CallError) SpentAttempts() int { return e.Attempts }

// isThrottle recognises provider rate limiting in a JSON-RPC error: -32005
// is the EIP-1474 "limit exceeded" code that Infura and others use, 429 is
// borrowed from HTTP by some; the rest say it in words.
func isThrottle(code int, msg string) bool {
	if code == -32005 || code == 429 {
		return true
	}
	m := strings.ToLower(msg)
	return containsAny(m, "rate limit", "rate-limit", "ratelimit", "too many requests", "throttl", "exceeded the quota", "request limit reached")
}

// isBatchTooLarge recognises an endpoint saying a batch, or the response to
// it, was too big (geth: "batch too large", "response too large").
func isBatchTooLarge(msg string) bool {
	m := strings.ToLower(msg)
	return containsAny(m, "batch too large", "batch is too large", "batch size", "batch limit", "too many batch", "batch request exceeds",
		"response too large", "response too big", "response size", "response is too large")
}

// isBatchRefused recognises an endpoint saying it takes no batches at all.
func isBatchRefused(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "batch") &&
		containsAny(m, "not supported", "unsupported", "not allowed", "not permitted", "disabled", "not enabled", "forbidden")
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
