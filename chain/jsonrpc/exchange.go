package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/internal/backoff"
)

// kind is what an attempt's outcome means for the call and the endpoint.
type kind int

const (
	kindOK        kind = iota // answered (maybe with the call's own RPC error)
	kindTransient             // retry, preferably elsewhere; counts against health
	kindThrottle              // retry after the endpoint's pause
	kindPermanent             // give up at once
	kindRefused               // endpoint takes no batches
	kindTooLarge              // batch or response too large for the endpoint
	kindCanceled              // the caller's context ended
)

type outcome struct {
	kind       kind
	label      string        // Outcome* for the observer and logs
	err        error         // what went wrong, naming the endpoint
	retryAfter time.Duration // pause asked for by the endpoint
	size       int           // kindTooLarge: the batch size that was too large
	sent       bool          // a request went out
	header     http.Header   // a GET's response headers (kindOK)
	silent     bool          // no endpoint answered within SilentAfter (a *SilentError)
}

// exchange makes one attempt on ep: waits for a slot, the end of any
// throttling pause and the rate limiter; posts body (a batch of batchLen
// calls, or a single call when batchLen is 0), or GETs get (a REST path
// below the endpoint's URL, see Get) when it is set; hands a complete 2xx
// body to parse; and records the outcome.
func (c *Client) exchange(ctx context.Context, ep *endpoint, probe bool, method, what string, get *restGet, body []byte, batchLen int, parse func([]byte) outcome) outcome {
	var oc outcome
	var dur time.Duration
	c.firstAt.CompareAndSwap(0, time.Now().UnixNano())
	if c.silent() {
		oc = c.silentOutcome(what)
	} else if err := c.acquire(ctx, ep); err != nil {
		oc = outcome{kind: kindCanceled, label: OutcomeCanceled, err: err}
	} else {
		start := time.Now()
		var buf *bytes.Buffer
		buf, oc = c.post(ctx, ep, get, body, batchLen > 0, what)
		dur = time.Since(start)
		<-ep.sem
		if oc.kind == kindOK {
			retryAfter, header := oc.retryAfter, oc.header
			oc = parse(buf.Bytes())
			if oc.retryAfter == 0 {
				oc.retryAfter = retryAfter
			}
			oc.header = header
		}
		putBuffer(buf)
		oc.sent = true
		if oc.kind == kindTooLarge {
			oc.size = batchLen
		}
	}
	c.finish(ep, probe, method, what, oc, dur)
	return oc
}

// acquire waits for one of ep's slots, then for the end of any pause, then
// for its rate limiter. The slot is held on success.
func (c *Client) acquire(ctx context.Context, ep *endpoint) error {
	select {
	case ep.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		c.mu.Lock()
		until := ep.pausedUntil
		c.mu.Unlock()
		d := time.Until(until)
		if d <= 0 {
			break
		}
		if err := backoff.Sleep(ctx, d); err != nil {
			<-ep.sem
			return err
		}
	}
	if ep.limiter != nil {
		if err := ep.limiter.Wait(ctx); err != nil {
			<-ep.sem
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("rate limit: %w", context.DeadlineExceeded)
		}
	}
	return nil
}

// post sends body (or, with get set, a GET of its path) and reads a 2xx
// response whole into a pooled buffer, or says why not.
func (c *Client) post(ctx context.Context, ep *endpoint, get *restGet, body []byte, batch bool, what string) (*bytes.Buffer, outcome) {
	// Before any endpoint has answered, an attempt ends with the client's
	// bound on silence (SilentAfter) if that comes before its timeout.
	timeout, cut := c.cfg.Timeout, false
	if !c.heard.Load() {
		left := time.Until(time.Unix(0, c.firstAt.Load()).Add(c.cfg.SilentAfter))
		if left <= 0 {
			return nil, c.silentOutcome(what)
		}
		if left < timeout {
			timeout, cut = left, true
		}
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer c.reportWaiting(ep, what, time.Now())()
	req, err := c.newHTTPRequest(actx, ep, get, body)
	if err != nil {
		return nil, outcome{kind: kindPermanent, label: OutcomeHTTPError,
			err: &TransportError{Endpoint: ep.name, Op: "post", Err: errors.New("cannot build request")}}
	}
	c.mu.Lock()
	ep.requests++
	c.mu.Unlock()
	resp, err := c.hc.Do(req)
	if err != nil {
		oc := c.transportFailure(ctx, actx, ep, "post", err)
		if cut && oc.label == OutcomeTimeout && c.silent() {
			return nil, c.silentOutcome(what)
		}
		return nil, oc
	}
	c.heard.Store(true)
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if get != nil {
			return nil, restStatusFailure(ep, resp, get.bearer)
		}
		return nil, statusFailure(ep, resp, batch)
	}
	buf := getBuffer()
	if n := resp.ContentLength; n > 0 && n <= c.cfg.MaxResponseBytes {
		buf.Grow(int(n))
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1)); err != nil {
		putBuffer(buf)
		return nil, c.transportFailure(ctx, actx, ep, "read response", err)
	}
	if int64(buf.Len()) > c.cfg.MaxResponseBytes {
		putBuffer(buf)
		return nil, outcome{kind: kindTooLarge, label: OutcomeTooLarge, err: &TransportError{
			Endpoint: ep.name, Op: "read response", Err: fmt.Errorf("response exceeds %d bytes", c.cfg.MaxResponseBytes)}}
	}
	oc := outcome{kind: kindOK, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	if get != nil {
		oc.header = resp.Header
	}
	return buf, oc
}

// silent reports whether no endpoint has answered anything within
// SilentAfter of the client's first request.
func (c *Client) silent() bool {
	first := c.firstAt.Load()
	return !c.heard.Load() && first != 0 && time.Since(time.Unix(0, first)) >= c.cfg.SilentAfter
}

// silentOutcome ends a call on a client whose endpoints never answered.
func (c *Client) silentOutcome(what string) outcome {
	return outcome{kind: kindPermanent, label: OutcomeTimeout, silent: true, err: &SilentError{
		Endpoints: c.Endpoints(), For: time.Since(time.Unix(0, c.firstAt.Load())), Asked: what}}
}

// reportWaiting logs, each WaitReport while a request started at start is
// waiting for its response, that it is waiting and on what; the client as
// a whole reports at most once a WaitReport. The returned stop ends the
// reports, waiting for one being written.
func (c *Client) reportWaiting(ep *endpoint, what string, start time.Time) (stop func()) {
	every := c.cfg.WaitReport
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	fire := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		now := time.Now()
		last := c.lastWait.Load()
		if next := time.Unix(0, last).Add(every * 9 / 10); last != 0 && now.Before(next) {
			// Another request reported a moment ago: report when the
			// client may again, not a whole period later.
			t.Reset(time.Unix(0, last).Add(every).Sub(now))
			return
		}
		if c.lastWait.CompareAndSwap(last, now.UnixNano()) {
			if c.heard.Load() {
				c.log.Warn("jsonrpc: waiting for the node's answer", "endpoint", ep.name, "asked", what,
					"waiting", now.Sub(start).Round(time.Second), "timeout", c.cfg.Timeout)
			} else {
				first := time.Unix(0, c.firstAt.Load())
				c.log.Warn("jsonrpc: waiting for the node's first answer", "endpoint", ep.name, "asked", what,
					"waiting", now.Sub(start).Round(time.Second), "timeout", c.cfg.Timeout,
					"nothing_answered_for", now.Sub(first).Round(time.Second), "gives_up_after", c.cfg.SilentAfter)
			}
		}
		t.Reset(every)
	}
	mu.Lock()
	t = time.AfterFunc(every, fire)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// transportFailure classifies an error of the HTTP exchange itself.
func (c *Client) transportFailure(ctx, actx context.Context, ep *endpoint, op string, err error) outcome {
	if ctx.Err() != nil {
		return outcome{kind: kindCanceled, label: OutcomeCanceled, err: ctx.Err()}
	}
	// *url.Error repeats the raw URL, credentials and all.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.Is(actx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return outcome{kind: kindTransient, label: OutcomeTimeout, err: &TransportError{
			Endpoint: ep.name, Op: op, Timeout: true, Err: fmt.Errorf("no response within %s", c.cfg.Timeout)}}
	}
	if s := err.Error(); scrub(s, ep.secrets) != s {
		err = errors.New(scrub(s, ep.secrets))
	}
	return outcome{kind: kindTransient, label: OutcomeNetwork, err: &TransportError{Endpoint: ep.name, Op: op, Err: err}}
}

// statusFailure classifies a non-2xx response. A JSON-RPC error in its
// body can say more than the status (throttling, batch too large); the
// body itself is not quoted, as a provider may echo the key in it.
func statusFailure(ep *endpoint, resp *http.Response, batch bool) outcome {
	status := resp.StatusCode
	herr := &HTTPError{Endpoint: ep.name, Status: status}
	code, msg := peekRPCError(resp.Body)
	oc := outcome{err: herr, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	switch {
	case status == http.StatusTooManyRequests || msg != "" && isThrottle(code, msg):
		oc.kind, oc.label = kindThrottle, OutcomeThrottled
	case status == http.StatusRequestEntityTooLarge || isBatchTooLarge(msg):
		oc.kind, oc.label = kindTooLarge, OutcomeTooLarge
	case herr.transient():
		oc.kind, oc.label = kindTransient, OutcomeServerError
	case batch && status >= 400 && status < 500:
		oc.kind, oc.label = kindRefused, OutcomeBatchRefused
	default:
		oc.kind, oc.label = kindPermanent, OutcomeHTTPError
	}
	return oc
}

// peekRPCError reads the start of an error body for a JSON-RPC error
// object, alone or first in an array.
func peekRPCError(body io.Reader) (int, string) {
	b, _ := io.ReadAll(io.LimitReader(body, 4<<10))
	var one response
	switch firstByte(b) {
	case '{':
		if json.Unmarshal(b, &one) != nil {
			return 0, ""
		}
	case '[':
		var many []response
		if json.Unmarshal(b, &many) != nil || len(many) == 0 {
			return 0, ""
		}
		one = many[0]
	}
	if one.Error == nil {
		return 0, ""
	}
	return one.Error.Code, one.Error.Message
}

// finish records an attempt's outcome against ep: health, throttling,
// batch capability, counters; then tells the logger and observer.
func (c *Client) finish(ep *endpoint, probe bool, method, what string, oc outcome, dur time.Duration) {
	now := time.Now()
	var recovered, unhealthy, paused, refused, first bool
	var shrunk int
	var retryIn time.Duration
	var pause time.Duration
	c.mu.Lock()
	ep.load--
	if probe {
		ep.probing = false
	}
	switch {
	case oc.silent:
	case oc.kind == kindTransient && !ep.named:
		// The first failure of an endpoint is named at once (later ones
		// are Debug until it turns unhealthy).
		ep.named, first = true, true
	}
	switch oc.kind {
	case kindOK, kindPermanent, kindRefused, kindTooLarge:
		if oc.silent {
			break
		}
		recovered = ep.answered()
		if oc.kind == kindOK {
			ep.throttleStreak = 0
			ep.recoverRate(now, &c.cfg)
		}
		if oc.kind == kindRefused && !ep.noBatch {
			ep.noBatch, refused = true, true
		}
		if oc.kind == kindTooLarge && oc.size > 1 {
			shrunk = ep.shrinkBatch(oc.size)
		}
	case kindThrottle:
		recovered = ep.answered()
		paused = ep.throttle(now, oc.retryAfter, &c.cfg)
		pause = ep.pausedUntil.Sub(now)
	case kindTransient:
		unhealthy = ep.failed(now, &c.cfg)
		retryIn = ep.retryAt.Sub(now)
		if oc.retryAfter > 0 && now.Add(oc.retryAfter).After(ep.pausedUntil) {
			ep.pausedUntil = now.Add(min(oc.retryAfter, maxRetryAfter))
		}
	}
	c.mu.Unlock()

	if oc.sent && c.obs != nil {
		label := oc.label
		if label == "" {
			label = OutcomeOK
		}
		c.obs.Request(ep.name, method, label, dur)
	}
	if first {
		c.log.Warn("jsonrpc: request failed; retrying", "endpoint", ep.name, "asked", what, "reason", oc.label, "err", oc.err)
	}
	switch {
	case recovered:
		c.log.Info("jsonrpc: endpoint recovered", "endpoint", ep.name)
	case unhealthy:
		c.log.Warn("jsonrpc: endpoint unhealthy, taken out of rotation", "endpoint", ep.name, "probe_in", retryIn, "err", oc.err)
	}
	if paused {
		c.log.Info("jsonrpc: endpoint throttled, pausing it", "endpoint", ep.name, "pause", pause)
	}
	if refused {
		c.log.Info("jsonrpc: endpoint refuses batches, sending it single calls", "endpoint", ep.name, "err", oc.err)
	}
	if shrunk > 0 {
		c.log.Info("jsonrpc: batch too large for endpoint, shrinking", "endpoint", ep.name, "batch_size", shrunk)
	}
}
