package export

import (
	"errors"
	"fmt"

	"github.com/blockhaul/blockhaul/internal/fault"
)

// GapError reports a height missing from staging inside the range to export.
type GapError struct{ Height uint64 }

func (e *GapError) Error() string {
	return fmt.Sprintf("export: height %d is not staged (run fetch for the range first)", e.Height)
}

// ContinuityError reports a block whose parent hash is not the hash of the
// block before it: staging holds blocks of two forks, or the checkpoint was
// written from another chain.
type ContinuityError struct {
	Height     uint64
	ParentHash []byte // what block Height names as its parent
	PrevHash   []byte // the hash of block Height-1 as staged or checkpointed
	Source     string // where PrevHash came from
	// Wrong is the block whose stored hash does not match its own header,
	// when recomputing the hashes of the two blocks says so (the decoder
	// can verify blocks); 0 otherwise. Such a block is removed from
	// staging (Removed), so that the next fetch stages it again.
	Wrong    uint64
	Computed []byte // the hash block Wrong's header gives
	Removed  bool
	// Unlinked lists the staged blocks removed when both blocks of the
	// break hash correctly from their headers: one of them is of another
	// fork, or was forged whole by an endpoint, and nothing in the two
	// records says which. Every staged one of them is removed so that a
	// fetch (which checks parent links inside a span and across its edges)
	// stages the chain's blocks again; a committed block is never touched.
	Unlinked []uint64
}

func (e *ContinuityError) Error() string {
	s := fmt.Sprintf("export: continuity break at height %d: its parent hash %X is not the hash %X of block %d (%s)",
		e.Height, e.ParentHash, e.PrevHash, e.Height-1, e.Source)
	if e.Wrong != 0 {
		s += fmt.Sprintf(": block %d's stored hash does not match its header (which hashes to %X)", e.Wrong, e.Computed)
		if e.Removed {
			s += "; it was removed from staging: fetch the range again to repair it"
		}
	}
	switch {
	case e.Wrong == 0 && len(e.Unlinked) == 2:
		s += fmt.Sprintf(": blocks %d and %d each hash correctly but do not link (an endpoint served another fork or forged a block); both were removed from staging: fetch the range again to repair it",
			e.Unlinked[0], e.Unlinked[1])
	case e.Wrong == 0 && len(e.Unlinked) == 1:
		s += fmt.Sprintf(": block %d hashes correctly but does not link to %s; it was removed from staging: fetch the range again, and if the same block comes back the database holds another fork (blockhaul verify --pg)",
			e.Unlinked[0], e.Source)
	}
	return s
}

// Fault marks the error as data that is wrong (exit 4).
func (e *ContinuityError) Fault() fault.Class { return fault.Data }

// DecodeError reports a staged record the decoder cannot turn into rows.
type DecodeError struct {
	Height uint64
	Err    error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("export: decode block %d: %v", e.Height, e.Err)
}
func (e *DecodeError) Unwrap() error { return e.Err }

// Fault marks the error as data that is wrong (exit 4): a record that does
// not decode; unless the decoder marked it otherwise (a decoder option
// the record shows to be wrong is a configuration error).
func (e *DecodeError) Fault() fault.Class {
	var m fault.Marker
	if errors.As(e.Err, &m) {
		return m.Fault()
	}
	return fault.Data
}

// AliasRangeError reports a backfill alias reused with another range.
type AliasRangeError struct {
	Alias              string
	HaveFrom, HaveTo   uint64
	GivenFrom, GivenTo uint64
}

func (e *AliasRangeError) Error() string {
	return fmt.Sprintf("export: alias %q already names range %d-%d, not %d-%d (choose another --alias)",
		e.Alias, e.HaveFrom, e.HaveTo, e.GivenFrom, e.GivenTo)
}

// Fault marks the error as a configuration error (exit 2).
func (e *AliasRangeError) Fault() fault.Class { return fault.Config }
