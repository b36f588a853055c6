package loader

import (
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
)

// spanJob is a span of heights to fetch and what its failures have cost so
// far.
//
// A span that fails with a fault worth retrying — transient, an answer that
// failed verification, or a request whose own retries (the RPC client's
// budget) were spent — goes back to the queue after a backoff, and the
// other spans go on meanwhile. A span has one budget of MaxRetries+1
// failures: a failed attempt costs 1; a request that spent a retry budget
// of its own costs half the span's budget, since its attempts were already
// made (so an endpoint answering 500 for good ends the job after two of
// its budgets, 12 attempts, never the 36 of one loop inside another). The
// job fails when a span's budget is spent: the same heights kept failing.
type spanJob struct {
	span      staging.Range
	cost      int       // failures so far, weighted as above
	attempts  int       // attempts made, a spent request's counted as made
	notBefore time.Time // the backoff before the next attempt
}

// failed decides what a failed attempt at j leads to: the same span again
// later (again), or the fetch's error (ferr) when the fault is not worth
// retrying or the span's budget is spent.
func (j *spanJob) failed(err error, cfg *Config) (again *spanJob, ferr error) {
	budget := cfg.MaxRetries + 1
	spent, wasSpent := fault.Attempts(err)
	if !fault.Retryable(err) && !wasSpent {
		return nil, &FetchError{Range: j.span, Err: err}
	}
	cost, attempts := 1, 1
	if wasSpent && spent > 1 {
		cost, attempts = (budget+1)/2, spent
	}
	j.cost += cost
	j.attempts += attempts
	if j.cost >= budget {
		if j.attempts > attempts || !wasSpent {
			err = fault.Spent(err, j.attempts)
		}
		return nil, &FetchError{Range: j.span, Err: err}
	}
	next := *j
	next.notBefore = time.Now().Add(backoff(cfg.BaseBackoff, cfg.MaxBackoff, j.cost-1))
	return &next, nil
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
