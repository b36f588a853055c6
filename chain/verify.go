package chain

import "fmt"

// HashMismatchError is a block whose recorded hash is not the hash its own
// content gives: the block hash a node sent beside a header that hashes to
// something else, or a header's commitment (a CometBFT data_hash, an EVM
// transactions root) that its contents do not reproduce. Such a block is
// never staged.
//
// It is retryable: a lying node or a mangling proxy may be behind one
// endpoint and not another. A source that knows which endpoint answered
// sets Endpoint (redacted).
type HashMismatchError struct {
	Family   Family
	Height   uint64
	What     string // the value that does not match: "block hash", "data_hash", …
	Claimed  []byte // as recorded
	Computed []byte // recomputed from the content
	Endpoint string // redacted; "" when not known
}

func (e *HashMismatchError) Error() string {
	s := fmt.Sprintf("%s: block %d: %s %X does not match its content (recomputed %X)", e.Family, e.Height, e.What, e.Claimed, e.Computed)
	if e.Endpoint != "" {
		s += " (answered by " + e.Endpoint + ")"
	}
	return s
}

// Retryable reports true: another endpoint may send the true block.
func (e *HashMismatchError) Retryable() bool { return true }
