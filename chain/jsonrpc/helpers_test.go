package jsonrpc

import (
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/rpctest"
	"github.com/blockhaul/blockhaul/internal/syncbuf"
)

// Credentials put into every test endpoint URL: none may appear in any error
// or log line.
var secrets = []string{
	"alice-user-7",                     // userinfo user
	"s3cretPassw0rd",                   // userinfo password
	"0123456789abcdef0123456789abcdef", // API key in the path
	"QueryKey9876543210",               // API key in the query
}

// credURL is s's URL as a provider's would look: userinfo, key in the path
// and in the query. The server ignores all three.
func credURL(s *rpctest.Server) string {
	u, err := url.Parse(s.URL)
	if err != nil {
		panic(err)
	}
	u.User = url.UserPassword(secrets[0], secrets[1])
	u.Path = "/v3/" + secrets[2]
	u.RawQuery = "apikey=" + secrets[3]
	return u.String()
}

func newServer(t *testing.T, cfg rpctest.Config) *rpctest.Server {
	t.Helper()
	s := rpctest.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

// newClient returns a client with test-sized backoffs (unless cfg sets
// them) logging at Debug into a buffer that is checked for credentials
// when the test ends.
func newClient(t *testing.T, cfg Config) (*Client, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.BaseBackoff == 0 {
		cfg.BaseBackoff = time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 10 * time.Millisecond
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		assertNoSecrets(t, "log output", logs.String())
		for _, st := range c.Stats() {
			assertNoSecrets(t, "stats", st.Endpoint)
		}
	})
	return c, logs
}

func assertNoSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			t.Errorf("%s contains credential %q: %s", what, sec, s)
		}
	}
}

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	outcomes []string
	retries  []string
	names    map[string]bool
}

func (r *recorder) Request(endpoint, method, outcome string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, outcome)
	r.seen(endpoint)
}

func (r *recorder) Retry(endpoint, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retries = append(r.retries, reason)
	r.seen(endpoint)
}

func (r *recorder) seen(endpoint string) {
	if r.names == nil {
		r.names = map[string]bool{}
	}
	r.names[endpoint] = true
}

func (r *recorder) snapshot() (outcomes, retries []string, names map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := make(map[string]bool, len(r.names))
	for k := range r.names {
		n[k] = true
	}
	return append([]string(nil), r.outcomes...), append([]string(nil), r.retries...), n
}
