package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/internal/backoff"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// Some chains' nodes serve a REST API rather than JSON-RPC (an Aptos
// fullnode's /v1). Get sends such a node GET requests with the discipline
// of every call: the same endpoints, health tracking and failover, rate
// limits and in-flight caps, backoff with jitter, Retry-After and 429
// pauses, the same retry budget, redaction and observer.

// restGet is one GET: a path (and query) below the endpoint's URL, and the
// bearer token to send when the endpoint's URL carries none.
type restGet struct {
	path   string
	bearer string
}

// Response is a REST answer: its body exactly as sent, its headers, and
// the endpoint that answered (redacted, as Endpoints names it).
type Response struct {
	Body     []byte
	Header   http.Header
	Endpoint string
}

// StatusError is a REST answer with a status that is not retried (a 4xx
// other than 408 and 429): what the node said, for the source to read (an
// Aptos node's error_code: block_not_found, block_pruned, …). The message
// is scrubbed of the endpoint's credentials and cut short.
type StatusError struct {
	Endpoint string // redacted
	Status   int
	Code     string // the body's error_code, "" when it has none
	Message  string // the body's message, "" when it has none
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("jsonrpc: %s: HTTP %d", e.Endpoint, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Fault marks the error failed: the node answered, and will answer so
// again.
func (e *StatusError) Fault() fault.Class { return fault.Failed }

// Get GETs path (a path with its query, such as
// "/blocks/by_height/5?with_transactions=true") below an endpoint's URL,
// failing over between endpoints and retrying what is transient as Call
// does; a status that is not retried comes back at once as a
// *StatusError. The Authorization header is "Bearer " and the endpoint
// URL's userinfo (its password, else its user name) when it has one, else
// bearer when it is not "". Under Avoid, the avoided endpoints are asked
// last.
func (c *Client) Get(ctx context.Context, path, bearer string) (*Response, error) {
	get := &restGet{path: path, bearer: bearer}
	method := "GET " + strings.SplitN(path, "?", 2)[0]
	failed := c.avoided(ctx)
	last := make([]error, len(c.eps))
	for attempt := 0; ; attempt++ {
		ep, probe := c.pick(failed, false)
		if failed[ep.index] > 0 {
			if err := backoff.Sleep(ctx, c.backoff(attempt-1)); err != nil {
				c.release(ep, probe)
				return nil, fmt.Errorf("jsonrpc: %s: %w", method, err)
			}
		}
		var body []byte
		oc := c.exchange(ctx, ep, probe, method, method, get, nil, 0, func(b []byte) outcome {
			body = bytes.Clone(b)
			return outcome{kind: kindOK}
		})
		switch oc.kind {
		case kindOK:
			return &Response{Body: body, Header: oc.header, Endpoint: ep.name}, nil
		case kindPermanent:
			return nil, oc.err
		case kindCanceled:
			return nil, fmt.Errorf("jsonrpc: %s: %w", method, oc.err)
		}
		failed[ep.index]++
		last[ep.index] = oc.err
		if attempt >= c.cfg.MaxRetries {
			return nil, c.exhausted(method, attempt+1, last)
		}
		c.retrying(ep, method, attempt, oc)
	}
}

// newHTTPRequest builds an attempt's request: a JSON-RPC POST of body, or
// the GET of get with its bearer token (the URL's userinfo is sent as the
// token, never as basic authentication).
func (c *Client) newHTTPRequest(ctx context.Context, ep *endpoint, get *restGet, body []byte) (*http.Request, error) {
	if get == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		return req, nil
	}
	u, err := url.Parse(ep.url)
	if err != nil {
		return nil, err
	}
	token := get.bearer
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			token = p
		} else {
			token = u.User.Username()
		}
		u.User = nil
	}
	p, q, _ := strings.Cut(get.path, "?")
	u.Path = strings.TrimSuffix(u.Path, "/") + p
	u.RawPath = ""
	if q != "" {
		if u.RawQuery != "" {
			u.RawQuery += "&" + q
		} else {
			u.RawQuery = q
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

// restStatusFailure classifies a GET's non-2xx response: 429 pauses the
// endpoint (for its Retry-After when given), 408 and 5xx are transient,
// the rest a *StatusError with the node's error code.
func restStatusFailure(ep *endpoint, resp *http.Response, bearer string) outcome {
	status := resp.StatusCode
	oc := outcome{err: &HTTPError{Endpoint: ep.name, Status: status}, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	herr := &HTTPError{Status: status}
	switch {
	case status == http.StatusTooManyRequests:
		oc.kind, oc.label = kindThrottle, OutcomeThrottled
	case herr.transient():
		oc.kind, oc.label = kindTransient, OutcomeServerError
	default:
		var b struct {
			Message   string `json:"message"`
			ErrorCode string `json:"error_code"`
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		_ = json.Unmarshal(raw, &b)
		secrets := ep.secrets
		if len(bearer) >= 4 {
			secrets = append(secrets[:len(secrets):len(secrets)], bearer)
		}
		msg := scrub(b.Message, secrets)
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		oc.kind, oc.label = kindPermanent, OutcomeHTTPError
		oc.err = &StatusError{Endpoint: ep.name, Status: status, Code: scrub(b.ErrorCode, secrets), Message: msg}
	}
	return oc
}
