package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// PartAlias is the backfill alias of sub-range i (0-based) of n of alias.
func PartAlias(alias string, i, n int) string {
	return fmt.Sprintf("%s/part-%d-of-%d", alias, i+1, n)
}

// SplitRange splits [from, to] into at most n contiguous sub-ranges of
// near-equal size, in height order.
func SplitRange(from, to uint64, n int) [][2]uint64 {
	if n < 1 {
		n = 1
	}
	size := to - from + 1 // to >= from
	if size == 0 {        // the whole uint64 range
		size = ^uint64(0)
	}
	if uint64(n) > size {
		n = int(size)
	}
	parts := make([][2]uint64, 0, n)
	start := from
	for i := range n {
		l := size / uint64(n)
		if uint64(i) < size%uint64(n) {
			l++
		}
		parts = append(parts, [2]uint64{start, start + l - 1})
		start += l
	}
	return parts
}

// SeamError is a broken parent-hash link between two sub-ranges in staging:
// the first block of one does not link to the last block of the one before.
type SeamError struct {
	Height     uint64 // the first block of the later sub-range
	ParentHash []byte
	PrevHash   []byte // the staged hash of Height-1
}

func (e *SeamError) Error() string {
	return fmt.Sprintf("export: continuity break between export streams at height %d: its parent hash %x is not the staged hash %x of block %d",
		e.Height, e.ParentHash, e.PrevHash, e.Height-1)
}

// Parts is the one split of a backfill's range into n export streams:
// contiguous sub-ranges of near-equal size (SplitRange), each a backfill of
// its own, alias PartAlias(s.Alias, i, n), with its own checkpoint row. One
// part is s itself.
func Parts(s Stream, n int) []Stream {
	ranges := SplitRange(s.From, s.To, n)
	if len(ranges) == 1 {
		return []Stream{s}
	}
	parts := make([]Stream, len(ranges))
	for i, r := range ranges {
		parts[i] = Stream{Alias: PartAlias(s.Alias, i, len(ranges)), From: r[0], To: r[1]}
	}
	return parts
}

// RunStreams exports a backfill's range over len(sessions) streams at once:
// the range is split into Parts, each exported by Run on its own session,
// so every invariant of Run holds per sub-range and a kill resumes each
// sub-range where it stopped (OpenStreams, RunParts, CloseStreams). One
// session is Run itself. Resume with the same number of streams
// (RecordedStreams reads it back): another number names other sub-ranges,
// which start over (their rows merge with those already present).
func RunStreams(ctx context.Context, sessions []*Session, store *staging.Store, dec Decoder, cfg Config) (Result, error) {
	if len(sessions) == 1 {
		return Run(ctx, sessions[0], store, dec, cfg)
	}
	if len(sessions) == 0 {
		return Result{}, errors.New("export: no sessions for the export streams")
	}
	if cfg.Available != nil {
		return Result{}, errors.New("export: export streams need the whole range staged")
	}
	start := time.Now()
	parts := Parts(cfg.Stream, len(sessions))
	done, res, err := OpenStreams(ctx, sessions[0], store, dec, cfg, parts)
	if err != nil || done {
		res.Duration = time.Since(start)
		return res, err
	}
	res, err = RunParts(ctx, dec, cfg, parts, func(ctx context.Context, i int, pc Config) (Result, error) {
		return Run(ctx, sessions[i], store, dec, pc)
	})
	if err == nil {
		res, err = CloseStreams(ctx, sessions[0], cfg, parts, res)
	}
	res.Duration = time.Since(start)
	return res, err
}

// OpenStreams registers cfg.Stream, a backfill split into parts (Parts),
// before any part runs: its schema made, its alias refused if another
// range holds it, and every seam between parts checked against staging's
// headers, so nothing is committed across a break. done is true, with the
// result, when the backfill is complete already.
func OpenStreams(ctx context.Context, sess *Session, store *staging.Store, dec Decoder, cfg Config, parts []Stream) (done bool, res Result, err error) {
	cfg.ensureDefaults()
	if err := cfg.Validate(); err != nil {
		return false, res, err
	}
	if cfg.Stream.Head {
		return false, res, errors.New("export: the head stream cannot be split into export streams")
	}
	res = Result{Rows: map[string]uint64{}}
	for _, t := range dec.Tables() {
		res.Rows[t.Name] = 0
	}
	parent := cfg.Stream
	var cur Cursor
	err = sess.Do(ctx, "register "+parent.Name(), func(ctx context.Context, conn *pgx.Conn) error {
		if err := checkStaged(ctx, conn, cfg.Schema, dec, store); err != nil {
			return err
		}
		if err := EnsureSchema(ctx, conn, cfg.Schema, cfg.Indexes.Select(dec.Tables()), cfg.SkipIndexes, cfg.Logger); err != nil {
			return err
		}
		var err error
		cur, err = LoadCursor(ctx, conn, cfg.Schema, parent)
		return err
	})
	if err != nil {
		return false, res, err
	}
	if cur.Valid && cur.Height >= parent.To {
		res.Last, res.Complete = cur, true
		return true, res, nil
	}
	return false, res, CheckSeams(store, parts)
}

// CheckSeams checks, from staging's headers, that the first block of every
// part links to the last block of the part before it.
func CheckSeams(store *staging.Store, parts []Stream) error {
	for _, p := range parts[1:] {
		hash, _, herr := store.Header(p.From - 1)
		if herr != nil {
			return fmt.Errorf("export: read staged block %d at a stream seam: %w", p.From-1, herr)
		}
		_, parentHash, herr := store.Header(p.From)
		if herr != nil {
			return fmt.Errorf("export: read staged block %d at a stream seam: %w", p.From, herr)
		}
		if !bytes.Equal(parentHash, hash) {
			return &SeamError{Height: p.From, ParentHash: parentHash, PrevHash: hash}
		}
	}
	return nil
}

// RunParts runs run for every part at once, each given cfg for its part
// (its Stream, its Logger, OnBatch and OnStart serialised with the other
// parts'), and sums their results. The first part to fail cancels the
// others: what they fail with afterwards (a query cut short, a closed
// connection, not always wrapping context.Canceled) is its effect, so the
// error returned is the first part's; when the caller's ctx was cancelled
// first, a part's error that says so (or the context's own).
func RunParts(ctx context.Context, dec Decoder, cfg Config, parts []Stream, run func(ctx context.Context, i int, part Config) (Result, error)) (Result, error) {
	cfg.ensureDefaults()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cause atomic.Int64
	cause.Store(-1)
	results := make([]Result, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	var mu sync.Mutex // serialises OnBatch and OnStart
	for i, p := range parts {
		pc := partConfig(cfg, p, i, len(parts), &mu)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = run(sctx, i, pc)
			if errs[i] != nil {
				if ctx.Err() == nil { // not the caller's cancellation
					cause.CompareAndSwap(-1, int64(i))
				}
				cancel() // one stream's failure stops the others
			}
		}()
	}
	wg.Wait()
	res := sumResults(dec, results)
	var first error
	if i := cause.Load(); i >= 0 {
		first = errs[i]
	} else if slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		first = ctx.Err()
		for _, e := range errs {
			if errors.Is(e, context.Canceled) {
				first = e
				break
			}
		}
	}
	if first == nil && !res.Complete {
		first = ctx.Err()
	}
	if first != nil {
		res.Complete = false
	}
	return res, first
}

// partConfig is cfg for part p, the i-th of n, its hooks serialised by mu.
func partConfig(cfg Config, p Stream, i, n int, mu *sync.Mutex) Config {
	pc := cfg
	pc.Stream = p
	pc.Logger = cfg.Logger.With("part", i+1, "of", n)
	if cfg.OnBatch != nil {
		pc.OnBatch = func(b BatchStats) {
			mu.Lock()
			defer mu.Unlock()
			cfg.OnBatch(b)
		}
	}
	if cfg.OnStart != nil {
		pc.OnStart = func(s Stream, next uint64) {
			mu.Lock()
			defer mu.Unlock()
			cfg.OnStart(s, next)
		}
	}
	return pc
}

// sumResults adds up the parts' results, in part order.
func sumResults(dec Decoder, results []Result) Result {
	res := Result{Rows: map[string]uint64{}, Complete: true}
	for _, t := range dec.Tables() {
		res.Rows[t.Name] = 0
	}
	for i, r := range results {
		if r.Blocks > 0 && (res.Blocks == 0 || r.Start < res.Start) {
			res.Start = r.Start
		}
		res.Blocks += r.Blocks
		res.Batches += r.Batches
		res.Conflicts += r.Conflicts
		for k, v := range r.Rows {
			res.Rows[k] += v
		}
		res.Complete = res.Complete && r.Complete
		if i == len(results)-1 {
			res.Last = r.Last
		}
	}
	return res
}

// CloseStreams marks cfg.Stream, split into parts whose results res sums,
// complete at its range's last block, once every part's row is complete,
// in one transaction.
func CloseStreams(ctx context.Context, sess *Session, cfg Config, parts []Stream, res Result) (Result, error) {
	parent := cfg.Stream
	last := parts[len(parts)-1].To
	err := sess.Do(ctx, "complete "+parent.Name(), func(ctx context.Context, conn *pgx.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if err := checkPartsComplete(ctx, tx, cfg.Schema, parts); err != nil {
				return err
			}
			return saveCursor(ctx, tx, cfg.Schema, parent, parent.From, last, res.Last.Hash)
		})
	})
	if err != nil {
		res.Complete = false
		return res, err
	}
	res.Last = Cursor{Height: last, Hash: res.Last.Hash, Valid: true}
	return res, nil
}

// checkPartsComplete confirms, inside the transaction that completes the
// backfill, that every sub-range's row is complete.
func checkPartsComplete(ctx context.Context, tx pgx.Tx, schema string, parts []Stream) error {
	for _, p := range parts {
		var h *int64
		a := p.Alias
		err := tx.QueryRow(ctx, fmt.Sprintf("SELECT last_height FROM %s.%s WHERE alias = $1", chain.QuoteIdent(schema), backfillTable), a).Scan(&h)
		if err != nil {
			return fmt.Errorf("export: read backfill %q: %w", a, err)
		}
		if h == nil || uint64(*h) < p.To {
			return fmt.Errorf("export: backfill %q is not complete", a)
		}
	}
	return nil
}
