package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"golang.org/x/sync/errgroup"
)

// FetchRun is one client's pass over the served range.
type FetchRun struct {
	Blocks       uint64  `json:"blocks"`
	Seconds      float64 `json:"seconds"`
	BlocksPerSec float64 `json:"blocks_per_s"`
	// MBPerSec is response bytes (JSON) received per second.
	MBPerSec float64 `json:"mb_per_s"`
	Requests int64   `json:"requests"`
}

// FetchResult compares blockhaul's fetch (source → loader → staging) with a
// minimal client that only reads the same responses, both at the same
// concurrency and batch size against the same local server.
type FetchResult struct {
	Chain     string    `json:"chain"`
	Workers   int       `json:"workers"`
	Span      int       `json:"span"`
	Minimal   FetchRun  `json:"minimal"`
	Blockhaul *FetchRun `json:"blockhaul,omitempty"`
	// Client is blockhaul's RPC source alone: requests, splits and checks
	// the blocks as fetch does, then drops them (nothing compressed or
	// staged) — the part of fetch that a client does.
	Client *FetchRun `json:"client,omitempty"`
	// Ratio is blockhaul's rate over the minimal client's (0 when not
	// measured).
	Ratio float64 `json:"ratio,omitempty"`
	// ClientRatio is the RPC source's rate over the minimal client's.
	ClientRatio float64 `json:"client_ratio,omitempty"`
	// Note says why blockhaul's side was not measured.
	Note string `json:"note,omitempty"`
}

func runFetch(ctx context.Context, cfg *Config) (*FetchResult, error) {
	fam := cfg.FetchChain
	res := &FetchResult{Chain: fam.String(), Workers: cfg.FetchWorkers, Span: cfg.FetchSpan}
	from, to := uint64(1), cfg.FetchBlocks
	cfg.Logger.Info("fetch: rendering server responses", "chain", fam, "blocks", to)
	srv, err := NewRPCServer(ctx, newSynthetic(fam, cfg.Seed), from, to)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	runtime.GC()

	// A short warm-up so that neither side pays for the first connections
	// and the server's first allocations.
	if _, err := minimalFetch(ctx, srv.URL(), fam, from, min(to, from+uint64(cfg.FetchWorkers*cfg.FetchSpan*4)), cfg.FetchWorkers, cfg.FetchSpan); err != nil {
		return nil, err
	}
	res.Minimal, err = minimalFetch(ctx, srv.URL(), fam, from, to, cfg.FetchWorkers, cfg.FetchSpan)
	if err != nil {
		return nil, err
	}
	cfg.Logger.Info("fetch: minimal client", "blocks_per_s", int(res.Minimal.BlocksPerSec))

	if cfg.FetchSource == nil {
		res.Note = "not available: no blockhaul RPC source configured"
		return res, nil
	}
	src, err := cfg.FetchSource(srv.URL())
	if err != nil {
		return nil, fmt.Errorf("bench: fetch source: %w", err)
	}
	if c, ok := src.(interface{ Close() }); ok {
		defer c.Close()
	} else if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	if res.Blockhaul, err = stageFetch(ctx, cfg, srv, src, from, to); err != nil {
		return nil, err
	}
	if res.Minimal.BlocksPerSec > 0 {
		res.Ratio = res.Blockhaul.BlocksPerSec / res.Minimal.BlocksPerSec
	}
	cfg.Logger.Info("fetch: blockhaul", "blocks_per_s", int(res.Blockhaul.BlocksPerSec), "ratio", round2(res.Ratio))

	if res.Client, err = sourceAlone(ctx, cfg, srv, src, to); err != nil {
		return nil, err
	}
	rate := res.Client.BlocksPerSec
	if res.Minimal.BlocksPerSec > 0 {
		res.ClientRatio = rate / res.Minimal.BlocksPerSec
	}
	cfg.Logger.Info("fetch: blockhaul RPC source alone", "blocks_per_s", int(rate), "ratio", round2(res.ClientRatio))
	return res, nil
}

// stageFetch times blockhaul's fetch from srv into a new staging store.
func stageFetch(ctx context.Context, cfg *Config, srv *RPCServer, src loader.Source, from, to uint64) (*FetchRun, error) {
	dir, err := os.MkdirTemp(cfg.WorkDir, "blockhaul-bench-fetch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	store, err := staging.Open(dir, staging.Options{})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	runtime.GC()
	req0, _, bytes0 := srv.Requests()
	stop, err := startProfile(cfg, "fetch-blockhaul")
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	st, err := loader.Fetch(ctx, src, store, from, to, loader.Config{Workers: cfg.FetchWorkers, Span: cfg.FetchSpan}, nil)
	if err == nil {
		err = store.Flush()
	}
	sec := time.Since(t0).Seconds()
	stop()
	if err != nil {
		return nil, fmt.Errorf("bench: blockhaul fetch from %s: %w", srv.URL(), err)
	}
	req1, _, bytes1 := srv.Requests()
	return &FetchRun{Blocks: st.Blocks, Seconds: sec, BlocksPerSec: perSec(st.Blocks, sec),
		MBPerSec: float64(bytes1-bytes0) / 1e6 / sec, Requests: req1 - req0}, nil
}

// sourceAlone times the RPC source alone: requests split and checked,
// nothing staged.
func sourceAlone(ctx context.Context, cfg *Config, srv *RPCServer, src loader.Source, to uint64) (*FetchRun, error) {
	req0, _, bytes0 := srv.Requests()
	runtime.GC()
	stop, err := startProfile(cfg, "fetch-client")
	if err != nil {
		return nil, err
	}
	rate, err := sourceRate(ctx, src, to, cfg.FetchWorkers, cfg.FetchSpan)
	stop()
	if err != nil {
		return nil, err
	}
	req1, _, bytes1 := srv.Requests()
	run := &FetchRun{Blocks: to, BlocksPerSec: rate, Requests: req1 - req0}
	if rate > 0 {
		run.Seconds = float64(to) / rate
		run.MBPerSec = float64(bytes1-bytes0) / 1e6 / run.Seconds
	}
	return run, nil
}

// minimalFetch is the least a client can do: workers goroutines each POST
// one batch per span (both calls of every height, as a source must ask) and
// read the body to its end, discarding it.
func minimalFetch(ctx context.Context, url string, fam chain.Family, from, to uint64, workers, span int) (FetchRun, error) {
	if family.Of(fam) == nil {
		return FetchRun{}, fmt.Errorf("bench: minimal client: unknown chain family %s", fam)
	}
	tr := &http.Transport{MaxIdleConns: workers, MaxIdleConnsPerHost: workers, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	spans := make(chan [2]uint64)
	var reqs, bytesIn atomic.Int64
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(spans)
		for lo := from; lo <= to; lo += uint64(span) {
			hi := min(lo+uint64(span)-1, to)
			select {
			case spans <- [2]uint64{lo, hi}:
			case <-gctx.Done():
				return nil
			}
			if hi == to {
				break
			}
		}
		return nil
	})
	for range workers {
		g.Go(func() error {
			var body []byte
			for sp := range spans {
				body = appendBatchRequest(body[:0], fam, sp[0], sp[1])
				req, err := http.NewRequestWithContext(gctx, http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					return err
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					return fmt.Errorf("bench: minimal client: blocks %d-%d: %w", sp[0], sp[1], err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					return fmt.Errorf("bench: minimal client: blocks %d-%d: read: %w", sp[0], sp[1], err)
				}
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("bench: minimal client: blocks %d-%d: HTTP %s", sp[0], sp[1], resp.Status)
				}
				reqs.Add(1)
				bytesIn.Add(n)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return FetchRun{}, err
	}
	sec := time.Since(t0).Seconds()
	n := to - from + 1
	return FetchRun{Blocks: n, Seconds: sec, BlocksPerSec: perSec(n, sec), MBPerSec: float64(bytesIn.Load()) / 1e6 / sec, Requests: reqs.Load()}, nil
}

// appendBatchRequest appends the JSON-RPC batch that fetches heights
// [lo, hi] from a node of family fam: for each height the calls that make
// its raw record.
func appendBatchRequest(dst []byte, fam chain.Family, lo, hi uint64) []byte {
	calls := family.Of(fam).Node.Calls
	dst = append(dst, '[')
	id := 1
	for h := lo; ; h++ {
		for _, c := range calls {
			if id > 1 {
				dst = append(dst, ',')
			}
			dst = fmt.Appendf(dst, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":`, id, c.Method)
			dst = append(c.AppendParams(dst, h), '}')
			id++
		}
		if h == hi {
			break
		}
	}
	return append(dst, ']')
}
