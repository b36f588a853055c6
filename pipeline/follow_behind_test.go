package pipeline

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/monitor"
)

// behindSource is the chain of newCounting whose tip is low until caughtUp.
type behindSource struct {
	*cometbftsynth.Synthetic
	low, high uint64
	caughtUp  atomic.Bool
	// catchUpAfter, when not 0, is the Tip calls after which the node
	// catches up on its own (a follow that never says it waits still ends).
	catchUpAfter, calls atomic.Int64
}

func (s *behindSource) Tip(context.Context) (uint64, error) {
	if n := s.catchUpAfter.Load(); n > 0 && s.calls.Add(1) > n {
		s.caughtUp.Store(true)
	}
	if s.caughtUp.Load() {
		return s.high, nil
	}
	return s.low, nil
}

// onLog is a slog handler that calls fn with every record's message (and
// discards the record, once written to w).
type onLog struct {
	slog.Handler
	fn func(string)
}

func (h onLog) Handle(ctx context.Context, r slog.Record) error {
	h.fn(r.Message)
	return h.Handler.Handle(ctx, r)
}
func (h onLog) WithAttrs(as []slog.Attr) slog.Handler { return onLog{h.Handler.WithAttrs(as), h.fn} }
func (h onLog) WithGroup(g string) slog.Handler       { return onLog{h.Handler.WithGroup(g), h.fn} }

// A follow restarted while its node's tip (32) is below the height the
// target has exported (54) says so, keeps /metrics and /readyz true while
// it waits, goes on once the node catches up, and ends (exit 1, naming both
// heights) when the node stays behind for --reorg-window polls. It once
// waited in silence with blockhaul_last_exported_height 0 and /readyz
// "starting".
func TestFollowWhileTheSourceIsBehindTheTarget(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "head")
	if _, err := runWith(t, testConfig(CmdFollow, dsn, stg, nil, 1, 54), newCounting(1000)); err != nil {
		t.Fatal(err)
	}
	const want = "the source's tip 32 is below the exported height 54: waiting for the node to catch up"
	follow := func(src *behindSource, to uint64, window uint64, seen func(m *monitor.Monitor)) (string, error) {
		cfg := testConfig(CmdFollow, dsn, stg, nil, 1, to)
		cfg.Source, cfg.ToSet, cfg.FromSet = src, to > 0, false
		cfg.PollInterval, cfg.ReorgWindow = 5*time.Millisecond, window
		m := monitor.New(monitor.Options{Out: io.Discard, Terminal: new(bool), Interval: time.Hour})
		cfg.Monitor = m
		var mu sync.Mutex
		var logs strings.Builder
		h := onLog{slog.NewTextHandler(&syncWriter{&mu, &logs}, nil), func(msg string) {
			if msg == want {
				seen(m)
			}
		}}
		_, err := Run(context.Background(), cfg, io.Discard, slog.New(h))
		mu.Lock()
		defer mu.Unlock()
		return logs.String(), err
	}
	gauge := func(m *monitor.Monitor, name string) float64 {
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name && len(mf.GetMetric()) == 1 {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	base := cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 3})

	// The node catches up: the follow goes on to --to.
	src := &behindSource{Synthetic: base, low: 32, high: 70}
	src.catchUpAfter.Store(200)
	var last float64
	var ready string
	logs, err := follow(src, 60, 1<<20, func(m *monitor.Monitor) {
		last = gauge(m, "blockhaul_last_exported_height")
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		ready = rec.Body.String()
		if rec.Code != 503 {
			ready = "ready: " + ready
		}
		src.caughtUp.Store(true)
	})
	if err != nil {
		t.Fatalf("follow after the node caught up: %v\n%s", err, logs)
	}
	if !strings.Contains(logs, want) || !strings.Contains(logs, "the node caught up") {
		t.Fatalf("the log does not say the node is behind, then caught up:\n%s", logs)
	}
	if last != 54 || !strings.Contains(ready, want) || strings.HasPrefix(ready, "ready") {
		t.Fatalf("while waiting: blockhaul_last_exported_height %v (want 54), /readyz %q (want 503 saying why)", last, ready)
	}
	conn := pgtest.ConnectTo(t, dsn)
	var top int64
	if err := conn.QueryRow(context.Background(), "SELECT max(height) FROM cometbft.blocks").Scan(&top); err != nil || top != 60 {
		t.Errorf("after the follow: top height %d (%v), want 60", top, err)
	}
	conn.Close(context.Background())

	// The node stays behind: after --reorg-window polls the job ends.
	stuck := &behindSource{Synthetic: base, low: 32, high: 32}
	_, err = follow(stuck, 0, 4, func(*monitor.Monitor) {})
	if err == nil || ExitCode(err) != ExitFailed || !strings.Contains(err.Error(), "tip 32 has stayed below the exported height 60") {
		t.Fatalf("a node that stays behind: %v (exit %d), want exit 1 naming both heights", err, ExitCode(err))
	}
}

type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
