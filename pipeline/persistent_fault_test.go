package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/rpctest"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

// failHeight500 fronts an RPC server and answers HTTP 500 to every request
// that asks for height h, forever.
func failHeight500(t *testing.T, backend string, h uint64) *httptest.Server {
	t.Helper()
	needle := []byte(fmt.Sprintf(`"height":"%d"`, h))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if bytes.Contains(body, needle) {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		resp, err := http.Post(backend, "application/json", bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// wrongHeightAt answers every block call for height h with the block of
// the height above, forever.
func wrongHeightAt(node *cometReplay, h uint64) rpctest.Handler {
	return func(method string, params json.RawMessage) (any, *rpctest.Error) {
		if method == "block" && bytes.Contains(params, []byte(fmt.Sprintf(`"%d"`, h))) {
			params = json.RawMessage(fmt.Sprintf(`{"height":"%d"}`, h+1))
		}
		return node.handle(method, params)
	}
}

// A node that answers one height wrongly forever ends a run (fetch and
// export at once) within its retry bound, exit 1, naming the height, the
// endpoint and the last error: no goroutine waits for a span that will
// never be staged. The context deadline is only the guard that turns a
// hang into a failure.
func TestRunEndsOnPersistentBadAnswer(t *testing.T) {
	const bad = 23
	cases := []struct {
		name string
		url  func(t *testing.T) string
		want []string
	}{
		{"HTTP 500 forever", func(t *testing.T) string {
			node := rpctest.NewServer(rpctest.Config{Handler: newCometReplay(t, "node-0.38").handle})
			t.Cleanup(node.Close)
			return failHeight500(t, node.URL, bad).URL
		}, []string{"HTTP 500"}},
		{"wrong height forever", func(t *testing.T) string {
			node := rpctest.NewServer(rpctest.Config{Handler: wrongHeightAt(newCometReplay(t, "node-0.38"), bad)})
			t.Cleanup(node.Close)
			return node.URL
		}, []string{"height is 24"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url(t)
			cfg := rpcRunConfig(t, url)
			// Room for the lead gate to hold the span producer back while
			// export waits on the stuck height: the shape that hung.
			cfg.BatchBlocks, cfg.FetchLead = 4, 1
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			start := time.Now()
			sum, err := Run(ctx, cfg, io.Discard, quiet)
			took := time.Since(start)
			if ctx.Err() != nil {
				t.Fatalf("run still going after %s (the guard fired): err %v", took.Round(time.Millisecond), err)
			}
			t.Logf("run ended after %s: %v", took.Round(time.Millisecond), err)
			if err == nil || sum.Complete {
				t.Fatalf("complete %v, err %v; want a failure", sum.Complete, err)
			}
			if code := ExitCode(err); code != ExitFailed {
				t.Fatalf("exit %d, want %d: %v", code, ExitFailed, err)
			}
			for _, s := range append([]string{fmt.Sprint(bad), url, "attempts"}, tc.want...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// midReorgOnce serves the synthetic chain, except that the first time it
// is asked for height at it answers with that height of another fork: a
// sound block whose parent is not the block below it, as a node switching
// forks serves for a moment.
type midReorgOnce struct {
	*countingSource
	other  *cometbftsynth.Synthetic
	at     uint64
	served atomic.Bool
}

func (s *midReorgOnce) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	blocks, err := s.countingSource.Fetch(ctx, from, to)
	if err != nil || s.at < from || s.at > to || !s.served.CompareAndSwap(false, true) {
		return blocks, err
	}
	blocks[s.at-from] = s.other.Block(s.at)
	return blocks, nil
}

// A parent-link break inside a span, served once, is retried like a wrong
// height: the run completes with the tables and staged records of a run
// that never saw it.
func TestRunRetriesTransientParentMismatch(t *testing.T) {
	const at = 233 // inside span 225-240
	cleanDSN, cleanStg := pgtest.NewDatabase(t), filepath.Join(t.TempDir(), "clean")
	mustRunWith(t, testConfig(CmdRun, cleanDSN, cleanStg, nil, 1, 400), newCounting(1000))
	dsn, stg := pgtest.NewDatabase(t), filepath.Join(t.TempDir(), "faulted")
	src := &midReorgOnce{countingSource: newCounting(1000), other: cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 4}), at: at}
	cfg := testConfig(CmdRun, dsn, stg, nil, 1, 400)
	cfg.Source = src
	sum, err := Run(context.Background(), cfg, io.Discard, quiet)
	if err != nil || !sum.Complete {
		t.Fatalf("run with one mid-reorg answer: complete %v, err %v (exit %d)", sum.Complete, err, ExitCode(err))
	}
	if !src.served.Load() || sum.Fetch.Retries == 0 {
		t.Fatalf("the broken link was served %v, retries %d: the scenario did not happen", src.served.Load(), sum.Fetch.Retries)
	}
	if got, want := fingerprint(t, dsn), fingerprint(t, cleanDSN); got != want {
		t.Fatalf("tables differ from a clean run:\n%s\nwant\n%s", got, want)
	}
	a, b := openStaged(t, cleanStg), openStaged(t, stg)
	for h := uint64(1); h <= 400; h++ {
		x, err1 := a.Get(h)
		y, err2 := b.Get(h)
		if err1 != nil || err2 != nil || !bytes.Equal(x.Raw, y.Raw) || !bytes.Equal(x.Hash, y.Hash) {
			t.Fatalf("staged block %d differs from the clean run's (%v, %v)", h, err1, err2)
		}
	}
}

func openStaged(t *testing.T, dir string) *staging.Store {
	t.Helper()
	s := stagingtest.Open(t, dir, staging.Options{ReadOnly: true})
	t.Cleanup(func() { s.Close() })
	return s
}
