package monitor

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// EndpointHealth is one RPC endpoint as readiness sees it: in rotation or
// taken out of it after failing.
type EndpointHealth struct {
	Endpoint string // redacted
	Healthy  bool
}

// WatchEndpoints makes readiness and the blockhaul_rpc_endpoint_healthy
// gauge follow health, which is called on every /readyz and every scrape
// (it must be cheap and safe for concurrent use): while none of the
// endpoints it returns is healthy the job cannot fetch, and /readyz says so
// however ready the job is otherwise. A job without RPC endpoints (the
// synthetic chain) never calls it.
//
// The endpoints' request counter ("batch" requests answered, the client's
// way of fetching blocks) and latency histogram are published at zero from
// here, so that a dashboard reads 0 rather than "No data" before the first
// request.
func (m *Monitor) WatchEndpoints(health func() []EndpointHealth) {
	m.mu.Lock()
	m.st.endpoints = health
	m.mu.Unlock()
	for _, e := range health() {
		m.met.requests.WithLabelValues(e.Endpoint, "batch", OutcomeOK)
		m.met.requestDur.WithLabelValues(e.Endpoint)
	}
}

// PublishRetryReasons publishes the retry counter of each reason at zero
// (RetrySpan is from the start), and PublishPGRetryCauses the PostgreSQL
// retry counter of each cause: a healthy job's dashboard reads no retries,
// not "No data".
func (m *Monitor) PublishRetryReasons(reasons ...string) {
	for _, r := range reasons {
		m.met.retries.WithLabelValues(r)
	}
}

// PublishPGRetryCauses: see PublishRetryReasons.
func (m *Monitor) PublishPGRetryCauses(causes ...string) {
	for _, c := range causes {
		m.met.pgRetries.WithLabelValues(c)
	}
}

// endpointHealth returns what the function given to WatchEndpoints says,
// or nil without one.
func (m *Monitor) endpointHealth() []EndpointHealth {
	m.mu.Lock()
	f := m.st.endpoints
	m.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

// noHealthyEndpoint returns why the job is not ready for want of an RPC
// endpoint, or "" when at least one is healthy (or none is watched).
func noHealthyEndpoint(eps []EndpointHealth) string {
	if len(eps) == 0 {
		return ""
	}
	names := make([]string, 0, len(eps))
	for _, e := range eps {
		if e.Healthy {
			return ""
		}
		names = append(names, e.Endpoint)
	}
	return fmt.Sprintf("no healthy RPC endpoint: %s out of rotation after failing", strings.Join(names, ", "))
}

// SetTip records the chain tip the source last reported. The lag is the
// tip less the last exported height (or less the last staged height of a
// fetch that exports nothing).
func (m *Monitor) SetTip(h uint64) {
	m.met.tip.Set(float64(h))
	m.mu.Lock()
	m.st.tip, m.st.tipKnown = h, true
	m.mu.Unlock()
	m.updateLag()
}

// ReorgRepaired counts one chain reorganisation the head stream undid.
func (m *Monitor) ReorgRepaired() {
	m.met.reorgs.Inc()
	m.mu.Lock()
	m.st.reorgs++
	m.mu.Unlock()
}

// updateLag sets the lag gauge from the tip and the last height exported.
func (m *Monitor) updateLag() {
	m.mu.Lock()
	lag, ok := m.lagLocked()
	m.mu.Unlock()
	if ok {
		m.met.lag.Set(float64(lag))
	}
}

// lagLocked is the tip less the last exported height, when both are known.
func (m *Monitor) lagLocked() (uint64, bool) {
	s := &m.st
	if !s.tipKnown || !s.lastValid {
		return 0, false
	}
	if s.last >= s.tip {
		return 0, true
	}
	return s.tip - s.last, true
}

// endpointCollector exposes blockhaul_rpc_endpoint_healthy{endpoint} from
// the function given to WatchEndpoints, read at scrape time.
type endpointCollector struct {
	m    *Monitor
	desc *prometheus.Desc
}

func newEndpointCollector(m *Monitor) *endpointCollector {
	return &endpointCollector{m: m, desc: prometheus.NewDesc("blockhaul_rpc_endpoint_healthy",
		"1 while an RPC endpoint is in rotation, 0 while it is out after failing, by redacted endpoint.", []string{"endpoint"}, nil)}
}

func (c *endpointCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *endpointCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.m.endpointHealth() {
		v := 0.0
		if e.Healthy {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, e.Endpoint)
	}
}
