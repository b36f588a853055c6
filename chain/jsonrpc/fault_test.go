package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/internal/rpctest"
)

// arrivals records when each request reached the server, in request order.
type arrivals struct {
	mu sync.Mutex
	at map[int64]time.Time
}

func (a *arrivals) wrap(s rpctest.Schedule) rpctest.Schedule {
	a.at = map[int64]time.Time{}
	return func(n int64) rpctest.Fault {
		a.mu.Lock()
		a.at[n] = time.Now()
		a.mu.Unlock()
		return s(n)
	}
}

func (a *arrivals) of(n int64) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at[n]
}

func TestThrottleHonoursRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault rpctest.Fault
	}{
		{"http 429", rpctest.Fault{Kind: rpctest.Status, Status: http.StatusTooManyRequests, RetryAfter: "1"}},
		{"rpc -32005", rpctest.Fault{Kind: rpctest.RPCError, Code: -32005, Message: "daily request count exceeded, request rate limited", RetryAfter: "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var arr arrivals
			s := newServer(t, rpctest.Config{Faults: arr.wrap(rpctest.Sequence(tc.fault))})
			rec := &recorder{}
			c, logs := newClient(t, Config{Endpoints: []string{credURL(s)}, Observer: rec})
			callEcho(t, c, 42)
			if s.Requests() != 2 {
				t.Fatalf("server saw %d requests, want the throttled one and one retry", s.Requests())
			}
			// The 429 left the server after arrival 1: a retry before
			// arrival 1 + Retry-After ignored it.
			if gap := arr.of(2).Sub(arr.of(1)); gap < time.Second {
				t.Errorf("retry came %v after the throttled request, before Retry-After: 1", gap)
			}
			st := c.Stats()[0]
			if st.Throttled != 1 || !st.Healthy || st.Failures != 0 {
				t.Errorf("stats %+v: want 1 throttle, healthy, no failures", st)
			}
			_, retries, _ := rec.snapshot()
			if !slices.Equal(retries, []string{OutcomeThrottled}) {
				t.Errorf("observer retries %v", retries)
			}
			if !strings.Contains(logs.String(), "throttled") {
				t.Errorf("throttling not logged:\n%s", logs)
			}
		})
	}
}

func TestThrottleLowersRate(t *testing.T) {
	s := newServer(t, rpctest.Config{Faults: rpctest.Sequence(rpctest.Fault{Kind: rpctest.Status, Status: http.StatusTooManyRequests})})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}, RPS: 1000, Burst: 10})
	if err := c.Call(context.Background(), "echo", nil, nil); err != nil {
		t.Fatal(err)
	}
	// Halved by the 429, then won back by a fiftieth per answer.
	if got, want := c.Stats()[0].RPS, 500.0+20; got != want {
		t.Errorf("rate after a 429 and one answer: %v, want %v", got, want)
	}
}

func TestTransientFailuresRetried(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   rpctest.Fault
		outcome string
	}{
		{"500", rpctest.Fault{Kind: rpctest.Status, Status: 500}, OutcomeServerError},
		{"503", rpctest.Fault{Kind: rpctest.Status, Status: 503}, OutcomeServerError},
		{"408", rpctest.Fault{Kind: rpctest.Status, Status: 408}, OutcomeServerError},
		{"truncated body", rpctest.Fault{Kind: rpctest.Truncate}, OutcomeBadResponse},
		{"connection reset", rpctest.Fault{Kind: rpctest.Reset}, OutcomeNetwork},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, rpctest.Config{Faults: rpctest.Sequence(tc.fault, tc.fault)})
			rec := &recorder{}
			c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}, Observer: rec, UnhealthyAfter: 5})
			callEcho(t, c, "x")
			if s.Requests() != 3 {
				t.Errorf("server saw %d requests, want 2 failures and a success", s.Requests())
			}
			outcomes, retries, names := rec.snapshot()
			if !slices.Equal(outcomes, []string{tc.outcome, tc.outcome, OutcomeOK}) {
				t.Errorf("observed outcomes %v", outcomes)
			}
			if !slices.Equal(retries, []string{tc.outcome, tc.outcome}) {
				t.Errorf("observed retries %v", retries)
			}
			for name := range names {
				assertNoSecrets(t, "observer label", name)
			}
			if st := c.Stats()[0]; st.Failures != 2 || !st.Healthy || st.Requests != 3 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestBatchRetriedAfterTruncatedBody(t *testing.T) {
	s := newServer(t, rpctest.Config{Faults: rpctest.Sequence(rpctest.Fault{Kind: rpctest.Truncate}), Shuffle: true})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})
	calls, results := numbered(20)
	if err := c.Batch(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	checkEchoed(t, calls, results)
	if s.Batches() != 2 {
		t.Errorf("server saw %d batches, want the truncated one and its retry", s.Batches())
	}
}

func TestTimeoutRetried(t *testing.T) {
	s := newServer(t, rpctest.Config{Faults: rpctest.Sequence(rpctest.Fault{Kind: rpctest.Hang})})
	rec := &recorder{}
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}, Timeout: 100 * time.Millisecond, Observer: rec})
	start := time.Now()
	callEcho(t, c, 7)
	if s.Requests() != 2 {
		t.Errorf("server saw %d requests, want the hung one and a retry", s.Requests())
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("returned after %v: the hung request cannot have timed out", d)
	}
	if outcomes, _, _ := rec.snapshot(); !slices.Equal(outcomes, []string{OutcomeTimeout, OutcomeOK}) {
		t.Errorf("observed outcomes %v", outcomes)
	}
}

func TestRPCErrorNotRetried(t *testing.T) {
	s := newServer(t, rpctest.Config{Handler: func(string, json.RawMessage) (any, *rpctest.Error) {
		return nil, &rpctest.Error{Code: -32603, Message: "height 100 is not available, lowest height is 2000", Data: "pruned"}
	}})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})
	err := c.Call(context.Background(), "block", map[string]string{"height": "100"}, nil)
	var re *RPCError
	if !errors.As(err, &re) {
		t.Fatalf("err %v, want *RPCError", err)
	}
	if re.Code != -32603 || !strings.Contains(re.Message, "not available") || string(re.Data) != `"pruned"` || re.Endpoint != c.Endpoints()[0] {
		t.Errorf("RPCError %+v", re)
	}
	if fault.Retryable(err) {
		t.Error("application error classified retryable")
	}
	if s.Requests() != 1 {
		t.Errorf("server saw %d requests, want 1", s.Requests())
	}
	if !strings.Contains(err.Error(), c.Endpoints()[0]) {
		t.Errorf("error does not name the endpoint: %v", err)
	}
	assertNoSecrets(t, "error", err.Error())
}

func TestHTTPClientErrorNotRetried(t *testing.T) {
	s := newServer(t, rpctest.Config{Faults: rpctest.Always(rpctest.Fault{Kind: rpctest.Status, Status: http.StatusUnauthorized})})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})
	err := c.Call(context.Background(), "echo", nil, nil)
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 401 {
		t.Fatalf("err %v, want *HTTPError 401", err)
	}
	if fault.Retryable(err) || s.Requests() != 1 {
		t.Errorf("retryable %v, requests %d: a 401 is final", fault.Retryable(err), s.Requests())
	}
	assertNoSecrets(t, "error", err.Error())
}

func TestResultDecodeErrorNotRetried(t *testing.T) {
	s := newServer(t, rpctest.Config{})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})
	var n int
	err := c.Call(context.Background(), "echo", []string{"not a number"}, &n)
	if err == nil || fault.Retryable(err) || s.Requests() != 1 {
		t.Fatalf("err %v (retryable %v) after %d requests; want a final decode error", err, fault.Retryable(err), s.Requests())
	}
}

func TestCallerCancelStopsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newServer(t, rpctest.Config{Faults: func(int64) rpctest.Fault {
		cancel() // the client is waiting for this very response
		return rpctest.Fault{Kind: rpctest.Hang}
	}})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})
	err := c.Call(ctx, "echo", nil, nil)
	if !errors.Is(err, context.Canceled) || fault.Retryable(err) {
		t.Fatalf("err %v, want context.Canceled, not retryable", err)
	}
	if s.Requests() != 1 {
		t.Errorf("server saw %d requests after cancel", s.Requests())
	}
}

func TestEndpointDiesMidRun(t *testing.T) {
	dying := newServer(t, rpctest.Config{DieAfter: 10})
	healthy := newServer(t, rpctest.Config{})
	c, logs := newClient(t, Config{
		Endpoints:      []string{credURL(dying), credURL(healthy) + "&other=1"},
		MaxRetries:     3,
		UnhealthyAfter: 2,
		ProbeInterval:  time.Hour, // no probe during the test
	})
	const calls = 200
	var failures atomic.Int64
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				var got []int
				if err := c.Call(context.Background(), "echo", []int{i}, &got); err != nil || len(got) != 1 || got[0] != i {
					failures.Add(1)
					t.Errorf("call %d: %v (result %v)", i, err, got)
				}
			}
		})
	}
	for i := range calls {
		work <- i
	}
	close(work)
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d calls failed with a healthy endpoint left", failures.Load())
	}
	if dying.Calls() > 10 || dying.Calls() < 1 {
		t.Errorf("dying endpoint answered %d calls, want 1..10", dying.Calls())
	}
	// A call the dying server answered as it died may have been lost on
	// the way and answered again by the other.
	if healthy.Calls() < calls-dying.Calls() {
		t.Errorf("healthy endpoint answered %d calls, dying one %d; want %d in all", healthy.Calls(), dying.Calls(), calls)
	}
	st := c.Stats()
	if st[0].Healthy || !st[1].Healthy {
		t.Errorf("stats %+v: want the dead endpoint out of rotation", st)
	}
	if !strings.Contains(logs.String(), "unhealthy") {
		t.Errorf("no unhealthy transition logged:\n%s", logs)
	}
}

func TestUnhealthyEndpointProbedAndRecovers(t *testing.T) {
	flaky := newServer(t, rpctest.Config{Faults: rpctest.Sequence(
		rpctest.Fault{Kind: rpctest.Status, Status: 502}, rpctest.Fault{Kind: rpctest.Status, Status: 502})})
	steady := newServer(t, rpctest.Config{})
	c, logs := newClient(t, Config{
		Endpoints:      []string{credURL(flaky), credURL(steady) + "&b=1"},
		UnhealthyAfter: 2,
		ProbeInterval:  time.Millisecond,
	})
	sawUnhealthy := false
	// Each call is a real round trip; the probe interval passes after a
	// few. The loop ends on the state it waits for, not on a timer.
	for i := 0; i < 2000 && flaky.Calls() == 0; i++ {
		if err := c.Call(context.Background(), "echo", nil, nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !c.Stats()[0].Healthy {
			sawUnhealthy = true
		}
	}
	if !sawUnhealthy {
		t.Error("flaky endpoint never taken out of rotation")
	}
	if flaky.Calls() == 0 {
		t.Fatal("flaky endpoint never probed again")
	}
	if !c.Stats()[0].Healthy || !strings.Contains(logs.String(), "recovered") {
		t.Errorf("flaky endpoint not back in rotation after a good probe: %+v", c.Stats()[0])
	}
}

func TestAllEndpointsDown(t *testing.T) {
	a := newServer(t, rpctest.Config{})
	b := newServer(t, rpctest.Config{})
	a.Kill()
	b.Kill()
	c, _ := newClient(t, Config{
		Endpoints:      []string{credURL(a), credURL(b) + "&b=1"},
		MaxRetries:     3,
		UnhealthyAfter: 2,
		BaseBackoff:    time.Millisecond,
		MaxBackoff:     5 * time.Millisecond,
	})
	start := time.Now()
	err := c.Call(context.Background(), "eth_getBlockByNumber", []any{"0x1", true}, nil)
	elapsed := time.Since(start)
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("err %v, want *CallError", err)
	}
	if ce.Attempts != 4 || len(ce.Errs) != 2 || ce.Method != "eth_getBlockByNumber" {
		t.Errorf("CallError %+v: want 4 attempts over both endpoints", ce)
	}
	// Its budget is spent: not retryable again (issue 21: it was), but
	// the attempts it made are known, for a loader that requeues the span.
	if n, spent := fault.Attempts(err); !errors.Is(err, ErrNoEndpoint) || fault.Retryable(err) || !spent || n != 4 {
		t.Errorf("err %v: want ErrNoEndpoint, not retryable, 4 attempts spent", err)
	}
	msg := err.Error()
	for _, name := range c.Endpoints() {
		if !strings.Contains(msg, name) {
			t.Errorf("error does not name endpoint %s: %s", name, msg)
		}
	}
	if !strings.Contains(msg, "eth_getBlockByNumber") {
		t.Errorf("error does not name the method: %s", msg)
	}
	assertNoSecrets(t, "error", msg)
	// 4 refused connections and 3 backoffs of at most 5ms.
	if elapsed > time.Second {
		t.Errorf("took %v to give up, beyond the retry budget", elapsed)
	}
}

func TestAllEndpointsHangWithinBudget(t *testing.T) {
	hang := rpctest.Always(rpctest.Fault{Kind: rpctest.Hang})
	a := newServer(t, rpctest.Config{Faults: hang})
	b := newServer(t, rpctest.Config{Faults: hang})
	const timeout = 50 * time.Millisecond
	c, _ := newClient(t, Config{
		Endpoints:  []string{credURL(a), credURL(b) + "&b=1"},
		Timeout:    timeout,
		MaxRetries: 2,
		MaxBackoff: 5 * time.Millisecond,
	})
	start := time.Now()
	calls, _ := numbered(5)
	err := c.Batch(context.Background(), calls)
	elapsed := time.Since(start)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Attempts != 3 {
		t.Fatalf("err %v, want *CallError after 3 attempts", err)
	}
	for _, e := range ce.Errs {
		var te *TransportError
		if !errors.As(e, &te) || !te.Timeout {
			t.Errorf("endpoint error %v, want a timeout", e)
		}
	}
	for i := range calls {
		if !errors.As(calls[i].Err, &ce) || ce.Method != "echo" {
			t.Errorf("call %d: Err %v", i, calls[i].Err)
		}
	}
	assertNoSecrets(t, "error", err.Error())
	if a.Requests()+b.Requests() != 3 {
		t.Errorf("%d requests sent, want 3 (one per attempt)", a.Requests()+b.Requests())
	}
	if low, high := 3*timeout, 3*timeout+2*5*time.Millisecond+time.Second; elapsed < low || elapsed > high {
		t.Errorf("gave up after %v, want within [%v, %v]", elapsed, low, high)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	s := newServer(t, rpctest.Config{})
	const rps, burst, n = 50.0, 2, 27
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}, RPS: rps, Burst: burst, Concurrency: 8})
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := c.Call(context.Background(), "echo", nil, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// The limiter is exact; the margin only absorbs float rounding.
	if min := time.Duration(float64(n-burst) / rps * float64(time.Second)); elapsed < min*99/100 {
		t.Errorf("%d requests took %v at %v rps with burst %d, want >= %v", n, elapsed, rps, burst, min)
	}
	if s.Requests() != n {
		t.Errorf("server saw %d requests, want %d", s.Requests(), n)
	}
}

func TestConcurrencyCap(t *testing.T) {
	arrived := make(chan struct{}, 16)
	gate := make(chan struct{})
	s := newServer(t, rpctest.Config{Handler: func(string, json.RawMessage) (any, *rpctest.Error) {
		arrived <- struct{}{}
		<-gate
		return "ok", nil
	}})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}, Concurrency: 2})
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if err := c.Call(context.Background(), "echo", nil, nil); err != nil {
				t.Error(err)
			}
		})
	}
	<-arrived
	<-arrived
	// Two requests are held in the handler; a third may only come once one
	// of them is released. The window can only catch a broken cap, never
	// fail a working one.
	select {
	case <-arrived:
		t.Error("a third request arrived while two were in flight with Concurrency 2")
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	wg.Wait()
	if s.MaxInFlight() > 2 {
		t.Errorf("server held %d requests at once, cap is 2", s.MaxInFlight())
	}
	if s.Calls() != 6 {
		t.Errorf("%d calls answered, want 6", s.Calls())
	}
}

func TestLoadSpreadsOverHealthyEndpoints(t *testing.T) {
	a := newServer(t, rpctest.Config{})
	b := newServer(t, rpctest.Config{})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(a), credURL(b) + "&b=1"}})
	for i := range 20 {
		if err := c.Call(context.Background(), "echo", []int{i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if a.Calls() != 10 || b.Calls() != 10 {
		t.Errorf("calls split %d/%d, want 10/10", a.Calls(), b.Calls())
	}
	for i, st := range c.Stats() {
		if st.Requests != 10 || st.InFlight != 0 || !st.Healthy {
			t.Errorf("endpoint %d stats %+v", i, st)
		}
	}
}

// callEcho calls echo with [v] and fails the test unless the answer is [v].
func callEcho[T comparable](t *testing.T, c *Client, v T) {
	t.Helper()
	var got []T
	if err := c.Call(context.Background(), "echo", []T{v}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != v {
		t.Errorf("result %v", got)
	}
}
