package monitor

import (
	"encoding/json"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The dashboard in grafana/ queries only metrics a Monitor registers, under
// the names and types it registers them: a renamed metric must not leave a
// panel silently empty.
func TestGrafanaDashboardQueriesRegisteredMetrics(t *testing.T) {
	raw, err := os.ReadFile("grafana/blockhaul.json")
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		ID      int      `json:"id"`
		Title   string   `json:"title"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"` // rows nest panels
	}
	var dash struct {
		UID        string  `json:"uid"`
		Title      string  `json:"title"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana/blockhaul.json: %v", err)
	}
	if dash.UID == "" || dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard without uid, title or panels: %q %q %d", dash.UID, dash.Title, len(dash.Panels))
	}

	// Every metric family a job can expose, each event made once.
	m := New(Options{Out: io.Discard, Terminal: ptr(false)})
	m.SetTables([]string{"blocks"})
	m.SetRange(1, 10)
	m.FetchPlanned(10)
	m.Fetched(1)
	m.Staged(1, 10, 5, time.Millisecond)
	m.Exported(1, 1, []int{1}, time.Millisecond, true)
	m.Request(endpoint, "block", OutcomeOK, time.Millisecond)
	m.Retry(endpoint, "timeout")
	m.PGRetry("connection")
	m.SetTip(10)
	m.ReorgRepaired()
	mfs := gatherWatching(t, m)
	series := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				series[name+s] = true
			}
			continue
		}
		series[name] = true
	}

	metric := regexp.MustCompile(`\bblockhaul_[a-z0-9_]+`)
	queried := map[string]bool{}
	var exprs []string
	ids := map[int]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if len(p.Panels) > 0 {
				walk(p.Panels)
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q queries nothing", p.Title)
			}
			for _, tg := range p.Targets {
				if !metric.MatchString(tg.Expr) {
					t.Errorf("panel %q: query %q names no blockhaul metric", p.Title, tg.Expr)
				}
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	for _, e := range exprs {
		for _, name := range metric.FindAllString(e, -1) {
			queried[name] = true
			if !series[name] {
				t.Errorf("the dashboard queries %s (in %q), which blockhaul does not register", name, e)
			}
		}
	}
	// The metrics issue 12 asks a dashboard for are on it.
	for _, name := range []string{"blockhaul_chain_tip_height", "blockhaul_lag_heights", "blockhaul_reorgs_repaired_total",
		"blockhaul_pg_retries_total", "blockhaul_rpc_endpoint_healthy", "blockhaul_ready"} {
		if !queried[name] {
			t.Errorf("the dashboard does not show %s", name)
		}
	}
	if t.Failed() {
		t.Logf("registered: %s", strings.Join(slices.Collect(maps.Keys(series)), " "))
	}
}

// Issue 20 §7: the labelled series a job will use are published at zero
// before their first event: retries of every reason given, PostgreSQL
// retries of every cause, and each watched endpoint's requests and latency.
func TestLabelledMetricsPublishedBeforeFirstUse(t *testing.T) {
	m := New(Options{Out: io.Discard, Terminal: ptr(false)})
	m.PublishRetryReasons("timeout")
	m.PublishPGRetryCauses("connection")
	mfs := gatherWatching(t, m)
	got := map[string]int{}
	for _, mf := range mfs {
		got[mf.GetName()] = len(mf.GetMetric())
	}
	for name, n := range map[string]int{
		"blockhaul_retries_total":                2, // span, timeout
		"blockhaul_pg_retries_total":             1,
		"blockhaul_rpc_requests_total":           1,
		"blockhaul_rpc_request_duration_seconds": 1,
		"blockhaul_rpc_endpoint_healthy":         1,
	} {
		if got[name] != n {
			t.Errorf("%s: %d series before any event, want %d", name, got[name], n)
		}
	}
}

// gatherWatching gathers m's metrics with the test endpoint watched.
func gatherWatching(t *testing.T, m *Monitor) []*dto.MetricFamily {
	t.Helper()
	m.WatchEndpoints(func() []EndpointHealth { return []EndpointHealth{{endpoint, true}} })
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}
