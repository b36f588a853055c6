package monitor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// shutdownTimeout bounds how long Serve waits for in-flight scrapes when
// its context ends.
const shutdownTimeout = 5 * time.Second

// Handler serves /healthz (200 while the process runs), /readyz (200 when
// SetReady said so, else 503 with the reason) and /metrics (the registry, in
// the Prometheus exposition formats).
func (m *Monitor) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ok, reason := m.readiness()
		if !ok {
			if reason == "" {
				reason = "not ready"
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, reason)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	return mux
}

// Serve listens on addr and serves Handler until ctx ends, then shuts the
// server down and returns once it has. A failure to listen returns at once.
func (m *Monitor) Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("monitor: listen on %s: %w", addr, err)
	}
	return m.serve(ctx, ln)
}

// ServeListener serves Handler on ln until ctx ends, like Serve. Listening
// before the job starts means /metrics answers from the job's first moment
// and a busy address fails the job at once.
func (m *Monitor) ServeListener(ctx context.Context, ln net.Listener) error { return m.serve(ctx, ln) }

func (m *Monitor) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("monitor: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	serr := srv.Shutdown(sctx)
	if serr != nil {
		// Scrapes still running after the grace period are cut.
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("monitor: serve on %s: %w", ln.Addr(), err)
	}
	if serr != nil {
		return fmt.Errorf("monitor: shut down server on %s: %w", ln.Addr(), serr)
	}
	return nil
}
