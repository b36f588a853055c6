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

// RunStreams exports a backfill's range over len(sessions) streams at once:
// the range is split into contiguous sub-ranges, each a backfill of its own
// (alias PartAlias(cfg.Stream.Alias, i, n)) with its own checkpoint row,
// exported by Run on its own session, so every invariant of Run holds per
// sub-range and a kill resumes each sub-range where it stopped. The seams
// between sub-ranges are checked against staging's headers before anything
// is committed. The backfill's own row is registered with the whole range
// and marked complete, at the range's last block, only once every
// sub-range is. One session is Run itself. With cfg.RunPart set, each
// sub-range is exported through it rather than by Run directly (run stages
// each sub-range beside its export that way). Resume with the same number of
// streams (RecordedStreams reads it back): another number names other
// sub-ranges, which start over (their rows merge with those already
// present).
func RunStreams(ctx context.Context, sessions []*Session, store *staging.Store, dec Decoder, cfg Config) (Result, error) {
	if len(sessions) == 1 {
		return Run(ctx, sessions[0], store, dec, cfg)
	}
	cfg.ensureDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if len(sessions) == 0 {
		return Result{}, errors.New("export: no sessions for the export streams")
	}
	if cfg.Stream.Head {
		return Result{}, errors.New("export: the head stream cannot be split into export streams")
	}
	if cfg.Available != nil {
		return Result{}, errors.New("export: export streams need the whole range staged")
	}
	start := time.Now()
	parent := cfg.Stream
	parts := SplitRange(parent.From, parent.To, len(sessions))
	res := Result{Rows: map[string]uint64{}}
	for _, t := range dec.Tables() {
		res.Rows[t.Name] = 0
	}

	// Register the backfill (refusing an alias of another range); nothing
	// to do when it is complete already.
	var cur Cursor
	err := sessions[0].Do(ctx, "register "+parent.Name(), func(ctx context.Context, conn *pgx.Conn) error {
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
		return res, err
	}
	if cur.Valid && cur.Height >= parent.To {
		res.Last, res.Complete = cur, true
		res.Duration = time.Since(start)
		return res, nil
	}

	// Every seam is checked from staging before any sub-range starts.
	for _, p := range parts[1:] {
		hash, _, herr := store.Header(p[0] - 1)
		if herr != nil {
			return res, fmt.Errorf("export: read staged block %d at a stream seam: %w", p[0]-1, herr)
		}
		_, parentHash, herr := store.Header(p[0])
		if herr != nil {
			return res, fmt.Errorf("export: read staged block %d at a stream seam: %w", p[0], herr)
		}
		if !bytes.Equal(parentHash, hash) {
			return res, &SeamError{Height: p[0], ParentHash: parentHash, PrevHash: hash}
		}
	}

	// The first stream to fail cancels the others: what they fail with
	// afterwards (a query cut short, a closed connection, not always
	// wrapping context.Canceled) is its effect, so its index is kept.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cause atomic.Int64
	cause.Store(-1)
	results := make([]Result, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	var mu sync.Mutex // serialises OnBatch and OnStart
	for i, p := range parts {
		pc := cfg
		pc.Stream = Stream{Alias: PartAlias(parent.Alias, i, len(parts)), From: p[0], To: p[1]}
		pc.Logger = cfg.Logger.With("part", i+1, "of", len(parts))
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.RunPart != nil {
				results[i], errs[i] = cfg.RunPart(sctx, i, sessions[i], pc)
			} else {
				results[i], errs[i] = Run(sctx, sessions[i], store, dec, pc)
			}
			if errs[i] != nil {
				if ctx.Err() == nil { // not the caller's cancellation
					cause.CompareAndSwap(-1, int64(i))
				}
				cancel() // one stream's failure stops the others
			}
		}()
	}
	wg.Wait()

	res.Complete = true
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
	// The error that stopped the export, not the failures its
	// cancellation caused in the other streams. When the caller's context
	// was cancelled first, a stream's error that says so (or the
	// context's own).
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
	if first != nil || !res.Complete {
		res.Complete = false
		res.Duration = time.Since(start)
		if first == nil {
			first = ctx.Err()
		}
		return res, first
	}

	// Every sub-range is complete: so is the backfill.
	last := parts[len(parts)-1][1]
	err = sessions[0].Do(ctx, "complete "+parent.Name(), func(ctx context.Context, conn *pgx.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if err := checkPartsComplete(ctx, tx, cfg.Schema, parent.Alias, parts); err != nil {
				return err
			}
			return saveCursor(ctx, tx, cfg.Schema, parent, parent.From, last, res.Last.Hash)
		})
	})
	res.Duration = time.Since(start)
	if err != nil {
		res.Complete = false
		return res, err
	}
	res.Last = Cursor{Height: last, Hash: res.Last.Hash, Valid: true}
	return res, nil
}

// checkPartsComplete confirms, inside the transaction that completes the
// backfill, that every sub-range's row is complete.
func checkPartsComplete(ctx context.Context, tx pgx.Tx, schema, alias string, parts [][2]uint64) error {
	for i, p := range parts {
		var h *int64
		a := PartAlias(alias, i, len(parts))
		err := tx.QueryRow(ctx, fmt.Sprintf("SELECT last_height FROM %s.%s WHERE alias = $1", chain.QuoteIdent(schema), backfillTable), a).Scan(&h)
		if err != nil {
			return fmt.Errorf("export: read backfill %q: %w", a, err)
		}
		if h == nil || uint64(*h) < p[1] {
			return fmt.Errorf("export: backfill %q is not complete", a)
		}
	}
	return nil
}
