package cometbft

import (
	"context"

	"github.com/blockhaul/blockhaul/chain"
)

// The loader's Source and the exporter's Decoder, as loader/source.go and
// export/decoder.go declare them. This package may not import those, so the
// method sets are repeated here for the compiler to check.
type (
	loaderSource interface {
		Family() chain.Family
		ChainID(ctx context.Context) (string, error)
		Tip(ctx context.Context) (uint64, error)
		Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error)
	}
	exportDecoder interface {
		Family() chain.Family
		Tables() []chain.Table
		Decode(height uint64, raw []byte, rows *chain.Rows) error
	}
)

var (
	_ loaderSource  = (*RPCSource)(nil)
	_ exportDecoder = (*Decoder)(nil)
)
