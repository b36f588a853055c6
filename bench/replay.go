package bench

import (
	"context"
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/loader"
	"golang.org/x/sync/errgroup"
)

// replaySource serves blocks rendered before the clock starts, so that the
// ingest figure is the loader and staging alone — what a fetch pays after
// its RPC responses have arrived — and not the synthetic generator, whose
// rate the report shows on its own.
type replaySource struct {
	loader.Source // Family, ChainID and Tip of the chain rendered
	from          uint64
	blocks        []chain.Block
}

// render produces heights [from, to] of src with workers goroutines.
func render(ctx context.Context, src loader.Source, from, to uint64, workers, span int) (*replaySource, error) {
	r := &replaySource{Source: src, from: from, blocks: make([]chain.Block, to-from+1)}
	err := fetchSpans(ctx, src, from, to, workers, span, func(lo uint64, bs []chain.Block) {
		copy(r.blocks[lo-from:], bs)
	})
	if err != nil {
		return nil, fmt.Errorf("bench: render: %w", err)
	}
	return r, nil
}

// fetchSpans fetches [from, to] from src in spans of span heights, workers
// at a time, checks that each span came whole, and hands it to keep (nil:
// the blocks are dropped).
func fetchSpans(ctx context.Context, src loader.Source, from, to uint64, workers, span int, keep func(lo uint64, blocks []chain.Block)) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for lo := from; lo <= to; lo += uint64(span) {
		hi := min(lo+uint64(span)-1, to)
		g.Go(func() error {
			bs, err := src.Fetch(gctx, lo, hi)
			if err != nil {
				return fmt.Errorf("blocks %d-%d: %w", lo, hi, err)
			}
			if len(bs) != int(hi-lo+1) {
				return fmt.Errorf("blocks %d-%d: got %d blocks", lo, hi, len(bs))
			}
			if keep != nil {
				keep(lo, bs)
			}
			return nil
		})
	}
	return g.Wait()
}

// Fetch returns the rendered blocks of [from, to]; their bytes are shared,
// which the loader allows (it never writes to a block's Raw).
func (r *replaySource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if from < r.from || to < from || to-r.from >= uint64(len(r.blocks)) {
		return nil, fmt.Errorf("bench: replay holds heights %d-%d, asked for %d-%d", r.from, r.from+uint64(len(r.blocks))-1, from, to)
	}
	return append([]chain.Block(nil), r.blocks[from-r.from:to-r.from+1]...), nil
}

// rawBytes is the size of every rendered record.
func (r *replaySource) rawBytes() (n uint64) {
	for _, b := range r.blocks {
		n += uint64(len(b.Raw))
	}
	return n
}
