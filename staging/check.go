package staging

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// RecordState is what CheckRecords found at one height. Its slices (the
// header's hashes, Raw) are only valid during the callback.
type RecordState struct {
	Height    uint64
	HasRecord bool   // a record is stored under the height
	HasIndex  bool   // an index entry is stored under the height
	Header    Header // the record's header, when HasRecord and Err is nil
	// Raw is the decompressed record, when CheckRecords was asked to
	// decompress and Err is nil.
	Raw []byte
	// Err is what is wrong at this height: a *CorruptRecordError (bad
	// header or checksum, an index entry that disagrees with its record, a
	// record without an index entry or the reverse), or the error Pebble
	// gave reading the value (a damaged file).
	Err error
}

// CheckRecords walks the heights of [from, to] in order over both the
// record and the index keyspaces and calls fn once for every height present
// in either. Each record's header and CRC-32C are verified; with decompress
// the record is also decompressed into RecordState.Raw (one buffer, reused).
// A bad record does not stop the walk; an error from fn does, and so does
// an iterator that cannot go on (a damaged file), whose error is returned
// naming the last height read.
func (s *Store) CheckRecords(from, to uint64, decompress bool, fn func(RecordState) error) (err error) {
	if err := s.faults.broken(); err != nil {
		return err
	}
	defer s.contain(fmt.Sprintf("check %d-%d", from, to), false, &err)
	lo, hi := boundsFor(prefixBlock, from, to)
	bit, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("staging: check %d-%d: %w", from, to, s.corruptErr(err, nil))
	}
	defer func() { bit.Close() }()
	lo, hi = boundsFor(prefixIndex, from, to)
	iit, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("staging: check %d-%d: %w", from, to, s.corruptErr(err, nil))
	}
	defer iit.Close()

	var buf []byte
	bok, iok := bit.First(), iit.First()
	var last uint64
	for bok || iok {
		var st RecordState
		switch {
		case bok && iok:
			bh, ih := keyHeight(bit.Key()), keyHeight(iit.Key())
			st.Height = min(bh, ih)
			st.HasRecord, st.HasIndex = bh == st.Height, ih == st.Height
		case bok:
			st.Height, st.HasRecord = keyHeight(bit.Key()), true
		default:
			st.Height, st.HasIndex = keyHeight(iit.Key()), true
		}
		last = st.Height
		recordReadFailed := false
		if st.HasRecord {
			v, verr := bit.ValueAndErr()
			if verr != nil {
				st.Err = fmt.Errorf("staging: read %d: %w", st.Height, s.corruptErr(verr, &st.Height))
				recordReadFailed = true
			} else if hdr, _, perr := parseValue(st.Height, v); perr != nil {
				st.Err = perr
			} else {
				st.Header = hdr
				if decompress {
					b, _, derr := s.decodeValue(st.Height, v, buf)
					if derr != nil {
						st.Err = derr
					} else {
						st.Raw, buf = b.Raw, b.Raw[:0]
					}
				}
			}
		}
		if st.Err == nil {
			st.Err = indexAgrees(st, iit)
		}
		if err := fn(st); err != nil {
			return err
		}
		switch {
		case recordReadFailed && st.Height < to:
			// A value Pebble could not read (a damaged blob block)
			// leaves the iterator in error: go on past it with a new
			// one, so that one bad block reports its own heights only.
			bit.Close()
			lo, hi := boundsFor(prefixBlock, st.Height+1, to)
			if bit, err = s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi}); err != nil {
				bit, _ = s.db.NewIter(&pebble.IterOptions{LowerBound: hi, UpperBound: hi})
				return fmt.Errorf("staging: check %d-%d: %w", st.Height+1, to, s.corruptErr(err, nil))
			}
			bok = bit.First()
		case recordReadFailed:
			bok = false
		case st.HasRecord:
			bok = bit.Next()
		}
		if st.HasIndex {
			iok = iit.Next()
		}
	}
	for _, it := range []*pebble.Iterator{bit, iit} {
		if err := it.Error(); err != nil {
			return fmt.Errorf("staging: check %d-%d stopped after height %d: %w", from, to, last, s.corruptErr(err, nil))
		}
	}
	return nil
}

// indexAgrees checks that the index entry of st's height, if the record is
// sound, names the record's own hashes, and that neither is present alone.
func indexAgrees(st RecordState, iit *pebble.Iterator) error {
	switch {
	case st.HasRecord && !st.HasIndex:
		return &CorruptRecordError{Height: st.Height, Reason: "record without an index entry"}
	case !st.HasRecord && st.HasIndex:
		return &CorruptRecordError{Height: st.Height, Reason: "index entry without a record"}
	}
	hash, parent, ok := parseIndexValue(iit.Value())
	if !ok {
		return &CorruptRecordError{Height: st.Height, Reason: "index entry malformed"}
	}
	if !bytes.Equal(hash, st.Header.Hash) || !bytes.Equal(parent, st.Header.ParentHash) {
		return &CorruptRecordError{Height: st.Height, Reason: fmt.Sprintf("index entry names hash %X, the record %X", hash, st.Header.Hash)}
	}
	return nil
}

// FilesOf names the files that hold the records of heights [from, to]: the
// sstables whose key ranges cover them and the blob files those reference
// (where the records' bytes are), so that a report can say which file a
// corrupt height lives in.
func (s *Store) FilesOf(from, to uint64) (_ []string, err error) {
	if err := s.faults.broken(); err != nil {
		return nil, err
	}
	defer s.contain("files", false, &err)
	lo, hi := boundsFor(prefixBlock, from, to)
	levels, err := s.db.SSTables(pebble.WithKeyRangeFilter(lo, hi))
	if err != nil {
		return nil, fmt.Errorf("staging: files of %d-%d: %w", from, to, err)
	}
	var out []string
	seen := map[string]bool{}
	add := func(f string) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, l := range levels {
		for _, t := range l {
			add(fmt.Sprintf("%s.sst", t.BackingSSTNum))
			for _, b := range t.GetBlobReferenceFiles() {
				add(fmt.Sprintf("blob file %s", b))
			}
		}
	}
	return out, nil
}
