package cometbftsynth

import (
	"context"

	"github.com/blockhaul/blockhaul/chain"
)

// The loader's Source, as loader/source.go declares it. This package may
// not import the loader, so the method set is repeated here for the
// compiler to check.
type loaderSource interface {
	Family() chain.Family
	ChainID(ctx context.Context) (string, error)
	Tip(ctx context.Context) (uint64, error)
	Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error)
}

var _ loaderSource = (*Synthetic)(nil)
