package jsonrpc

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func testConfig() Config {
	return Config{UnhealthyAfter: 2, ProbeInterval: time.Second, MaxProbeInterval: 4 * time.Second,
		BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, RPS: 100}.EnsureDefaults()
}

func TestHealthQuarantineAndProbe(t *testing.T) {
	cfg := testConfig()
	ep := &endpoint{}
	if ep.failed(t0, &cfg) {
		t.Fatal("unhealthy after one failure, threshold is 2")
	}
	if !ep.failed(t0, &cfg) || !ep.unhealthy {
		t.Fatal("not unhealthy after two consecutive failures")
	}
	steps := []struct {
		at        time.Duration // since t0
		tier      int
		probe     bool
		fail      bool
		nextProbe time.Duration // retryAt - t0 after the failure
	}{
		{at: 500 * time.Millisecond, tier: 2},
		{at: time.Second, tier: 0, probe: true, fail: true, nextProbe: 3 * time.Second}, // 1s + 2s
		{at: 2 * time.Second, tier: 2},
		{at: 3 * time.Second, tier: 0, probe: true, fail: true, nextProbe: 7 * time.Second}, // + 4s (the cap)
		{at: 7 * time.Second, tier: 0, probe: true, fail: true, nextProbe: 11 * time.Second},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		if got := ep.tier(now); got != s.tier {
			t.Fatalf("step %d: tier %d, want %d", i, got, s.tier)
		}
		if s.tier != 0 {
			continue
		}
		if probe := ep.reserve(now); probe != s.probe {
			t.Fatalf("step %d: probe %v, want %v", i, probe, s.probe)
		}
		// While the probe is out, nobody else is sent there.
		if ep.tier(now) != 2 || ep.reserve(now) {
			t.Fatalf("step %d: a second probe was allowed", i)
		}
		ep.load -= 2
		ep.probing = false
		if s.fail {
			ep.failed(now, &cfg)
			if got := ep.retryAt.Sub(t0); got != s.nextProbe {
				t.Fatalf("step %d: next probe at +%v, want +%v", i, got, s.nextProbe)
			}
		}
	}
	if !ep.answered() || ep.unhealthy || ep.consecFails != 0 || ep.tier(t0) != 0 {
		t.Fatalf("an answer did not restore the endpoint: %+v", ep)
	}
	if ep.answered() {
		t.Error("recovered twice")
	}
}

func TestChoose(t *testing.T) {
	cfg := testConfig()
	mk := func(n int) []*endpoint {
		eps := make([]*endpoint, n)
		for i := range eps {
			eps[i] = &endpoint{index: i, batchSize: 10}
		}
		return eps
	}
	for _, tc := range []struct {
		name   string
		setup  func([]*endpoint)
		failed []int
		start  int
		batch  bool
		want   int // -1: nil
	}{
		{name: "round robin on ties", start: 1, want: 1},
		{name: "least loaded", setup: func(e []*endpoint) { e[0].load = 3; e[1].load = 1; e[2].load = 2 }, want: 1},
		{name: "fail over from an endpoint that failed this call", setup: func(e []*endpoint) { e[1].load = 5 }, failed: []int{1, 0, 1}, want: 1},
		{name: "skip unhealthy", setup: func(e []*endpoint) {
			e[0].unhealthy, e[0].retryAt = true, t0.Add(time.Second)
		}, want: 1},
		{name: "probe due", setup: func(e []*endpoint) {
			e[0].unhealthy, e[0].retryAt = true, t0
			e[1].load, e[2].load = 1, 1
		}, want: 0},
		{name: "skip paused", setup: func(e []*endpoint) { e[0].pausedUntil = t0.Add(time.Second) }, want: 1},
		{name: "all paused: soonest free", setup: func(e []*endpoint) {
			e[0].pausedUntil = t0.Add(3 * time.Second)
			e[1].pausedUntil = t0.Add(time.Second)
			e[2].pausedUntil = t0.Add(2 * time.Second)
		}, want: 1},
		{name: "all unhealthy: still one", setup: func(e []*endpoint) {
			for _, ep := range e {
				ep.unhealthy, ep.retryAt = true, t0.Add(time.Minute)
			}
		}, failed: []int{1, 1, 0}, want: 2},
		{name: "batch skips refusing endpoint", setup: func(e []*endpoint) { e[0].noBatch = true }, batch: true, want: 1},
		{name: "batch refused everywhere", setup: func(e []*endpoint) {
			for _, ep := range e {
				ep.noBatch = true
			}
		}, batch: true, want: -1},
		{name: "batch: singles beat waiting", setup: func(e []*endpoint) {
			e[0].noBatch = true
			e[1].pausedUntil, e[2].pausedUntil = t0.Add(time.Second), t0.Add(time.Second)
		}, batch: true, want: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eps := mk(3)
			if tc.setup != nil {
				tc.setup(eps)
			}
			failed := tc.failed
			if failed == nil {
				failed = make([]int, 3)
			}
			got := choose(eps, tc.start, t0, failed, tc.batch)
			switch {
			case tc.want < 0 && got != nil:
				t.Errorf("chose %d, want none", got.index)
			case tc.want >= 0 && (got == nil || got.index != tc.want):
				t.Errorf("chose %v, want %d", got, tc.want)
			}
		})
	}
	_ = cfg
}

func TestThrottleAndRecoverRate(t *testing.T) {
	cfg := testConfig()
	ep := &endpoint{rate: cfg.RPS, limiter: rate.NewLimiter(rate.Limit(cfg.RPS), 1)}
	now := t0
	if !ep.throttle(now, 0, &cfg) {
		t.Error("first throttle not reported as a new pause")
	}
	if ep.rate != 50 || float64(ep.limiter.Limit()) != 50 {
		t.Errorf("rate after a throttle %v (limiter %v), want 50", ep.rate, ep.limiter.Limit())
	}
	if got := ep.pausedUntil.Sub(now); got != cfg.BaseBackoff {
		t.Errorf("pause without Retry-After %v, want base backoff %v", got, cfg.BaseBackoff)
	}
	// Requests in flight when the pause began come back throttled too.
	if ep.throttle(now, 0, &cfg) || ep.rate != 50 {
		t.Errorf("a throttle within the pause began a new one (rate %v)", ep.rate)
	}
	// After the pause, a new throttle pauses twice as long.
	now = ep.pausedUntil
	if !ep.throttle(now, 0, &cfg) || ep.rate != 25 {
		t.Errorf("throttle after the pause: rate %v, want 25", ep.rate)
	}
	if got := ep.pausedUntil.Sub(now); got != 2*cfg.BaseBackoff {
		t.Errorf("second pause %v, want it doubled", got)
	}
	now = ep.pausedUntil
	ep.throttle(now, 30*time.Second, &cfg)
	if got := ep.pausedUntil.Sub(now); got != 30*time.Second {
		t.Errorf("Retry-After 30s paused for %v", got)
	}
	now = ep.pausedUntil
	ep.throttle(now, time.Hour, &cfg)
	if got := ep.pausedUntil.Sub(now); got != maxRetryAfter {
		t.Errorf("Retry-After 1h paused for %v, want the cap %v", got, maxRetryAfter)
	}
	for range 10 {
		now = ep.pausedUntil
		ep.throttle(now, 0, &cfg)
	}
	if ep.rate != cfg.RPS/32 {
		t.Errorf("rate floor %v, want %v", ep.rate, cfg.RPS/32)
	}
	if ep.throttled != 15 {
		t.Errorf("%d throttles counted, want 15", ep.throttled)
	}
	for range 100 {
		ep.recoverRate(now, &cfg)
	}
	if ep.rate != cfg.RPS || float64(ep.limiter.Limit()) != cfg.RPS {
		t.Errorf("rate not recovered: %v", ep.rate)
	}
}

func TestShrinkBatch(t *testing.T) {
	ep := &endpoint{batchSize: 50}
	for _, tc := range []struct{ n, want int }{{50, 25}, {25, 12}, {40, 12}, {3, 1}, {2, 1}} {
		if got := ep.shrinkBatch(tc.n); got != tc.want {
			t.Errorf("shrink after %d too large: %d, want %d", tc.n, got, tc.want)
		}
	}
}

// The pause before a retry grows from BaseBackoff, stops at MaxBackoff and
// is jittered (the curve and the jitter are internal/backoff's).
func TestBackoff(t *testing.T) {
	c := &Client{cfg: Config{BaseBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}
	for _, tc := range []struct {
		n        int
		lo, high time.Duration
	}{{-1, 5 * time.Millisecond, 10 * time.Millisecond}, {1, 10 * time.Millisecond, 20 * time.Millisecond}, {3, 25 * time.Millisecond, 50 * time.Millisecond}, {40, 25 * time.Millisecond, 50 * time.Millisecond}} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := c.backoff(tc.n)
			if d < tc.lo || d > tc.high {
				t.Fatalf("backoff(%d) = %v outside [%v, %v]", tc.n, d, tc.lo, tc.high)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("backoff(%d) is not jittered", tc.n)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-3", 0},
		{"3", 3 * time.Second},
		{"soon", 0},
		{"999999999", maxRetryAfter},
		{t0.Add(90 * time.Second).Format("Mon, 02 Jan 2006 15:04:05 GMT"), 90 * time.Second},
		{t0.Add(-time.Minute).Format("Mon, 02 Jan 2006 15:04:05 GMT"), 0},
	} {
		if got := parseRetryAfter(tc.v, t0); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
