package jsonrpc

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config configures a Client. Every field but Endpoints has a default that
// its zero value selects (see EnsureDefaults).
type Config struct {
	// Endpoints are the http(s) URLs of the nodes. Credentials in them
	// (userinfo, API keys in the path or query) never appear in logs,
	// errors or Stats.
	Endpoints []string
	// RPS caps the requests per second sent to each endpoint; a batch is
	// one request. 0 means unlimited.
	RPS float64
	// Burst is how many requests an endpoint's limiter lets through at
	// once. Default 1: providers count per second and punish bursts.
	Burst int
	// Concurrency caps the requests in flight per endpoint. Default 8.
	Concurrency int
	// MaxBatch caps the calls in one batch request; larger batches are
	// split. Default 50 (providers commonly allow 20–100; geth 1000).
	MaxBatch int
	// Timeout bounds one request, from sending to the last byte of the
	// response. Default 30s.
	Timeout time.Duration
	// MaxRetries bounds the attempts after the first for one call (or one
	// batch request), across all endpoints: failing over to another
	// endpoint is a retry. Default 5; negative means no retries.
	MaxRetries int
	// BaseBackoff and MaxBackoff bound the exponential backoff (jittered,
	// internal/backoff) between attempts. Defaults 100ms and 10s.
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// UnhealthyAfter is the number of consecutive transient failures after
	// which an endpoint is taken out of rotation. Default 3.
	UnhealthyAfter int
	// ProbeInterval is how long an unhealthy endpoint rests before one
	// request probes it; it doubles after each failed probe up to
	// MaxProbeInterval. Defaults 1s and 1m.
	ProbeInterval    time.Duration
	MaxProbeInterval time.Duration
	// MaxResponseBytes caps one response body; a batch whose response is
	// larger is shrunk. Default 512 MiB.
	MaxResponseBytes int64
	// SilentAfter bounds how long the client waits for its endpoints'
	// first answer of any kind (a response, whatever its status): when
	// none has answered anything this long after the first request, every
	// call fails at once with a *SilentError naming the endpoints and what
	// was asked, which no caller retries. Default 1m.
	SilentAfter time.Duration
	// WaitReport is how often a request still waiting for its response
	// says so in the log (Warn), naming the endpoint and what it asked;
	// the client as a whole reports at most once in each such period.
	// Default 10s.
	WaitReport time.Duration
	// HTTPClient sends the requests. Default: a client with one shared
	// transport sized for Concurrency, gzip accepted, redirects refused.
	HTTPClient *http.Client
	// Logger receives endpoint health changes (Info/Warn) and each failed
	// attempt (Debug). Default: discard.
	Logger *slog.Logger
	// Observer, if set, is told of every request and retry (for metrics).
	Observer Observer
}

// Observer receives the client's measurements, so a caller can feed
// Prometheus (or anything) without globals. Endpoints are redacted. Method is
// the JSON-RPC method, or "batch" for a batch request. Outcome and reason
// are one of the Outcome constants. Implementations must be safe for
// concurrent use and fast: they are called on the request path.
type Observer interface {
	Request(endpoint, method, outcome string, dur time.Duration)
	Retry(endpoint, reason string)
}

// Outcomes of a request, as given to an Observer.
const (
	OutcomeOK           = "ok"            // a response (per-call RPC errors of a batch included)
	OutcomeRPCError     = "rpc_error"     // a JSON-RPC application error to a single call
	OutcomeThrottled    = "throttled"     // HTTP 429 or a provider throttling error
	OutcomeTimeout      = "timeout"       // no response within Config.Timeout
	OutcomeServerError  = "server_error"  // HTTP 5xx or 408
	OutcomeHTTPError    = "http_error"    // another non-2xx status
	OutcomeNetwork      = "network"       // connection failed or reset
	OutcomeBadResponse  = "bad_response"  // truncated or not JSON-RPC
	OutcomeBatchRefused = "batch_refused" // endpoint takes no batches
	OutcomeTooLarge     = "too_large"     // batch or response too large
	OutcomeCanceled     = "canceled"      // the caller's context ended
)

// RetryReasons are the outcomes after which a request is tried again: the
// reasons an Observer's Retry is given.
var RetryReasons = []string{OutcomeThrottled, OutcomeTimeout, OutcomeServerError, OutcomeNetwork,
	OutcomeBadResponse, OutcomeBatchRefused, OutcomeTooLarge}

const (
	defaultBurst            = 1
	defaultConcurrency      = 8
	defaultMaxBatch         = 50
	defaultTimeout          = 30 * time.Second
	defaultMaxRetries       = 5
	defaultBaseBackoff      = 100 * time.Millisecond
	defaultMaxBackoff       = 10 * time.Second
	defaultUnhealthyAfter   = 3
	defaultProbeInterval    = time.Second
	defaultMaxProbeInterval = time.Minute
	defaultMaxResponseBytes = 512 << 20
	defaultSilentAfter      = time.Minute
	defaultWaitReport       = 10 * time.Second
)

// EnsureDefaults returns a copy of c with every zero field set to its
// default. Logger becomes a discarding logger; HTTPClient stays nil (New
// builds one from the final Concurrency).
func (c Config) EnsureDefaults() Config {
	c.Burst = cmp.Or(c.Burst, defaultBurst)
	c.Concurrency = cmp.Or(c.Concurrency, defaultConcurrency)
	c.MaxBatch = cmp.Or(c.MaxBatch, defaultMaxBatch)
	c.Timeout = cmp.Or(c.Timeout, defaultTimeout)
	c.MaxRetries = cmp.Or(c.MaxRetries, defaultMaxRetries)
	c.BaseBackoff = cmp.Or(c.BaseBackoff, defaultBaseBackoff)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, max(defaultMaxBackoff, c.BaseBackoff))
	c.UnhealthyAfter = cmp.Or(c.UnhealthyAfter, defaultUnhealthyAfter)
	c.ProbeInterval = cmp.Or(c.ProbeInterval, defaultProbeInterval)
	c.MaxProbeInterval = cmp.Or(c.MaxProbeInterval, max(defaultMaxProbeInterval, c.ProbeInterval))
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, defaultMaxResponseBytes)
	c.SilentAfter = cmp.Or(c.SilentAfter, defaultSilentAfter)
	c.WaitReport = cmp.Or(c.WaitReport, defaultWaitReport)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem of c at once, each naming its field (an
// endpoint by its index and redacted form). Zero fields are valid: they
// select defaults.
func (c Config) Validate() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if len(c.Endpoints) == 0 {
		add("no endpoints")
	}
	seen := make(map[string]int, len(c.Endpoints))
	for i, raw := range c.Endpoints {
		if msg := checkEndpoint(raw); msg != "" {
			add("endpoints[%d] (%s): %s", i, Redact(raw), msg)
		}
		if j, dup := seen[raw]; dup {
			add("endpoints[%d] (%s): duplicate of endpoints[%d]", i, Redact(raw), j)
		} else {
			seen[raw] = i
		}
	}
	if c.RPS < 0 || math.IsNaN(c.RPS) || math.IsInf(c.RPS, 0) {
		add("rps %v: must be a finite number >= 0", c.RPS)
	}
	nonNegative := func(name string, v int64) {
		if v < 0 {
			add("%s %d: must be >= 0", name, v)
		}
	}
	nonNegative("burst", int64(c.Burst))
	nonNegative("concurrency", int64(c.Concurrency))
	nonNegative("max batch", int64(c.MaxBatch))
	nonNegative("unhealthy after", int64(c.UnhealthyAfter))
	nonNegative("max response bytes", c.MaxResponseBytes)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"timeout", c.Timeout},
		{"base backoff", c.BaseBackoff},
		{"max backoff", c.MaxBackoff},
		{"probe interval", c.ProbeInterval},
		{"max probe interval", c.MaxProbeInterval},
		{"silent after", c.SilentAfter},
		{"wait report", c.WaitReport},
	} {
		if d.v < 0 {
			add("%s %s: must be >= 0", d.name, d.v)
		}
	}
	eff := c.EnsureDefaults()
	if c.BaseBackoff >= 0 && c.MaxBackoff >= 0 && eff.BaseBackoff > eff.MaxBackoff {
		add("base backoff %s: exceeds max backoff %s", eff.BaseBackoff, eff.MaxBackoff)
	}
	if c.ProbeInterval >= 0 && c.MaxProbeInterval >= 0 && eff.ProbeInterval > eff.MaxProbeInterval {
		add("probe interval %s: exceeds max probe interval %s", eff.ProbeInterval, eff.MaxProbeInterval)
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("jsonrpc: invalid config: %s", strings.Join(problems, "; "))
}

// checkEndpoint returns what is wrong with one endpoint URL, or "". It never
// quotes the URL or url.Parse's error, which would repeat any credential.
func checkEndpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "not a valid URL"
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return "missing scheme (want http:// or https://)"
	default:
		return "scheme must be http or https"
	}
	if u.Host == "" {
		return "missing host"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "port out of range"
		}
	}
	return ""
}
