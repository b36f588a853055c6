package export

import "github.com/blockhaul/blockhaul/chain"

// Decoder turns staged raw records into rows. One Decoder serves one chain
// family; it must be safe for concurrent use by several goroutines (export
// may decode in parallel), each with its own *chain.Rows.
type Decoder interface {
	// Family is the chain family whose raw records this decoder reads.
	Family() chain.Family
	// Tables returns the export tables in the order Decode fills them.
	Tables() []chain.Table
	// Decode appends the rows of one block to rows. On error it must leave
	// rows as it found them (see chain.Rows.Truncate). raw is only valid
	// during the call: export reuses its buffer for the next block, so no
	// row value may alias it.
	Decode(height uint64, raw []byte, rows *chain.Rows) error
}
