package jsonrpc

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockhaul/blockhaul/internal/backoff"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
)

// Client sends JSON-RPC 2.0 calls over HTTP to a set of endpoints. It is
// safe for concurrent use by any number of goroutines; every goroutine it
// starts ends before the method that started it returns. Close releases
// its idle connections when it is no longer needed.
type Client struct {
	cfg       Config
	hc        *http.Client
	transport *http.Transport // built by New, nil when Config.HTTPClient was given
	log       *slog.Logger
	obs       Observer
	eps       []*endpoint
	nextID    atomic.Uint64

	mu sync.Mutex // guards the endpoints' mutable state and rr
	rr int

	firstAt  atomic.Int64 // unix ns of the first request, 0 before it
	heard    atomic.Bool  // some endpoint sent a response (any status)
	lastWait atomic.Int64 // unix ns of the last "waiting" report
}

// Call is one call of a Batch.
type Call struct {
	Method string
	// Params is marshalled with encoding/json (a json.RawMessage is sent as
	// is); nil omits "params".
	Params any
	// Result receives the result: a *json.RawMessage gets the bytes exactly
	// as the node sent them, another pointer is json.Unmarshal'ed into, nil
	// discards it. The raw results answered by one batch request share one
	// allocation (each with its own capacity, so an append to one never
	// reaches the next).
	Result any
	// Err is set by Batch: nil on success, the node's *RPCError, an error
	// decoding into Result, or why the call got no answer.
	Err error
	// Endpoint is set by Batch to the endpoint that answered the call
	// (redacted, as Endpoints names it), "" when none did. A source that
	// finds the answer wrong names it, and can send the call again
	// elsewhere (see Avoid).
	Endpoint string

	answered bool // a node answered (Err, if any, is the call's own)
}

// New returns a Client for cfg, after Validate and EnsureDefaults.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.EnsureDefaults()
	c := &Client{cfg: cfg, hc: cfg.HTTPClient, log: cfg.Logger, obs: cfg.Observer}
	if c.hc == nil {
		c.transport = newTransport(cfg.Concurrency * len(cfg.Endpoints))
		c.hc = &http.Client{
			Transport: c.transport,
			// A JSON-RPC endpoint has no business redirecting a POST; a
			// redirect is reported as the HTTP error it is.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	names := make(map[string]bool, len(cfg.Endpoints))
	for i, u := range cfg.Endpoints {
		ep := &endpoint{
			index:     i,
			url:       u,
			name:      Redact(u),
			secrets:   secretsOf(u),
			sem:       make(chan struct{}, cfg.Concurrency),
			batchSize: cfg.MaxBatch,
		}
		// Two keys of one provider redact alike: tell them apart by index.
		if names[ep.name] {
			ep.name = fmt.Sprintf("%s [%d]", ep.name, i)
		}
		names[ep.name] = true
		if cfg.RPS > 0 {
			ep.rate = cfg.RPS
			ep.limiter = rate.NewLimiter(rate.Limit(cfg.RPS), cfg.Burst)
		}
		c.eps = append(c.eps, ep)
	}
	return c, nil
}

// newTransport is the one transport of a Client: enough idle connections
// per host that every in-flight request can reuse one (endpoints often
// share a host); gzip is requested and decoded transparently.
func newTransport(conns int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          conns,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Close releases the idle connections of the client's own transport. The
// client stays usable.
func (c *Client) Close() {
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// Endpoints returns the endpoints in Config order, redacted.
func (c *Client) Endpoints() []string {
	out := make([]string, len(c.eps))
	for i, ep := range c.eps {
		out[i] = ep.name
	}
	return out
}

// EndpointStats is one endpoint's state and counters, for status output.
type EndpointStats struct {
	Endpoint  string  // redacted
	Requests  uint64  // HTTP requests sent (a batch is one)
	Failures  uint64  // transient failures (throttling not included)
	Throttled uint64  // 429s and throttling errors
	InFlight  int     // attempts waiting for a slot or in flight
	Healthy   bool    // in rotation
	Batches   bool    // takes batch requests
	BatchSize int     // largest batch it is sent now
	RPS       float64 // current rate limit, 0 when unlimited
}

// Stats returns the state of every endpoint, in Config order.
func (c *Client) Stats() []EndpointStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]EndpointStats, len(c.eps))
	for i, ep := range c.eps {
		out[i] = EndpointStats{
			Endpoint:  ep.name,
			Requests:  ep.requests,
			Failures:  ep.failures,
			Throttled: ep.throttled,
			InFlight:  ep.load,
			Healthy:   !ep.unhealthy,
			Batches:   !ep.noBatch,
			BatchSize: ep.batchSize,
			RPS:       ep.rate,
		}
	}
	return out
}

// Call calls method with params and stores the result into result (see
// Call.Result). A JSON-RPC error from the node is returned at once as an
// *RPCError; transient failures are retried, failing over between
// endpoints, and when the budget runs out a *CallError names the method
// and each endpoint's last failure.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	call := Call{Method: method, Params: params, Result: result}
	r, err := newRequest(&call)
	if err != nil {
		return fmt.Errorf("jsonrpc: encode %s params: %w", method, err)
	}
	c.single(ctx, r)
	return call.Err
}

// Batch sends calls as JSON-RPC batches of at most MaxBatch calls each (in
// parallel when there are several), and sets every call's Result or Err.
// An endpoint that refuses batches gets single calls from then on; one
// that finds a batch too large gets smaller ones.
//
// Batch returns nil when a node answered every call; a call's own JSON-RPC
// error is then in its Err, not returned. Otherwise it returns the first
// error of a call that got no answer (retries exhausted, ctx done, params
// that cannot be encoded).
func (c *Client) Batch(ctx context.Context, calls []Call) error {
	reqs := make([]request, 0, len(calls))
	for i := range calls {
		call := &calls[i]
		call.Err, call.answered, call.Endpoint = nil, false, ""
		r, err := newRequest(call)
		if err != nil {
			call.Err = fmt.Errorf("jsonrpc: encode %s params: %w", call.Method, err)
			continue
		}
		reqs = append(reqs, r)
	}
	if len(reqs) <= c.cfg.MaxBatch {
		c.batch(ctx, reqs)
	} else {
		var g errgroup.Group
		g.SetLimit(c.parallelism())
		for start := 0; start < len(reqs); start += c.cfg.MaxBatch {
			chunk := reqs[start:min(start+c.cfg.MaxBatch, len(reqs))]
			g.Go(func() error { c.batch(ctx, chunk); return nil })
		}
		_ = g.Wait() // the goroutines report through each call's Err
	}
	for i := range calls {
		if calls[i].Err != nil && !calls[i].answered {
			return calls[i].Err
		}
	}
	return nil
}

// parallelism bounds the goroutines one Batch starts: more than the
// endpoints' slots would only queue.
func (c *Client) parallelism() int { return c.cfg.Concurrency * len(c.eps) }

// single runs one call to completion: answered, failed for good, or out of
// retries.
func (c *Client) single(ctx context.Context, r request) {
	call := r.call
	failed := c.avoided(ctx)
	last := make([]error, len(c.eps))
	for attempt := 0; ; attempt++ {
		ep, probe := c.pick(failed, false)
		if failed[ep.index] > 0 {
			// Failing over to a fresh endpoint needs no pause; trying one
			// that already failed this call does.
			if err := backoff.Sleep(ctx, c.backoff(attempt-1)); err != nil {
				c.release(ep, probe)
				call.Err = fmt.Errorf("jsonrpc: %s: %w", call.Method, err)
				return
			}
		}
		id := c.nextID.Add(1)
		var body bytes.Buffer
		body.Grow(len(r.method) + len(r.params) + 48)
		appendRequest(&body, r, id)
		oc := c.exchange(ctx, ep, probe, call.Method, asked(r), nil, body.Bytes(), 0, func(b []byte) outcome {
			return parseSingle(ep, b, call, id)
		})
		switch oc.kind {
		case kindOK:
			return
		case kindPermanent:
			call.Err = oc.err
			return
		case kindCanceled:
			call.Err = fmt.Errorf("jsonrpc: %s: %w", call.Method, oc.err)
			return
		}
		failed[ep.index]++
		last[ep.index] = oc.err
		if attempt >= c.cfg.MaxRetries {
			call.Err = c.exhausted(call.Method, attempt+1, last)
			return
		}
		c.retrying(ep, call.Method, attempt, oc)
	}
}

// batch runs a list of at most MaxBatch calls to completion as batch
// requests, resending what is left unanswered, and hands over to single
// calls when no endpoint that takes batches is as available as one that
// does not.
func (c *Client) batch(ctx context.Context, pending []request) {
	if len(pending) == 1 {
		c.single(ctx, pending[0])
		return
	}
	failed := c.avoided(ctx)
	last := make([]error, len(c.eps))
	attempts := 0 // rounds that failed; refusals and shrinking are free
	for len(pending) > 0 {
		ep, probe := c.pick(failed, true)
		if ep == nil {
			c.singles(ctx, pending)
			return
		}
		n := min(len(pending), c.batchSize(ep))
		if n == 1 {
			c.release(ep, probe)
			c.singles(ctx, pending)
			return
		}
		if failed[ep.index] > 0 {
			if err := backoff.Sleep(ctx, c.backoff(attempts-1)); err != nil {
				c.release(ep, probe)
				giveUp(pending, func(r request) error { return fmt.Errorf("jsonrpc: %s: %w", r.call.Method, err) })
				return
			}
		}
		part := pending[:n]
		rest, oc := c.batchAttempt(ctx, ep, probe, part)
		switch oc.kind {
		case kindCanceled:
			giveUp(pending, func(r request) error { return fmt.Errorf("jsonrpc: %s: %w", r.call.Method, oc.err) })
			return
		case kindPermanent:
			giveUp(pending, func(request) error { return oc.err })
			return
		}
		if len(rest) == 0 {
			pending = pending[n:]
		} else {
			pending = append(rest, pending[n:]...)
		}
		if oc.kind == kindOK || oc.kind == kindRefused || oc.kind == kindTooLarge {
			continue
		}
		failed[ep.index]++
		last[ep.index] = oc.err
		if attempts >= c.cfg.MaxRetries {
			ce := c.exhausted("batch", attempts+1, last)
			giveUp(pending, func(r request) error {
				e := *ce
				e.Method = r.call.Method
				return &e
			})
			return
		}
		c.retrying(ep, "batch", attempts, oc)
		attempts++
	}
}

// singles runs calls one by one, in parallel.
func (c *Client) singles(ctx context.Context, reqs []request) {
	if len(reqs) == 1 {
		c.single(ctx, reqs[0])
		return
	}
	var g errgroup.Group
	g.SetLimit(c.parallelism())
	for _, r := range reqs {
		g.Go(func() error { c.single(ctx, r); return nil })
	}
	_ = g.Wait() // each call carries its own Err
}

func giveUp(reqs []request, errFor func(request) error) {
	for _, r := range reqs {
		r.call.Err = errFor(r)
	}
}

// batchAttempt sends part as one batch request to ep. It returns the calls
// of part that got no answer (all of them unless the outcome is kindOK or
// a partial answer) and the outcome.
func (c *Client) batchAttempt(ctx context.Context, ep *endpoint, probe bool, part []request) ([]request, outcome) {
	base := c.nextID.Add(uint64(len(part))) - uint64(len(part)) + 1
	size := 2
	for _, r := range part {
		size += len(r.method) + len(r.params) + 48
	}
	var body bytes.Buffer
	body.Grow(size)
	body.WriteByte('[')
	for i, r := range part {
		if i > 0 {
			body.WriteByte(',')
		}
		appendRequest(&body, r, base+uint64(i))
	}
	body.WriteByte(']')

	rest := part
	what := fmt.Sprintf("a batch of %d calls from %s", len(part), asked(part[0]))
	oc := c.exchange(ctx, ep, probe, "batch", what, nil, body.Bytes(), len(part), func(b []byte) outcome {
		var oc outcome
		rest, oc = parseBatch(ep, b, part, base)
		return oc
	})
	if oc.kind != kindOK && len(rest) == len(part) {
		// rest aliases part, and the caller appends to it.
		rest = append([]request(nil), part...)
	}
	return rest, oc
}

// batchSize is the largest batch ep is sent now.
func (c *Client) batchSize(ep *endpoint) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ep.batchSize
}

// pick chooses and reserves the endpoint for the next attempt; see choose.
// It returns nil only for a batch that should go as single calls.
func (c *Client) pick(failed []int, batch bool) (*endpoint, bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.rr
	c.rr = (c.rr + 1) % len(c.eps)
	ep := choose(c.eps, start, now, failed, batch)
	if ep == nil {
		return nil, false
	}
	return ep, ep.reserve(now)
}

// release undoes a pick that was not used.
func (c *Client) release(ep *endpoint, probe bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ep.load--
	if probe {
		ep.probing = false
	}
}

// retrying reports a failed attempt that will be retried.
func (c *Client) retrying(ep *endpoint, method string, attempt int, oc outcome) {
	c.log.Debug("jsonrpc: attempt failed, retrying", "endpoint", ep.name, "method", method,
		"attempt", attempt+1, "reason", oc.label, "err", oc.err)
	if c.obs != nil {
		c.obs.Retry(ep.name, oc.label)
	}
}

// exhausted builds the error of a call whose retry budget ran out.
func (c *Client) exhausted(method string, attempts int, last []error) *CallError {
	e := &CallError{Method: method, Attempts: attempts, NoHealthy: true}
	for _, err := range last {
		if err != nil {
			e.Errs = append(e.Errs, err)
		}
	}
	c.mu.Lock()
	for _, ep := range c.eps {
		if !ep.unhealthy {
			e.NoHealthy = false
		}
	}
	c.mu.Unlock()
	return e
}

// backoff is the pause before retry n (0-based) on an endpoint that already
// failed the call (jittered, so that many calls failing together do not
// come back together).
func (c *Client) backoff(n int) time.Duration {
	return backoff.Policy{Base: c.cfg.BaseBackoff, Max: c.cfg.MaxBackoff}.Delay(n)
}

type avoidKey struct{}

// Avoid returns a context under which the client sends calls to the named
// endpoints (redacted names, as Call.Endpoint and Endpoints give them) only
// when no other endpoint can take them: an endpoint avoided counts as one
// that already failed the call. A source uses it to ask again elsewhere
// for an answer it found wrong. Names accumulate over nested calls.
func Avoid(ctx context.Context, endpoints ...string) context.Context {
	prev := Avoided(ctx)
	names := make([]string, 0, len(prev)+len(endpoints))
	names = append(names, prev...)
	for _, e := range endpoints {
		if e != "" && !slices.Contains(names, e) {
			names = append(names, e)
		}
	}
	return context.WithValue(ctx, avoidKey{}, names)
}

// Avoided returns the endpoints ctx avoids (see Avoid).
func Avoided(ctx context.Context) []string {
	names, _ := ctx.Value(avoidKey{}).([]string)
	return names
}

// avoided returns the per-endpoint failure counts a call starts with: 1
// for each endpoint ctx avoids, 0 for the others.
func (c *Client) avoided(ctx context.Context) []int {
	failed := make([]int, len(c.eps))
	for _, name := range Avoided(ctx) {
		for _, ep := range c.eps {
			if ep.name == name {
				failed[ep.index] = 1
			}
		}
	}
	return failed
}
