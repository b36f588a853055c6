package jsonrpc

import (
	"time"

	"github.com/blockhaul/blockhaul/internal/backoff"
	"golang.org/x/time/rate"
)

// endpoint is one node URL and what the client has learned about it. The
// mutable fields are guarded by Client.mu; sem and limiter are safe on
// their own.
type endpoint struct {
	index   int
	url     string   // as configured: never logged, never in an error
	name    string   // redacted
	secrets []string // parts of url that scrub removes from error text
	sem     chan struct{}
	limiter *rate.Limiter // nil when unlimited

	load           int       // attempts assigned: waiting for a slot or in flight
	consecFails    int       // transient failures since the last answer
	unhealthy      bool      // out of rotation until retryAt, then probed
	retryAt        time.Time // when an unhealthy endpoint may be probed
	quarantines    int       // consecutive failed probes (drives the interval)
	probing        bool      // a probe is in flight: others keep away
	pausedUntil    time.Time // throttled: no request before this
	throttleStreak int       // throttles without Retry-After since the last answer
	rate           float64   // current limiter rate (lowered when throttled)
	noBatch        bool      // refused a batch once: single calls only
	batchSize      int       // largest batch it is sent (shrinks on "too large")
	named          bool      // its first failure was logged (Warn)

	requests, failures, throttled uint64
}

// tier orders endpoints for an attempt: 0 available now (healthy, or due a
// probe), 1 healthy but paused by throttling, 2 unhealthy and resting.
func (ep *endpoint) tier(now time.Time) int {
	switch {
	case ep.unhealthy && (now.Before(ep.retryAt) || ep.probing):
		return 2
	case now.Before(ep.pausedUntil):
		return 1
	}
	return 0
}

// rank is an endpoint's place in the choice for one attempt; lower wins.
type rank struct {
	tier   int
	failed int       // failures of this very call on it: fail over first
	until  time.Time // paused endpoints: the one free soonest
	load   int       // then least loaded
}

func (r rank) less(o rank) bool {
	if r.tier != o.tier {
		return r.tier < o.tier
	}
	if r.failed != o.failed {
		return r.failed < o.failed
	}
	if !r.until.Equal(o.until) {
		return r.until.Before(o.until)
	}
	return r.load < o.load
}

func (ep *endpoint) rank(now time.Time, failed []int) rank {
	r := rank{tier: ep.tier(now), failed: failed[ep.index], load: ep.load}
	if r.tier == 1 {
		r.until = ep.pausedUntil
	}
	return r
}

// choose picks the endpoint for the next attempt of a call among eps,
// scanning from start so that ties rotate (round robin). With batch set it
// only considers endpoints that take batches, and returns nil when none is
// as available as the best endpoint overall: single calls then do better
// than waiting. It does not reserve the endpoint.
func choose(eps []*endpoint, start int, now time.Time, failed []int, batch bool) *endpoint {
	var best, bestBatch *endpoint
	var bestRank, bestBatchRank rank
	for i := range eps {
		ep := eps[(start+i)%len(eps)]
		r := ep.rank(now, failed)
		if best == nil || r.less(bestRank) {
			best, bestRank = ep, r
		}
		if batch && !ep.noBatch && (bestBatch == nil || r.less(bestBatchRank)) {
			bestBatch, bestBatchRank = ep, r
		}
	}
	if !batch {
		return best
	}
	if bestBatch == nil || bestBatchRank.tier > bestRank.tier {
		return nil
	}
	return bestBatch
}

// reserve counts an attempt against ep and reports whether it is the probe
// of an unhealthy endpoint whose rest is over.
func (ep *endpoint) reserve(now time.Time) (probe bool) {
	ep.load++
	if ep.unhealthy && !ep.probing && !now.Before(ep.retryAt) {
		ep.probing = true
		return true
	}
	return false
}

// answered records that ep responded (even with an error of the call's
// own): it is alive. It reports whether ep was unhealthy until now.
func (ep *endpoint) answered() (recovered bool) {
	ep.consecFails = 0
	ep.throttleStreak = 0
	if !ep.unhealthy {
		return false
	}
	ep.unhealthy, ep.quarantines, ep.retryAt = false, 0, time.Time{}
	return true
}

// failed records a transient failure at now and reports whether it took
// ep out of rotation just now. An unhealthy endpoint that fails (its probe,
// or a last-resort attempt) rests twice as long as before.
func (ep *endpoint) failed(now time.Time, cfg *Config) (markedUnhealthy bool) {
	ep.failures++
	ep.consecFails++
	switch {
	case ep.unhealthy:
		ep.quarantines++
	case ep.consecFails >= cfg.UnhealthyAfter:
		ep.unhealthy, ep.quarantines = true, 1
		markedUnhealthy = true
	default:
		return false
	}
	ep.retryAt = now.Add(probeInterval(ep.quarantines, cfg))
	return markedUnhealthy
}

func probeInterval(quarantines int, cfg *Config) time.Duration {
	return backoff.Policy{Base: cfg.ProbeInterval, Max: cfg.MaxProbeInterval}.Ceiling(quarantines - 1)
}

// maxRetryAfter bounds how long one Retry-After may pause an endpoint, so a
// misbehaving proxy cannot park it for a day.
const maxRetryAfter = 5 * time.Minute

// throttle pauses ep after it said "too many requests" at now: until
// Retry-After when given, else for a backoff growing with each pause in a
// row. With a rate limit it also halves ep's rate (to at least 1/32 of the
// configured one); answers win it back (see recoverRate). Requests that
// were already in flight when the pause began are throttled together:
// only the first halves the rate and grows the backoff. It reports whether
// this throttle began a pause.
func (ep *endpoint) throttle(now time.Time, retryAfter time.Duration, cfg *Config) (newPause bool) {
	ep.throttled++
	newPause = !now.Before(ep.pausedUntil)
	d := retryAfter
	if d <= 0 {
		d = backoff.Policy{Base: cfg.BaseBackoff, Max: cfg.MaxBackoff}.Ceiling(ep.throttleStreak)
		if newPause {
			ep.throttleStreak++
		}
	}
	d = min(d, maxRetryAfter)
	if until := now.Add(d); until.After(ep.pausedUntil) {
		ep.pausedUntil = until
	}
	if newPause && ep.limiter != nil {
		ep.rate = max(ep.rate/2, cfg.RPS/32)
		ep.limiter.SetLimitAt(now, rate.Limit(ep.rate))
	}
	return newPause
}

// recoverRate moves a throttled endpoint's rate back towards the
// configured one by a fiftieth of it per answered request (additive
// increase after the multiplicative decrease of throttle).
func (ep *endpoint) recoverRate(now time.Time, cfg *Config) {
	if ep.limiter == nil || ep.rate >= cfg.RPS {
		return
	}
	ep.rate = min(cfg.RPS, ep.rate+cfg.RPS/50)
	ep.limiter.SetLimitAt(now, rate.Limit(ep.rate))
}

// shrinkBatch halves the batch size ep is sent after a batch of n was too
// large for it.
func (ep *endpoint) shrinkBatch(n int) (size int) {
	ep.batchSize = max(1, min(ep.batchSize, n/2))
	return ep.batchSize
}
