package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/monitor"
)

// While the only endpoint times out, /readyz says the job is not ready and
// why; before it failed, the job was ready.
func TestNotReadyWhileNoEndpointHealthy(t *testing.T) {
	replay := newCometReplay(t, "node-0.38")
	m := monitor.New(monitor.Options{Out: io.Discard, Terminal: new(bool)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var mu sync.Mutex
	var seen []string // "code body" of /readyz as each block request arrived
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var one struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &one) == nil && one.Method == "status" {
			res, _ := replay.handle("status", nil)
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": one.ID, "result": res})
			return
		}
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String())))
		if rec.Code == http.StatusServiceUnavailable {
			cancel() // seen what the test is after: stop the job
		}
		mu.Unlock()
		<-r.Context().Done() // a node that never answers a block
	}))
	defer node.Close()

	cfg := DefaultConfig()
	cfg.Command, cfg.Chain, cfg.Staging = CmdFetch, "cometbft", filepath.Join(t.TempDir(), "s")
	cfg.RPC = []string{node.URL + "/rpc/s3cr3tk3y"}
	cfg.RPCTimeout = 50 * time.Millisecond
	cfg.From, cfg.To, cfg.ToSet = replay.lowest, replay.lowest+1, true
	cfg.FetchWorkers, cfg.Progress, cfg.Monitor = 1, 0, m
	_, err := Run(ctx, cfg, io.Discard, quiet)
	if err == nil {
		t.Fatal("a fetch from a node that never answers succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != "200 ready" {
		t.Fatalf("/readyz at the first block request: %q, want 200 ready", seen)
	}
	last := seen[len(seen)-1]
	if !strings.HasPrefix(last, "503 no healthy RPC endpoint: ") || strings.Contains(last, "s3cr3tk3y") {
		t.Fatalf("/readyz once the endpoint kept timing out: %q, want 503 naming the redacted endpoint", seen)
	}
}

// The head stream's tip, lag and repaired reorgs reach /metrics, and the
// address --http :0 chose is logged.
func TestFollowMetricsAndHTTPAddress(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	fc := newForkChain(100, 50, 400, 341)
	cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "head"), fc, 1, 600)
	cfg.HTTPAddr = "127.0.0.1:0"
	m := monitor.New(monitor.Options{Out: io.Discard, Terminal: new(bool)})
	cfg.Monitor = m
	var logs bytes.Buffer
	sum, err := Run(context.Background(), cfg, io.Discard, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Reorgs != 1 {
		t.Fatalf("reorgs %d, want 1", sum.Reorgs)
	}
	got := map[string]float64{}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if pm := mf.GetMetric(); len(pm) == 1 {
			if pm[0].GetCounter() != nil {
				got[mf.GetName()] = pm[0].GetCounter().GetValue()
			} else {
				got[mf.GetName()] = pm[0].GetGauge().GetValue()
			}
		}
	}
	tip := got["blockhaul_chain_tip_height"]
	if got["blockhaul_reorgs_repaired_total"] != 1 || tip < 600 || got["blockhaul_lag_heights"] != tip-600 {
		t.Fatalf("metrics %v: want 1 reorg, a tip at or above 600 and the lag behind it from 600", got)
	}
	addr := regexp.MustCompile(`serving /metrics, /healthz and /readyz" addr=127\.0\.0\.1:(\d+)`).FindStringSubmatch(logs.String())
	if addr == nil || addr[1] == "0" {
		t.Fatalf("no chosen port logged:\n%s", logs.String())
	}
}

// A head stream logs no INFO line per poll or per block: its progress
// line names the tip and the lag.
func TestFollowLogsProgressNotEveryPoll(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	fc := newForkChain(100, 50, 0, 0)
	cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "head"), fc, 1, 300)
	cfg.Confirmations, cfg.Progress = 2, time.Hour
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	cfg.Monitor = monitor.New(monitor.Options{Logger: log, Out: io.Discard, Terminal: new(bool), Interval: time.Hour})
	var out bytes.Buffer
	sum, err := Run(context.Background(), cfg, &out, log)
	if err != nil || !sum.Complete {
		t.Fatalf("follow to 300: %v, complete %v", err, sum.Complete)
	}
	var infos, progress []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct {
			Level, Msg string
			Follow     *struct{ Tip, Lag, Exported uint64 }
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec.Level == "INFO" {
			infos = append(infos, rec.Msg)
		}
		if rec.Msg == "progress" {
			if rec.Follow == nil || rec.Follow.Tip < 302 || rec.Follow.Exported != 300 || rec.Follow.Lag != rec.Follow.Tip-300 {
				t.Errorf("progress record without the follow state: %s", l)
			}
			progress = append(progress, l)
		}
	}
	// Polls of 50 blocks from 100 to 350: each used to log "fetch planned"
	// and "export starting".
	for _, msg := range infos {
		if msg == "fetch planned" || msg == "export starting" {
			t.Errorf("INFO %q logged by a head stream:\n%s", msg, logs.String())
			break
		}
	}
	if len(progress) != 1 {
		t.Errorf("%d progress records, want the final one:\n%s", len(progress), logs.String())
	}
	if !strings.Contains(out.String(), "follow:  tip ") || strings.Contains(out.String(), "planned") {
		t.Errorf("follow summary:\n%s", out.String())
	}
}
