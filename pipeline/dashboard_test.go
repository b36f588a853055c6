package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/blockhaul/blockhaul/internal/rpctest"
	"github.com/blockhaul/blockhaul/monitor"
)

// Issue 20 §7: every metric the Grafana dashboard's panels query is on the
// /metrics of a healthy running job before anything has gone wrong (before:
// the RPC request counter and latency, endpoint health, retries and
// PostgreSQL retries were absent until first used, and their panels read
// "No data"). The scrape is taken while the job waits for its first block
// from the node, so nothing has been retried.
func TestDashboardQueriesAreOnARunningJobsMetrics(t *testing.T) {
	queried := dashboardMetrics(t)

	replay := newCometReplay(t, "node-0.38")
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := rpctest.NewServer(rpctest.Config{Handler: func(method string, params json.RawMessage) (any, *rpctest.Error) {
		if method == "block" {
			once.Do(func() { close(reached) })
			<-release
		}
		return replay.handle(method, params)
	}})
	defer srv.Close()
	cfg := rpcRunConfig(t, srv.URL)
	cfg.From, cfg.To = replay.lowest, replay.lowest+9
	m := monitor.New(monitor.Options{Logger: quiet, Out: io.Discard, Terminal: new(bool)})
	cfg.Monitor = m
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- m.ServeListener(sctx, ln) }()
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), cfg, io.Discard, quiet)
		done <- err
	}()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("the job ended before asking for a block: %v", err)
	}
	exposed := scrapeNames(t, "http://"+ln.Addr().String()+"/metrics")
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}

	for name, exprs := range queried {
		if !exposed[name] {
			t.Errorf("the dashboard queries %s (%s), absent from a running job's /metrics", name, exprs[0])
		}
	}
	if len(queried) < 22 {
		t.Errorf("the dashboard queries %d metric names; it drew 22 when this test was written", len(queried))
	}
}

// dashboardMetrics is every blockhaul metric name the dashboard's panels
// and variables query, with the queries naming it.
func dashboardMetrics(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("../monitor/grafana/blockhaul.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, r := range ps {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatal(err)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	metric := regexp.MustCompile(`\bblockhaul_[a-z0-9_]+`)
	out := map[string][]string{}
	for _, e := range exprs {
		for _, name := range metric.FindAllString(e, -1) {
			out[name] = append(out[name], e)
		}
	}
	return out
}

// scrapeNames is the names of the samples url exposes (a histogram's
// _bucket, _sum and _count each).
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}
