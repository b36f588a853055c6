// Package backoff is the one backoff of blockhaul's retry loops: a wait
// that starts at a base, doubles with each retry and stops growing at a
// cap, with one jitter. Each loop keeps its own bound (how many tries) and
// its own idea of what is retryable; it asks this package only how long to
// wait, and waits with Sleep.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff: Base·2^n, capped at Max. The zero
// Policy waits nothing. A Policy is a value, safe for concurrent use.
type Policy struct {
	Base, Max time.Duration
}

// Ceiling is the wait before retry n (0-based) without jitter: Base·2^n
// capped at Max (n <= 0 gives Base, or Max if that is smaller). It is what
// a pause that must not be shortened uses, such as an endpoint's
// quarantine.
func (p Policy) Ceiling(n int) time.Duration {
	if n <= 0 {
		return min(p.Base, p.Max)
	}
	if n >= 62 || p.Base > p.Max>>n {
		return p.Max
	}
	return p.Base << n
}

// Delay is the wait before retry n (0-based): Ceiling(n) with the jitter,
// drawn uniformly from its upper half ([c/2, c]). Half keeps callers that
// failed together from coming back together; the other half keeps a bound
// given in tries a bound in time too (ten tries of a database session ride
// out a restart however the draws fall).
func (p Policy) Delay(n int) time.Duration {
	return Jitter(p.Ceiling(n))
}

// Jitter draws a wait uniformly from [c/2, c] (0 for c <= 0): the one
// jitter, for a caller whose ceiling is not a Policy's.
func Jitter(c time.Duration) time.Duration {
	if c <= 0 {
		return 0
	}
	half := c / 2
	return half + rand.N(c-half+1)
}

// Sleep waits d, or until ctx ends (then it returns ctx.Err()). A d <= 0
// returns at once, nil unless ctx has already ended.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
