package staging

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// MergeFrom copies the staged blocks of src within [from, to] into s, so
// that disjoint ranges fetched by separate processes become one store. The
// records are copied as they are — verified, not recompressed. src must hold
// the same chain (*WrongChainError otherwise); a block staged in both with
// different hashes is a *ConflictError and nothing of its batch is written.
// It returns the number of blocks added.
func (s *Store) MergeFrom(src *Store, from, to uint64) (added int, err error) {
	sid, ok := src.Identity()
	if !ok {
		return 0, nil // an empty store
	}
	if err := s.Bind(sid.Family, sid.ChainID); err != nil {
		return 0, err
	}
	if err := src.faults.broken(); err != nil {
		return 0, err
	}
	defer src.contain(fmt.Sprintf("merge read %d-%d", from, to), false, &err)
	lo, hi := boundsFor(prefixBlock, from, to)
	it, err := src.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, fmt.Errorf("staging: merge from %s: %w", src.dir, src.corruptErr(err, nil))
	}
	defer it.Close()
	b := s.NewBatch()
	defer b.Close()
	for valid := it.First(); valid; valid = it.Next() {
		h := keyHeight(it.Key())
		v, err := it.ValueAndErr()
		if err != nil {
			return added, fmt.Errorf("staging: merge: read %d from %s: %w", h, src.dir, src.corruptErr(err, &h))
		}
		hdr, _, err := parseValue(h, v)
		if err != nil {
			return added, err
		}
		if hdr.Family != sid.Family {
			return added, &CorruptRecordError{Height: h, Reason: fmt.Sprintf("record of family %s in a %s store", hdr.Family, sid.Family)}
		}
		n := b.Len()
		if err := b.PutEncoded(Encoded{Height: h, Hash: bytes.Clone(hdr.Hash), ParentHash: bytes.Clone(hdr.ParentHash),
			Value: bytes.Clone(v), RawLen: int(hdr.RawLen)}); err != nil {
			return added, err
		}
		added += b.Len() - n
		if b.Size() >= 8<<20 {
			if err := b.Commit(); err != nil {
				return added, err
			}
		}
	}
	if err := it.Error(); err != nil {
		return added, fmt.Errorf("staging: merge from %s: %w", src.dir, src.corruptErr(err, nil))
	}
	return added, b.Commit()
}
