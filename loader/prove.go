package loader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
)

// Prover is a chain of trust (chain/cometbft/trust) that every record is
// proven with, in height order, before it is staged: the fetch's writer
// holds spans that arrive out of order until the heights below them are
// proven, and stages what Prove accepted with the chain's checkpoint in the
// same batch.
type Prover interface {
	// Next is the height the chain of trust takes next.
	Next() uint64
	// Prove checks records of heights Next().. and the commit of the last
	// of them, which successor carries (the next height's raw record, or
	// what CommitSource.Commit returned). All or nothing.
	Prove(records [][]byte, successor []byte) error
	// Checkpoint encodes the state after the last proven height.
	Checkpoint() ([]byte, error)
}

// CommitSource is a Source that can serve the commit of a height on its
// own (a CometBFT node's /commit): the proof of the last height of a range
// at the source's tip, whose successor it does not have yet.
type CommitSource interface {
	Commit(ctx context.Context, h uint64) ([]byte, error)
}

// ProveError is a record the chain of trust refused, with where it came
// from.
type ProveError struct {
	Height uint64
	Err    error
}

func (e *ProveError) Error() string { return e.Err.Error() }
func (e *ProveError) Unwrap() error { return e.Err }

// FailedHeight is the height that failed.
func (e *ProveError) FailedHeight() uint64 { return e.Height }

// Fault marks a refusal as data that is wrong (exit 4): a record the chain
// of trust cannot read is no better than one it disproves.
func (e *ProveError) Fault() fault.Class { return fault.Data }

// aheadGate keeps the fetch at most window heights above the lowest height
// not yet proven, so that the spans held for order stay bounded.
type aheadGate struct {
	mu      sync.Mutex
	next    uint64
	window  uint64
	changed chan struct{}
}

func (g *aheadGate) advance(next uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if next > g.next {
		g.next = next
		close(g.changed)
		g.changed = make(chan struct{})
	}
}

func (g *aheadGate) wait(ctx context.Context, from uint64) error {
	for {
		g.mu.Lock()
		ok, ch := from <= g.next+g.window, g.changed
		g.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// proveChunk bounds the heights staged before that one take reads back.
const proveChunk = 1024

// proveItem is one height of the run being proven: a fetched block
// (enc set) or one staged before (enc nil).
type proveItem struct {
	height uint64
	raw    []byte
	enc    *staging.Encoded
}

// writeProven is write with a chain of trust: spans are taken in height
// order (heights of the range staged before are read back from the store),
// proven, and staged with the chain's checkpoint. The last height taken is
// held until the next arrives (its last_commit proves it); the range's last
// is proven by its successor, asked of the source.
func writeProven(ctx context.Context, src Source, store *staging.Store, fetched <-chan fetchedSpan, cfg *Config,
	progress *Progress, st *Stats, to uint64, missing []staging.Range, gate *aheadGate) error {
	p := cfg.Prover
	batch := store.NewBatch()
	defer batch.Close()
	pending := map[uint64]fetchedSpan{}
	var run []proveItem
	next := p.Next()
	isMissing := func(h uint64) bool {
		for _, r := range missing {
			if r.From <= h && h <= r.To {
				return true
			}
		}
		return false
	}
	// take moves what is contiguous from next into run, at most a chunk
	// of heights staged before at a time.
	take := func() error {
		for staged := 0; next <= to && staged < proveChunk; {
			if fs, ok := pending[next]; ok {
				delete(pending, next)
				for i := range fs.blocks {
					run = append(run, proveItem{height: fs.blocks[i].Height, raw: fs.raws[i], enc: &fs.blocks[i]})
				}
				next = fs.span.To + 1
				continue
			}
			if isMissing(next) {
				return nil
			}
			b, err := store.Get(next) // staged before: proven now
			if err != nil {
				return fmt.Errorf("loader: prove staged block %d: %w", next, err)
			}
			run = append(run, proveItem{height: next, raw: b.Raw})
			next++
			staged++
		}
		return nil
	}
	// prove proves run[:n] with successor and stages it.
	prove := func(n int, successor []byte) error {
		raws := make([][]byte, n)
		for i := range n {
			raws[i] = run[i].raw
		}
		if err := p.Prove(raws, successor); err != nil {
			h := run[0].height
			var fh interface{ FailedHeight() uint64 }
			if errors.As(err, &fh) {
				h = fh.FailedHeight()
			}
			// Name where the records came from, when the source says.
			var ep interface{ SetEndpoint(string) }
			if v, ok := SourceAs[interface{ Via() string }](src); ok && errors.As(err, &ep) {
				ep.SetEndpoint(v.Via())
			}
			return &ProveError{Height: h, Err: err}
		}
		t0 := time.Now()
		var done []staging.Range
		for _, it := range run[:n] {
			if it.enc == nil {
				continue
			}
			if err := batch.PutEncoded(*it.enc); err != nil {
				return err
			}
			if k := len(done); k > 0 && done[k-1].To+1 == it.height {
				done[k-1].To = it.height
			} else {
				done = append(done, staging.Range{From: it.height, To: it.height})
			}
		}
		cp, err := p.Checkpoint()
		if err != nil {
			return err
		}
		if err := batch.PutTrust(cp); err != nil {
			return err
		}
		nb, raw, size := batch.Len(), batch.RawBytes(), batch.RecordBytes()
		if err := crashpoint.Hit(ctx, crashpoint.StageCommit); err != nil {
			return err
		}
		if err := batch.Commit(); err != nil {
			return err
		}
		st.Blocks += uint64(nb)
		st.RawBytes += raw
		st.StoredBytes += size
		progress.committed(done)
		if cfg.OnCommit != nil && nb > 0 {
			cfg.OnCommit(CommitStats{Blocks: nb, RawBytes: raw, StoredBytes: size, Duration: time.Since(t0)})
		}
		run = append(run[:0], run[n:]...)
		gate.advance(p.Next())
		return nil
	}
	runBytes := func() int {
		n := 0
		for _, it := range run {
			if it.enc != nil {
				n += len(it.enc.Value)
			}
		}
		return n
	}
	if err := take(); err != nil {
		return err
	}
	for fs := range fetched {
		if fs.span.From < next {
			// Heights below the proven end, fetched again (pruned or
			// repaired): the chain of trust passed them already, and the
			// export's continuity check links them to their proven
			// neighbours. Staged as they are; the rest of the span waits.
			k := int(min(next, fs.span.To+1) - fs.span.From)
			var done []staging.Range
			for i := range k {
				if err := batch.PutEncoded(fs.blocks[i]); err != nil {
					return err
				}
			}
			if err := batch.Commit(); err != nil {
				return err
			}
			st.Blocks += uint64(k)
			done = append(done, staging.Range{From: fs.span.From, To: fs.span.From + uint64(k) - 1})
			progress.committed(done)
			if k == len(fs.blocks) {
				continue
			}
			fs.blocks, fs.raws = fs.blocks[k:], fs.raws[k:]
			fs.span.From += uint64(k)
		}
		pending[fs.span.From] = fs
		if err := take(); err != nil {
			return err
		}
		// As write commits: when the run is a batch's worth or nothing else
		// is waiting. The last height waits for its successor.
		if len(run) > 1 && (runBytes() >= cfg.BatchBytes || len(fetched) == 0) {
			if err := prove(len(run)-1, run[len(run)-1].raw); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for {
		if err := take(); err != nil {
			return err
		}
		if len(run) == 0 || next > to {
			break
		}
		if len(run) > 1 {
			if err := prove(len(run)-1, run[len(run)-1].raw); err != nil {
				return err
			}
		} else if !isMissing(next) && next <= to {
			continue
		} else {
			break
		}
	}
	if len(run) == 0 {
		return nil
	}
	if last := run[len(run)-1].height; last != to {
		return fmt.Errorf("loader: prove: heights %d..%d were not fetched", last+1, to)
	}
	successor, err := successorOf(ctx, src, to)
	if err != nil {
		return err
	}
	return prove(len(run), successor)
}

// successorOf returns what proves height h: the source's commit of h, or
// the raw record of h+1.
func successorOf(ctx context.Context, src Source, h uint64) ([]byte, error) {
	if cs, ok := SourceAs[CommitSource](src); ok {
		b, err := cs.Commit(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("loader: the commit of block %d, which proves it: %w", h, err)
		}
		return b, nil
	}
	bs, err := src.Fetch(ctx, h+1, h+1)
	if err != nil {
		return nil, fault.Mark(fmt.Errorf("loader: block %d, whose last_commit proves block %d: %w", h+1, h, err), fault.Of(err))
	}
	if len(bs) != 1 || bs[0].Height != h+1 {
		return nil, &InvalidBlockError{Height: h + 1, Reason: "the source did not return it"}
	}
	return bs[0].Raw, nil
}

// checkProvable refuses a fetch whose chain of trust cannot reach its
// range: heights between the proven end and the range that are not staged.
func checkProvable(p Prover, store *staging.Store, from uint64) error {
	next := p.Next()
	if next >= from {
		return nil
	}
	gaps, err := store.Missing(next, from-1)
	if err != nil {
		return err
	}
	if len(gaps) > 0 {
		return fault.Mark(fmt.Errorf("loader: the chain of trust is proven up to block %d and heights %s below the range are not staged: "+
			"fetch from %d, or give a trust root at the range's start (--trust-root HEIGHT:HASH), or --trust off", next-1, gaps[0], next), fault.Config)
	}
	return nil
}
