package chain

import (
	"fmt"
	"strings"

	"github.com/blockhaul/blockhaul/internal/fault"
)

// HashMismatchError is a block whose recorded hash is not the hash its own
// content gives: the block hash a node sent beside a header that hashes to
// something else, or a header's commitment (a CometBFT data_hash, an EVM
// transactions root) that its contents do not reproduce. Such a block is
// never staged.
//
// It is unsound (fault.Unsound), so retried: a lying node or a mangling
// proxy may be behind one endpoint and not another. A source that knows which endpoint answered
// sets Endpoint (redacted).
type HashMismatchError struct {
	Family   Family
	Height   uint64
	What     string // the value that does not match: "block hash", "data_hash", …
	Claimed  []byte // as recorded
	Computed []byte // recomputed from the content
	Endpoint string // redacted; "" when not known
	// Unknown names the header's fields the family's hasher does not know
	// (a fork newer than it, or a draft one a node served): the likely
	// reason the block hash does not match.
	Unknown []string
}

func (e *HashMismatchError) Error() string {
	s := fmt.Sprintf("%s: block %d: %s %X does not match its content (recomputed %X)", e.Family, e.Height, e.What, e.Claimed, e.Computed)
	if len(e.Unknown) > 0 {
		s += "; the header has fields the hasher does not know, which the node's hash may cover (a fork newer than this blockhaul, or a draft one): " +
			strings.Join(e.Unknown, ", ")
	}
	if e.Endpoint != "" {
		s += " (answered by " + e.Endpoint + ")"
	}
	return s
}

// Fault marks the error as an unsound answer: retried (another attempt or
// node may answer soundly); a data error (exit 4) once the retries are
// spent.
func (e *HashMismatchError) Fault() fault.Class { return fault.Unsound }

// FailedHeight is the block's height (a fetch charges the failure to it).
func (e *HashMismatchError) FailedHeight() uint64 { return e.Height }

// Verification is how much of a block is recomputed before it is staged.
type Verification int

const (
	// VerifyFull recomputes the block hash from the header and what the
	// header commits to from the record's contents: CometBFT's data_hash,
	// EVM's transaction hashes and transactions, withdrawals and receipts
	// roots. The default.
	VerifyFull Verification = iota
	// VerifyHeader recomputes the block hash from the header alone: for a
	// chain whose blocks carry transactions the family's encoding does not
	// cover (Polygon's state-sync transactions, say). For CometBFT it is
	// VerifyFull (data_hash is checked with the header).
	VerifyHeader
	// VerifyLinks recomputes nothing; only the parent links between
	// blocks, and the height each answer names, are checked: for a chain
	// whose block hash is not the family's computation (an EVM chain run on
	// a CometBFT engine, which answers with the CometBFT header's hash).
	VerifyLinks
)

// ParseVerification reads a --verify-blocks value: full, header or links.
func ParseVerification(s string) (Verification, error) {
	switch s {
	case "", "full":
		return VerifyFull, nil
	case "header":
		return VerifyHeader, nil
	case "links":
		return VerifyLinks, nil
	}
	return 0, fmt.Errorf("unknown block verification %q (want full, header or links)", s)
}

func (v Verification) String() string {
	switch v {
	case VerifyHeader:
		return "header"
	case VerifyLinks:
		return "links"
	}
	return "full"
}

// Set parses s (pflag.Value).
func (v *Verification) Set(s string) error {
	p, err := ParseVerification(s)
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// Type names the flag's value (pflag.Value).
func (*Verification) Type() string { return "verification" }
