package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"golang.org/x/sync/errgroup"
)

// estimateProbe is how long estimate --rpc fetches from the node to
// measure its rate (a variable for tests).
var estimateProbe = 3 * time.Second

// probeFetch measures the rate the --rpc endpoints serve blocks at: for
// estimateProbe, --fetch-workers requests of --fetch-span heights at once
// (the fetch's own), over the range's heights up to the tip (again from the
// start when they run out), under --rps; the blocks are read and dropped,
// nothing is staged. A rate above what --rps allows (the limiter's burst)
// is brought down to it. A probe in which the node answered nothing is an
// error naming the endpoints.
func probeFetch(ctx context.Context, cfg *Job, log *slog.Logger) (*archive.FetchProbe, error) {
	src, err := newSource(cfg, nil, log)
	if err != nil {
		return nil, err
	}
	defer closeSource(src)
	endpoints := make([]string, len(cfg.RPC))
	for i, u := range cfg.RPC {
		endpoints[i] = jsonrpc.Redact(u)
	}
	named := strings.Join(endpoints, ", ")
	tctx, cancel := context.WithTimeout(ctx, max(cfg.RPCTimeout, estimateProbe))
	tip, err := src.Tip(tctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("estimate: probe %s: the tip: %w", named, err)
	}
	from, to := cfg.From, min(cfg.To, tip)
	if from > to {
		return nil, fmt.Errorf("estimate: probe %s: its tip %d is below --from %d: nothing to measure", named, tip, from)
	}
	span := uint64(max(cfg.FetchSpan, 1))

	var (
		mu        sync.Mutex
		next      = from
		blocks    atomic.Uint64
		lastDone  atomic.Int64 // nanoseconds since start of the last completed span
		firstErr  error
		completed atomic.Int64
		failed    atomic.Int64
	)
	take := func() (uint64, uint64) {
		mu.Lock()
		defer mu.Unlock()
		if next > to {
			next = from
		}
		lo := next
		hi := min(lo+span-1, to)
		next = hi + 1
		return lo, hi
	}
	start := time.Now()
	deadline := start.Add(estimateProbe)
	// A span in flight at the deadline is let finish within the RPC timeout
	// (its blocks count; the elapsed time ends at the last one done).
	pctx, pcancel := context.WithDeadline(ctx, deadline.Add(cfg.RPCTimeout))
	defer pcancel()
	g, gctx := errgroup.WithContext(pctx)
	for range max(cfg.FetchWorkers, 1) {
		g.Go(func() error {
			for time.Now().Before(deadline) && gctx.Err() == nil {
				lo, hi := take()
				bs, err := src.Fetch(gctx, lo, hi)
				if err != nil {
					if gctx.Err() != nil {
						return nil
					}
					// A span that fails costs the probe its time, as it
					// would the fetch's; the probe goes on.
					failed.Add(1)
					lastDone.Store(int64(time.Since(start)))
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				blocks.Add(uint64(len(bs)))
				completed.Add(1)
				lastDone.Store(int64(time.Since(start)))
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n, elapsed := blocks.Load(), time.Duration(lastDone.Load())
	if n == 0 || elapsed <= 0 {
		if firstErr == nil {
			firstErr = errors.New("no span answered")
		}
		return nil, fmt.Errorf("estimate: probe %s for %s: %w", named, estimateProbe, firstErr)
	}
	rate := float64(n) / elapsed.Seconds()
	how := fmt.Sprintf("measured: %d blocks from %s in %.1fs, %d requests of %d heights at once", n, named, elapsed.Seconds(), max(cfg.FetchWorkers, 1), span)
	if firstErr != nil {
		how += fmt.Sprintf(" (%d of %d spans failed, the first: %v)", failed.Load(), failed.Load()+completed.Load(), firstErr)
	}
	if cfg.RPS > 0 {
		allowed := cfg.RPS * float64(len(cfg.RPC))
		if cs, ok := src.(interface {
			Stats() []jsonrpc.EndpointStats
		}); ok {
			var reqs uint64
			for _, e := range cs.Stats() {
				reqs += e.Requests
			}
			// The tip's request is in the count; the probe's time is not its.
			perSec := float64(reqs-min(reqs, 1)) / elapsed.Seconds()
			if perSec > allowed {
				rate *= allowed / perSec
				how += fmt.Sprintf("; capped by --rps %g: %.1f requests/s were sent, %g allowed", cfg.RPS, perSec, allowed)
			}
		}
		how += fmt.Sprintf(" (--rps %g on %d endpoints)", cfg.RPS, len(cfg.RPC))
	}
	return &archive.FetchProbe{BlocksPerSec: rate, Source: how}, nil
}

// deferredWork is what a fill of cfg's tables into empty tables defers:
// the builds of their keys and of the --indexes set, and an ANALYZE of each.
func deferredWork(cfg *Job, tables []chain.Table) *archive.Deferred {
	d := &archive.Deferred{Always: cfg.DeferIndexes == IndexesAlways, Never: cfg.DeferIndexes == IndexesNever}
	for _, t := range cfg.Indexes.Select(tables) {
		d.Builds += len(t.Indexes)
		if len(t.PrimaryKey) > 0 {
			d.Builds++
		}
		d.Analyzes++
	}
	return d
}
