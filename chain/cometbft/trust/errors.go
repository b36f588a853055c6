package trust

import (
	"fmt"

	"github.com/blockhaul/blockhaul/internal/fault"
)

// MismatchError is a height whose header, commit or results disagree with
// the chain of trust: a hash that is not what the tracked state hashes to,
// a commit not signed by more than 2/3 of the power of the set that must
// sign it. Nothing of the height is staged or exported. It is data that is
// wrong (exit 4).
type MismatchError struct {
	Height int64
	// Field is what disagrees: "header.validators_hash", "commit signatures", …
	Field string
	// Got is what the record says; Want what the chain of trust says.
	Got, Want []byte
	// Note says more (which set, which rule).
	Note string
	// Endpoint is where the record came from (redacted), when known.
	Endpoint string
	// Root is the trust root the chain was proven from, when known.
	Root string
	text bool // Got and Want are text, not hashes
}

func (e *MismatchError) Error() string {
	s := fmt.Sprintf("trust: block %d: %s", e.Height, e.Field)
	if e.Got != nil || e.Want != nil {
		if e.text {
			s += fmt.Sprintf(" is %q, the chain of trust says %q", e.Got, e.Want)
		} else {
			s += fmt.Sprintf(" is %X, the chain of trust says %X", e.Got, e.Want)
		}
	}
	if e.Note != "" {
		s += " (" + e.Note + ")"
	}
	if e.Root != "" {
		s += "; proven from " + e.Root
	}
	if e.Endpoint != "" {
		s += " (answered by " + e.Endpoint + ")"
	}
	return s
}

// Fault marks the error as wrong data (exit 4).
func (e *MismatchError) Fault() fault.Class { return fault.Data }

// SetEndpoint names where the record came from (redacted).
func (e *MismatchError) SetEndpoint(ep string) { e.Endpoint = ep }

// FailedHeight is the height that failed.
func (e *MismatchError) FailedHeight() uint64 { return uint64(e.Height) }

// MissingCommitError is a last height whose commit no record or answer
// carried: it cannot be proven yet.
type MissingCommitError struct{ Height int64 }

func (e *MissingCommitError) Error() string {
	return fmt.Sprintf("trust: block %d: no commit to check it by (the next block's last_commit, or the node's /commit)", e.Height)
}

// MissingRootError is a chain of trust that has nothing to start from:
// a genesis without validators and no trusted header given (exit 2).
type MissingRootError struct{ Reason string }

func (e *MissingRootError) Error() string {
	return "trust: no trust root: " + e.Reason +
		"; give --trust-root HEIGHT:HASH (a header you trust), or --trust-root FILE (the chain's genesis.json), or --trust off"
}

// Fault marks the error as a request that cannot be carried out as given (exit 2).
func (e *MissingRootError) Fault() fault.Class { return fault.Config }
