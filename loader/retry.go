package loader

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/internal/backoff"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
)

// spanJob is a span of heights to fetch and what its failures have cost so
// far.
//
// A span that fails with a fault worth retrying — transient, an answer that
// failed verification, or a request whose own retries (the RPC client's
// budget) were spent — goes back to the queue after a backoff, and the
// other spans go on meanwhile. The job fails only when the same heights
// keep failing, or when the source stays down past Config.DownAfter.
//
// Each height of a span has one budget of MaxRetries+1 failures. A failure
// that names its height (an unsound block, a bad answer: HeightError)
// costs that height 1; one that does not costs the whole span 1, or half
// the budget for a request that spent a retry budget of its own, its
// attempts made already (so an endpoint answering 500 for one span ends the
// job after two of its budgets, 12 attempts, never the 36 of one loop
// inside another). Random faults, spread over a span's heights, do not add
// up: a node that answers a fifth of its requests wrongly is ridden out at
// any length, one that answers one height wrongly every time is not.
//
// A span whose whole-span budget runs out after an attempt that overlapped
// a time the source was down (other spans failing too, none served: see
// sourceHealth) is not failing on its own: its
// whole-span budget starts again, and the fetch ends only once the source
// has served nothing for DownAfter (a *DownError).
type spanJob struct {
	span      staging.Range
	whole     int            // failures charged to the whole span
	heights   map[uint64]int // failures charged to one height
	attempts  int            // attempts made, a spent request's counted as made
	inOutage  bool           // an attempt charged to the current budget overlapped a time the source was down
	started   time.Time      // when the last attempt started
	outages   int            // budgets started again for an outage
	notBefore time.Time      // the backoff before the next attempt
}

// DownError ends a fetch whose source served no span for DownAfter, down
// (see sourceHealth): the endpoint stayed down past the bound. Err is the
// last failure.
type DownError struct {
	For, Bound time.Duration
	Err        error
}

func (e *DownError) Error() string {
	return fmt.Sprintf("the source served no span for %s, past its bound of %s (--rpc-down-after), every span failing; last: %v",
		e.For.Round(time.Second), e.Bound, e.Err)
}
func (e *DownError) Unwrap() error { return e.Err }

// Fault marks the error failed (exit 1): the bound of an outage is spent.
func (e *DownError) Fault() fault.Class { return fault.Failed }

// HeightError is implemented by errors about one height of a span (an
// answer for that height that failed a check): the loader charges the
// failure to that height alone.
type HeightError interface {
	error
	FailedHeight() uint64
}

// cost is the budget the span has spent: its whole-span failures and those
// of its worst height.
func (j *spanJob) cost() int { return j.whole + j.worst() }

// worst is the failures charged to the span's worst height.
func (j *spanJob) worst() int {
	worst := 0
	for _, n := range j.heights {
		worst = max(worst, n)
	}
	return worst
}

// failed decides what a failed attempt at j leads to: the same span again
// later (again), or the fetch's error (ferr) when the fault is not worth
// retrying, the span's budget is spent, or the source has been down for
// longer than cfg.DownAfter.
func (j *spanJob) failed(err error, cfg *Config, src *sourceHealth) (again *spanJob, ferr error) {
	budget := cfg.MaxRetries + 1
	spent, wasSpent := fault.Attempts(err)
	if !fault.Retryable(err) && !wasSpent {
		return nil, &FetchError{Range: j.span, Err: err}
	}
	if src.failed(j.span) || src.downSince(j.started) {
		j.inOutage = true
	}
	var he HeightError
	switch {
	case wasSpent && spent > 1:
		j.whole += (budget + 1) / 2
		j.attempts += spent
	case errors.As(err, &he) && he.FailedHeight() >= j.span.From && he.FailedHeight() <= j.span.To:
		if j.heights == nil {
			j.heights = map[uint64]int{}
		}
		j.heights[he.FailedHeight()]++
		j.attempts++
	default:
		j.whole++
		j.attempts++
	}
	now := time.Now()
	if j.cost() >= budget {
		if j.worst() < budget && j.inOutage {
			if quiet := src.quiet(); quiet >= cfg.DownAfter {
				return nil, &FetchError{Range: j.span, Err: &DownError{For: quiet, Bound: cfg.DownAfter, Err: err}}
			}
			// The source was down, not this span: wait for it.
			j.whole, j.inOutage = 0, false
			j.outages++
			next := *j
			next.notBefore = now.Add(backoff.Policy{Base: cfg.BaseBackoff, Max: cfg.MaxBackoff}.Delay(budget + j.outages))
			return &next, nil
		}
		if !wasSpent || j.attempts > spent {
			err = fault.Spent(err, j.attempts)
		}
		return nil, &FetchError{Range: j.span, Err: err}
	}
	next := *j
	next.notBefore = now.Add(backoff.Policy{Base: cfg.BaseBackoff, Max: cfg.MaxBackoff}.Delay(j.cost() - 1 + j.outages))
	return &next, nil
}

// sourceHealth is what the workers know of the source as a whole, to tell
// a span that keeps failing from a source that serves nothing: the source
// is down while two spans or more have failed since it last served one. It
// is safe for concurrent use.
type sourceHealth struct {
	mu      sync.Mutex
	okAt    time.Time           // the last span fetched; the fetch's start before any
	failing map[uint64]struct{} // spans failed since then, by first height
	downAt  time.Time           // the last moment the source was seen down
}

func newSourceHealth(start time.Time) *sourceHealth {
	return &sourceHealth{okAt: start, failing: map[uint64]struct{}{}}
}

// ok records a span fetched.
func (h *sourceHealth) ok() {
	h.mu.Lock()
	h.okAt = time.Now()
	if len(h.failing) >= 2 {
		h.downAt = h.okAt // down until this span came back
	}
	clear(h.failing)
	h.mu.Unlock()
}

// failed records a failed attempt at r, and reports whether the source is
// down now.
func (h *sourceHealth) failed(r staging.Range) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failing[r.From] = struct{}{}
	if len(h.failing) < 2 {
		return false
	}
	h.downAt = time.Now()
	return true
}

// downSince reports whether the source was seen down at t or after: an
// attempt started at t overlapped the outage, even when the source had
// served another span again by the time the attempt failed (its client's
// retries spent during the outage, the failure is the outage's, not the
// span's). A span that fails alone, the others served, never is.
func (h *sourceHealth) downSince(t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.downAt.IsZero() && !h.downAt.Before(t)
}

// isDown reports whether the source is down now.
func (h *sourceHealth) isDown() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.failing) >= 2
}

// quiet is how long the source has served nothing.
func (h *sourceHealth) quiet() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Since(h.okAt)
}

// retryQueue holds the spans waiting for another attempt, and knows when
// the fetch has nothing left to do: the producer is done, no span is in
// flight and none waits. It is safe for concurrent use by the workers.
type retryQueue struct {
	mu       sync.Mutex
	waiting  []spanJob
	inflight int
	noMore   bool          // the producer has handed out every span
	wake     chan struct{} // a worker may have something to take
}

func newRetryQueue() *retryQueue { return &retryQueue{wake: make(chan struct{}, 1)} }

func (q *retryQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns a waiting span (now in flight), or ok false when none waits;
// done is true when the fetch has nothing left to do.
func (q *retryQueue) take() (j spanJob, ok, done bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) > 0 {
		j, q.waiting = q.waiting[0], q.waiting[1:]
		q.inflight++
		if len(q.waiting) > 0 {
			q.signal()
		}
		return j, true, false
	}
	if q.noMore && q.inflight == 0 {
		q.signal() // the next worker finds out too
		return spanJob{}, false, true
	}
	return spanJob{}, false, false
}

// started counts a span from the producer in flight.
func (q *retryQueue) started() {
	q.mu.Lock()
	q.inflight++
	q.mu.Unlock()
}

// requeue puts j back, behind the spans already waiting.
func (q *retryQueue) requeue(j spanJob) {
	q.mu.Lock()
	q.waiting = append(q.waiting, j)
	q.mu.Unlock()
	q.signal()
}

// finished counts an attempt done (its span staged, or requeued first).
func (q *retryQueue) finished() {
	q.mu.Lock()
	q.inflight--
	q.mu.Unlock()
	q.signal()
}

// producerDone records that the producer handed out its last span.
func (q *retryQueue) producerDone() {
	q.mu.Lock()
	q.noMore = true
	q.mu.Unlock()
	q.signal()
}
