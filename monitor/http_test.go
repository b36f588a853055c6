package monitor

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const endpoint = "https://rpc.example.org/v3/***"

func TestMetricsAdvance(t *testing.T) {
	m := New(Options{Out: io.Discard, Terminal: ptr(false)})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	m.SetRange(100, 1099)
	m.SetTables([]string{"blocks", "txs"})
	before := scrape(t, srv.URL+"/metrics")
	for series, want := range map[string]float64{
		`blockhaul_rows_exported_total{table="blocks"}`: 0,
		`blockhaul_rows_exported_total{table="txs"}`:    0,
		`blockhaul_heights_exported_total`:              0,
		`blockhaul_range_from`:                          100,
		`blockhaul_range_to`:                            1099,
	} {
		if got, ok := before[series]; !ok || got != want {
			t.Errorf("before events: %s = %v (present %v), want %v", series, got, ok, want)
		}
	}

	m.FetchPlanned(1000)
	m.Fetched(16)
	m.Fetched(16)
	m.Staged(32, 16000, 4000, 3*time.Millisecond)
	m.Exported(100, 199, []int{100, 250}, 20*time.Millisecond, false)
	m.Exported(200, 299, []int{100, 0}, 10*time.Millisecond, true)
	m.Request(endpoint, "batch", OutcomeOK, 50*time.Millisecond)
	m.Request(endpoint, "batch", OutcomeOK, 70*time.Millisecond)
	m.Request(endpoint, "batch", "throttled", 5*time.Millisecond)
	m.Retry(endpoint, "throttled")
	m.Retry("", RetrySpan)
	m.Retry("", RetrySpan)

	after := scrape(t, srv.URL+"/metrics")
	for series, want := range map[string]float64{
		`blockhaul_heights_fetched_total`:                                                              32,
		`blockhaul_heights_staged_total`:                                                               32,
		`blockhaul_heights_exported_total`:                                                             200,
		`blockhaul_fetch_planned_heights`:                                                              1000,
		`blockhaul_rows_exported_total{table="blocks"}`:                                                200,
		`blockhaul_rows_exported_total{table="txs"}`:                                                   250,
		`blockhaul_export_batches_total`:                                                               2,
		`blockhaul_export_conflicts_total`:                                                             1,
		`blockhaul_export_commit_duration_seconds_count`:                                               2,
		`blockhaul_export_commit_duration_seconds_sum`:                                                 0.03,
		`blockhaul_staging_commit_duration_seconds_count`:                                              1,
		`blockhaul_staging_raw_bytes_total`:                                                            16000,
		`blockhaul_staging_stored_bytes_total`:                                                         4000,
		`blockhaul_staging_compression_ratio`:                                                          4,
		`blockhaul_rpc_requests_total{endpoint="` + endpoint + `",method="batch",outcome="ok"}`:        2,
		`blockhaul_rpc_requests_total{endpoint="` + endpoint + `",method="batch",outcome="throttled"}`: 1,
		`blockhaul_rpc_request_duration_seconds_count{endpoint="` + endpoint + `"}`:                    3,
		`blockhaul_retries_total{reason="throttled"}`:                                                  1,
		`blockhaul_retries_total{reason="span"}`:                                                       2,
		`blockhaul_last_exported_height`:                                                               299,
		`blockhaul_ready`:                                                                              0,
	} {
		got, ok := after[series]
		if !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	// The standard collectors share the registry.
	for _, series := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := after[series]; !ok {
			t.Errorf("%s missing from /metrics", series)
		}
	}

	m.Exported(300, 349, []int{50, 7}, time.Millisecond, false)
	again := scrape(t, srv.URL+"/metrics")
	if got := again[`blockhaul_heights_exported_total`]; got != 250 {
		t.Errorf("heights exported after a third batch = %v, want 250", got)
	}
	if got := again[`blockhaul_rows_exported_total{table="txs"}`]; got != 257 {
		t.Errorf("txs rows after a third batch = %v, want 257", got)
	}
}

func TestRegistryIsOwnNeverGlobal(t *testing.T) {
	// Two monitors in one process must not collide, and neither may touch
	// the default registry.
	a := New(Options{Out: io.Discard, Terminal: ptr(false)})
	b := New(Options{Out: io.Discard, Terminal: ptr(false)})
	if a.Registry() == b.Registry() {
		t.Fatal("two monitors share a registry")
	}
	a.Exported(1, 10, nil, 0, false)
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "blockhaul_") {
			t.Errorf("%s registered on the default registry", mf.GetName())
		}
	}

	reg := prometheus.NewRegistry()
	c := New(Options{Out: io.Discard, Terminal: ptr(false), Registry: reg})
	if c.Registry() != reg {
		t.Fatal("the registry passed in is not used")
	}
	mfs, err = reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "blockhaul_heights_staged_total"
	}
	if !found {
		t.Error("blockhaul_heights_staged_total not on the registry passed in")
	}
}

func TestHealthAndReadiness(t *testing.T) {
	m := New(Options{Out: io.Discard, Terminal: ptr(false)})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	steps := []struct {
		name   string
		set    func()
		code   int
		body   string
		gauge  float64
		health int
	}{
		{"before the main phase", func() {}, http.StatusServiceUnavailable, "starting", 0, http.StatusOK},
		{"main phase", func() { m.SetReady(true, "") }, http.StatusOK, "ready", 1, http.StatusOK},
		{"failing", func() { m.SetReady(false, "export: connection refused") }, http.StatusServiceUnavailable, "export: connection refused", 0, http.StatusOK},
		{"no reason given", func() { m.SetReady(false, "") }, http.StatusServiceUnavailable, "not ready", 0, http.StatusOK},
	}
	for _, s := range steps {
		s.set()
		code, body := get(t, srv.URL+"/readyz")
		if code != s.code || !strings.Contains(body, s.body) {
			t.Errorf("%s: /readyz = %d %q, want %d containing %q", s.name, code, body, s.code, s.body)
		}
		if got := scrape(t, srv.URL+"/metrics")["blockhaul_ready"]; got != s.gauge {
			t.Errorf("%s: blockhaul_ready = %v, want %v", s.name, got, s.gauge)
		}
		if code, _ := get(t, srv.URL+"/healthz"); code != s.health {
			t.Errorf("%s: /healthz = %d, want %d", s.name, code, s.health)
		}
	}
	if code, _ := get(t, srv.URL+"/nothing"); code != http.StatusNotFound {
		t.Errorf("/nothing = %d, want 404", code)
	}
}

func TestServeShutsDownWithContext(t *testing.T) {
	m := New(Options{Out: io.Discard, Terminal: ptr(false)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var serveErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		serveErr = m.serve(ctx, ln)
	}()
	if code, _ := get(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	cancel()
	wg.Wait() // serve returned: the server is down
	if serveErr != nil {
		t.Errorf("serve after cancel = %v, want nil", serveErr)
	}
	http.DefaultClient.CloseIdleConnections()
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("server still answers after serve returned")
	}
}

func TestServeReportsListenFailure(t *testing.T) {
	m := New(Options{Out: io.Discard, Terminal: ptr(false)})
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = m.Serve(ctx, busy.Addr().String())
	if err == nil || !strings.HasPrefix(err.Error(), "monitor: listen on "+busy.Addr().String()) {
		t.Fatalf("Serve on a busy address = %v, want a listen error naming it", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("listen error %v does not wrap the *net.OpError", err)
	}
	if ctx.Err() != nil {
		t.Error("Serve waited for its context instead of failing at once")
	}
}

func TestNotReadyWithoutHealthyEndpoint(t *testing.T) {
	m := New(Options{Out: io.Discard, Terminal: ptr(false)})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	var mu sync.Mutex
	health := []EndpointHealth{{"https://a.example.org/***", true}, {"https://b.example.org/***", true}}
	m.WatchEndpoints(func() []EndpointHealth {
		mu.Lock()
		defer mu.Unlock()
		return append([]EndpointHealth(nil), health...)
	})
	set := func(a, b bool) {
		mu.Lock()
		health[0].Healthy, health[1].Healthy = a, b
		mu.Unlock()
	}
	m.SetReady(true, "")
	steps := []struct {
		name   string
		a, b   bool
		code   int
		body   string
		gauges [3]float64 // ready, a healthy, b healthy
	}{
		{"both healthy", true, true, http.StatusOK, "ready", [3]float64{1, 1, 1}},
		{"one out", false, true, http.StatusOK, "ready", [3]float64{1, 0, 1}},
		{"none healthy", false, false, http.StatusServiceUnavailable, "no healthy RPC endpoint: https://a.example.org/***, https://b.example.org/***", [3]float64{0, 0, 0}},
		{"one back", false, true, http.StatusOK, "ready", [3]float64{1, 0, 1}},
	}
	for _, s := range steps {
		set(s.a, s.b)
		code, body := get(t, srv.URL+"/readyz")
		if code != s.code || !strings.Contains(body, s.body) {
			t.Errorf("%s: /readyz = %d %q, want %d containing %q", s.name, code, body, s.code, s.body)
		}
		got := scrape(t, srv.URL+"/metrics")
		for i, k := range []string{"blockhaul_ready",
			`blockhaul_rpc_endpoint_healthy{endpoint="https://a.example.org/***"}`,
			`blockhaul_rpc_endpoint_healthy{endpoint="https://b.example.org/***"}`} {
			if v, ok := got[k]; !ok || v != s.gauges[i] {
				t.Errorf("%s: %s = %v (present %v), want %v", s.name, k, v, ok, s.gauges[i])
			}
		}
	}
	// A failing job stays not ready for its own reason.
	set(true, true)
	m.SetReady(false, "export: connection refused")
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "connection refused") {
		t.Errorf("failing: /readyz = %d %q", code, body)
	}
}

func TestTipLagAndReorgMetrics(t *testing.T) {
	m := New(Options{Out: io.Discard, Terminal: ptr(false)})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if _, ok := scrape(t, srv.URL+"/metrics")["blockhaul_lag_heights"]; !ok {
		t.Error("blockhaul_lag_heights missing before anything is known")
	}
	m.SetTip(1000)
	m.Exported(1, 900, []int{5}, time.Millisecond, false)
	got := scrape(t, srv.URL+"/metrics")
	if got["blockhaul_chain_tip_height"] != 1000 || got["blockhaul_lag_heights"] != 100 {
		t.Errorf("tip %v lag %v, want 1000 and 100", got["blockhaul_chain_tip_height"], got["blockhaul_lag_heights"])
	}
	m.SetTip(1010)
	m.Exported(901, 1005, []int{5}, time.Millisecond, false)
	m.ReorgRepaired()
	m.ReorgRepaired()
	got = scrape(t, srv.URL+"/metrics")
	if got["blockhaul_lag_heights"] != 5 || got["blockhaul_reorgs_repaired_total"] != 2 {
		t.Errorf("lag %v reorgs %v, want 5 and 2", got["blockhaul_lag_heights"], got["blockhaul_reorgs_repaired_total"])
	}
}
