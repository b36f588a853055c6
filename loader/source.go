package loader

import (
	"context"

	"github.com/blockhaul/blockhaul/chain"
)

// Source is what the loader fetches blocks from: a synthetic generator or an
// RPC client of one chain family. Implementations must be safe for
// concurrent use: the loader calls Fetch from many workers at once.
type Source interface {
	// Family is the chain family of the blocks this source produces.
	Family() chain.Family
	// ChainID identifies the chain (e.g. "cosmoshub-4", "1" for Ethereum
	// mainnet). Staging refuses blocks of a chain other than the one it holds.
	ChainID(ctx context.Context) (string, error)
	// Tip returns the highest height the source can serve now.
	Tip(ctx context.Context) (uint64, error)
	// Fetch returns the blocks of heights from..to inclusive, in height
	// order, one per height, each checked to be the block that was asked
	// for. Its errors are marked with internal/fault: a transient fault or
	// an unsound answer is tried again; a spent retry budget of the
	// source's own (fault.Attempts) puts the span back in the queue;
	// anything else ends the fetch.
	Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error)
}

// RangeChecker is a Source that can say, before anything is fetched, which
// height of a range it cannot serve (a node home that was pruned below it,
// or keeps no results). Fetch asks it for every range it is about to
// fetch, so such a range is refused before anything is staged.
type RangeChecker interface {
	// CheckRange returns an error naming the first height of from..to
	// that the source cannot serve, or nil.
	CheckRange(ctx context.Context, from, to uint64) error
}

// SourceAs returns the first source in src's chain of wrappers (a wrapper
// has Unwrap() Source) that is a T: how a caller finds what a wrapped
// source can do besides Source (CommitSource, a genesis).
func SourceAs[T any](src Source) (T, bool) {
	for src != nil {
		if t, ok := src.(T); ok {
			return t, true
		}
		w, ok := src.(interface{ Unwrap() Source })
		if !ok {
			break
		}
		src = w.Unwrap()
	}
	var zero T
	return zero, false
}
