// Package loader fills staging with the blocks of a height range: it asks
// the store which heights are missing, fetches only those from a Source with
// bounded concurrency, in any order, and writes them in group-committed
// batches. It never touches PostgreSQL.
package loader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/backoff"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
	"golang.org/x/sync/errgroup"
)

// Config configures a fetch. The zero value is usable after EnsureDefaults.
type Config struct {
	// Workers is the number of Fetch calls in flight. Default 8.
	Workers int
	// Span is the number of consecutive heights asked of the source in one
	// Fetch call (one JSON-RPC batch for RPC sources). Default 16.
	Span int
	// MaxRetries bounds the retries of one span: its budget is
	// MaxRetries+1 failures (see spanJob; a request that spent a retry
	// budget of its own costs half of it). Default 5.
	MaxRetries int
	// BaseBackoff and MaxBackoff bound the exponential backoff (jittered,
	// internal/backoff) between retries. Defaults 200ms and 10s.
	BaseBackoff, MaxBackoff time.Duration
	// DownAfter bounds an outage: a fetch whose source serves no span for
	// this long, every span failing, ends with a *DownError. Until then a
	// span's failures while the source serves nothing do not spend its
	// budget (see spanJob). Default 2m.
	DownAfter time.Duration
	// BatchBytes is the compressed size at which the writer commits a
	// staging batch. Default 8 MiB.
	BatchBytes int
	// Logger receives progress and retry logs. Default: discard.
	Logger *slog.Logger
	// OnCommit, if set, is called by the writer after each staging commit.
	OnCommit func(CommitStats)
	// OnRetry, if set, is called before each retry of a span.
	OnRetry func(r staging.Range, err error)
	// OnPlan, if set, is called once with the number of missing heights.
	OnPlan func(missing uint64)
	// OnFetched, if set, is called by a worker after each span it fetched.
	OnFetched func(blocks int)
	// Verify, if set, recomputes a block's hash from its raw record (the
	// family's VerifyBlock). Every block is checked with it before it is
	// staged, whatever the source: one whose record does not hash to what
	// it claims, or whose Hash is not that hash, is refused with a
	// retryable *chain.HashMismatchError.
	Verify func(raw []byte) (hash []byte, err error)
	// Prover, if set, is the chain of trust every record is proven with,
	// in height order, before it is staged (see Prover); the checkpoint it
	// keeps is staged with the records it proved.
	Prover Prover
	// Gate, if set, is called with the last height of each span before the
	// span is handed to a worker, and may wait: run uses it to keep fetch a
	// bounded distance ahead of export. An error stops the fetch.
	Gate func(ctx context.Context, to uint64) error
}

// DefaultDownAfter is Config.DownAfter's default: a node restarting comes
// back within it.
const DefaultDownAfter = 2 * time.Minute

// CommitStats describes one staging commit.
type CommitStats struct {
	Blocks      int
	RawBytes    int64
	StoredBytes int64
	Duration    time.Duration
}

// EnsureDefaults fills unset fields.
func (c *Config) EnsureDefaults() {
	c.Workers = cmp.Or(c.Workers, 8)
	c.Span = cmp.Or(c.Span, 16)
	c.MaxRetries = cmp.Or(c.MaxRetries, 5)
	c.BaseBackoff = cmp.Or(c.BaseBackoff, 200*time.Millisecond)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, 10*time.Second)
	c.DownAfter = cmp.Or(c.DownAfter, DefaultDownAfter)
	c.BatchBytes = cmp.Or(c.BatchBytes, 8<<20)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid field at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("loader: workers must be positive, got %d", c.Workers))
	}
	if c.Span < 0 {
		errs = append(errs, fmt.Errorf("loader: span must be positive, got %d", c.Span))
	}
	if c.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("loader: max retries must not be negative, got %d", c.MaxRetries))
	}
	if c.DownAfter < 0 {
		errs = append(errs, fmt.Errorf("loader: down-after must not be negative, got %s", c.DownAfter))
	}
	return errors.Join(errs...)
}

// Stats summarises a fetch.
type Stats struct {
	Planned     uint64 // heights that were missing when the fetch started
	Blocks      uint64 // blocks staged by this fetch
	RawBytes    int64
	StoredBytes int64 // the staged records as stored: what they add to staging.Size.Records
	Retries     uint64
	Duration    time.Duration
}

// FetchError is a span the source could not serve.
type FetchError struct {
	Range staging.Range
	Err   error
}

func (e *FetchError) Error() string {
	if e.Range.From == e.Range.To {
		return fmt.Sprintf("fetch block %d: %v", e.Range.From, e.Err)
	}
	return fmt.Sprintf("fetch blocks %s: %v", e.Range, e.Err)
}
func (e *FetchError) Unwrap() error { return e.Err }

// InvalidBlockError is a block the source returned that is not the one asked
// for or is malformed. It is never staged.
type InvalidBlockError struct {
	Height uint64
	Reason string
}

func (e *InvalidBlockError) Error() string {
	return fmt.Sprintf("loader: block %d is invalid: %s", e.Height, e.Reason)
}

// Fault marks the error as an unsound answer: retried, since a node switching forks or a proxy that mangles one answer may answer soundly next time; a data error (exit 4) once the retries are spent.
func (e *InvalidBlockError) Fault() fault.Class { return fault.Unsound }

// FailedHeight is the height the block was asked for (see HeightError).
func (e *InvalidBlockError) FailedHeight() uint64 { return e.Height }

// Fetch stages every missing height of [from, to] from src into store. It
// binds the store to the source's chain first (refusing another chain's
// store). progress, if not nil, is advanced as heights are committed, so an
// exporter can follow the contiguous staged prefix.
func Fetch(ctx context.Context, src Source, store *staging.Store, from, to uint64, cfg Config, progress *Progress) (Stats, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return Stats{}, err
	}
	start := time.Now()
	chainID, err := src.ChainID(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("loader: chain id: %w", err)
	}
	if err := store.Bind(src.Family(), chainID); err != nil {
		return Stats{}, err
	}
	missing, err := store.Missing(from, to)
	if err != nil {
		return Stats{}, err
	}
	if rc, ok := src.(RangeChecker); ok {
		for _, r := range missing {
			if err := rc.CheckRange(ctx, r.From, r.To); err != nil {
				return Stats{}, err
			}
		}
	}
	if cfg.Prover != nil {
		if err := checkProvable(cfg.Prover, store, from); err != nil {
			// The caller checks what it asked for (pipeline's newProver);
			// a range the chain cannot reach is fetched unproven.
			cfg.Logger.Warn("the chain of trust cannot reach this range: staged unproven", "err", err)
			cfg.Prover = nil
		}
	}
	if progress == nil {
		progress = NewProgress(from, to)
	}
	progress.plan(missing)

	var st Stats
	for _, r := range missing {
		st.Planned += r.Len()
	}
	if cfg.OnPlan != nil {
		cfg.OnPlan(st.Planned)
	}
	if len(missing) == 0 && (cfg.Prover == nil || cfg.Prover.Next() > to) {
		progress.finish(nil)
		st.Duration = time.Since(start)
		return st, nil
	}
	cfg.Logger.Info("fetch planned", "from", from, "to", to, "missing", st.Planned, "spans", spanCount(missing, uint64(cfg.Span)))

	// One group owns every goroutine of the fetch: the span producer (which
	// may wait in cfg.Gate), the workers and the writer. The first failure
	// cancels gctx, and every wait below selects on it, so no goroutine is
	// left waiting for a span that will never come.
	g, gctx := errgroup.WithContext(ctx)
	jobs := make(chan staging.Range)
	fetched := make(chan fetchedSpan, cfg.Workers)
	var ahead *aheadGate
	if cfg.Prover != nil {
		ahead = &aheadGate{next: cfg.Prover.Next(), window: uint64(max(4*cfg.Workers*cfg.Span, 2048)), changed: make(chan struct{})}
	}
	g.Go(func() error {
		defer close(jobs)
		for r := range spans(missing, uint64(cfg.Span)) {
			if ahead != nil {
				if err := ahead.wait(gctx, r.From); err != nil {
					return nil
				}
			}
			if cfg.Gate != nil {
				if err := cfg.Gate(gctx, r.To); err != nil {
					if gctx.Err() != nil {
						return nil
					}
					return err
				}
			}
			select {
			case jobs <- r:
			case <-gctx.Done():
				return nil
			}
		}
		return nil
	})
	var retries countingRetries
	q := newRetryQueue()
	health := newSourceHealth(start)
	var workers sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		workers.Add(1)
		g.Go(func() error {
			defer workers.Done()
			in := jobs
			for {
				j, ok, done := q.take()
				if done {
					return nil
				}
				if !ok {
					select {
					case r, open := <-in:
						if !open {
							in = nil
							q.producerDone()
							continue
						}
						q.started()
						j = spanJob{span: r}
					case <-q.wake:
						continue
					case <-gctx.Done():
						return gctx.Err()
					}
				}
				blocks, err := fetchSpan(gctx, src, &j, &cfg, health)
				if err != nil {
					if gctx.Err() != nil {
						return gctx.Err()
					}
					if again, ferr := j.failed(err, &cfg, health); ferr != nil {
						return ferr
					} else if again != nil {
						retries.n.Add(1)
						if cfg.OnRetry != nil {
							cfg.OnRetry(j.span, err)
						}
						cfg.Logger.Warn("fetch retry", "range", j.span.String(), "failures", again.cost(), "of", cfg.MaxRetries+1, "backoff", time.Until(again.notBefore).Round(time.Millisecond), "err", err)
						q.requeue(*again)
					}
					q.finished()
					continue
				}
				q.finished()
				health.ok()
				if cfg.OnFetched != nil {
					cfg.OnFetched(len(blocks))
				}
				// Compress here, in parallel; the writer only commits.
				enc := make([]staging.Encoded, len(blocks))
				for j, b := range blocks {
					if enc[j], err = store.Encode(b); err != nil {
						return err
					}
				}
				fs := fetchedSpan{span: j.span, blocks: enc}
				if cfg.Prover != nil {
					fs.raws = make([][]byte, len(blocks))
					for i, b := range blocks {
						fs.raws[i] = b.Raw
					}
				}
				select {
				case fetched <- fs:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
		})
	}
	g.Go(func() error {
		workers.Wait()
		close(fetched)
		return nil
	})
	g.Go(func() error {
		if cfg.Prover != nil {
			return writeProven(gctx, src, store, fetched, &cfg, progress, &st, to, missing, ahead)
		}
		return write(gctx, store, fetched, &cfg, progress, &st)
	})
	err = g.Wait()
	st.Retries = retries.n.Load()
	st.Duration = time.Since(start)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	progress.finish(err)
	return st, err
}

type fetchedSpan struct {
	span   staging.Range
	blocks []staging.Encoded
	raws   [][]byte // the records, for a Prover
}

// write is the only writer of staging: it groups spans into batches and
// commits when a batch is large enough or nothing else is waiting. Its
// first error (a full disk, a damaged store) returns at once: that ends
// the group's context, which every worker's send selects on, so no worker
// blocks and the rest of the range is not fetched for nothing.
func write(ctx context.Context, store *staging.Store, fetched <-chan fetchedSpan, cfg *Config, progress *Progress, st *Stats) error {
	batch := store.NewBatch()
	defer batch.Close()
	var done []staging.Range
	commit := func() error {
		t0 := time.Now()
		n, raw, size := batch.Len(), batch.RawBytes(), batch.RecordBytes()
		if err := crashpoint.Hit(ctx, crashpoint.StageCommit); err != nil {
			return err
		}
		if err := batch.Commit(); err != nil {
			return err
		}
		st.Blocks += uint64(n)
		st.RawBytes += raw
		st.StoredBytes += size
		progress.committed(done)
		done = done[:0]
		if cfg.OnCommit != nil && n > 0 {
			cfg.OnCommit(CommitStats{Blocks: n, RawBytes: raw, StoredBytes: size, Duration: time.Since(t0)})
		}
		return nil
	}
	for fs := range fetched {
		for _, b := range fs.blocks {
			if err := batch.PutEncoded(b); err != nil {
				return err
			}
		}
		done = append(done, fs.span)
		if batch.Size() >= cfg.BatchBytes || len(fetched) == 0 {
			if err := commit(); err != nil {
				return err
			}
		}
	}
	return commit()
}

// fetchSpan makes one attempt at j's span (waiting first until its
// backoff ends, and noting whether the source is down as it starts) and checks that the source returned exactly the blocks
// asked for. Retrying is the worker's: see spanJob.failed.
func fetchSpan(ctx context.Context, src Source, j *spanJob, cfg *Config, health *sourceHealth) ([]chain.Block, error) {
	if err := backoff.Sleep(ctx, time.Until(j.notBefore)); err != nil {
		return nil, err
	}
	j.inOutage = j.inOutage || health.isDown()
	j.started = time.Now()
	blocks, err := src.Fetch(ctx, j.span.From, j.span.To)
	if err == nil {
		err = check(j.span, blocks, cfg.Verify)
	}
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return blocks, err
}

// check verifies the source answered the span: one block per height, in
// order, each with a hash (its record's own, when verify is set), each the
// parent of the next.
func check(r staging.Range, blocks []chain.Block, verify func([]byte) ([]byte, error)) error {
	if uint64(len(blocks)) != r.Len() {
		return &InvalidBlockError{Height: r.From, Reason: fmt.Sprintf("source returned %d blocks for %d heights %s", len(blocks), r.Len(), r)}
	}
	for i, b := range blocks {
		h := r.From + uint64(i)
		if b.Height != h {
			return &InvalidBlockError{Height: h, Reason: fmt.Sprintf("source returned height %d", b.Height)}
		}
		if len(b.Hash) == 0 {
			return &InvalidBlockError{Height: h, Reason: "no block hash"}
		}
		if len(b.Raw) == 0 {
			return &InvalidBlockError{Height: h, Reason: "empty raw record"}
		}
		if verify != nil {
			got, err := verify(b.Raw)
			var hm *chain.HashMismatchError
			switch {
			case errors.As(err, &hm):
				return err
			case err != nil:
				return &InvalidBlockError{Height: h, Reason: err.Error()}
			case string(got) != string(b.Hash):
				return &chain.HashMismatchError{Height: h, What: "block hash the source reported", Claimed: b.Hash, Computed: got}
			}
		}
		if i > 0 && string(b.ParentHash) != string(blocks[i-1].Hash) {
			return &InvalidBlockError{Height: h, Reason: fmt.Sprintf("parent hash %X is not the hash %X of block %d", b.ParentHash, blocks[i-1].Hash, h-1)}
		}
	}
	return nil
}
