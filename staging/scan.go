package staging

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/cockroachdb/pebble/v2"
)

// Range is an inclusive range of heights.
type Range struct{ From, To uint64 }

// Len is the number of heights in r.
func (r Range) Len() uint64 { return r.To - r.From + 1 }

func (r Range) String() string {
	if r.From == r.To {
		return fmt.Sprint(r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// Staged returns the maximal runs of staged heights within [from, to], in
// order. It scans only the index keyspace (a few dozen bytes a height); a
// read-only store answers from the runs Open walked, without a scan.
func (s *Store) Staged(from, to uint64) ([]Range, error) {
	if s.held != nil {
		if err := s.faults.broken(); err != nil {
			return nil, err
		}
		return clipRuns(s.held, from, to), nil
	}
	runs := &runSet{}
	err := s.scanIndex(from, to, runs.add)
	return runs.runs, err
}

// Missing returns the runs of heights in [from, to] that are not staged.
func (s *Store) Missing(from, to uint64) ([]Range, error) {
	if to < from {
		return nil, nil
	}
	staged, err := s.Staged(from, to)
	if err != nil {
		return nil, err
	}
	return gaps(staged, from, to), nil
}

// maxHeldRuns bounds the runs a read-only store keeps from Open's walk
// (16 bytes each): a store staged in more pieces than this scans. A
// variable for tests.
var maxHeldRuns = 1 << 16

// runSet gathers heights, added in increasing order, into maximal runs.
// With max set, it gives up (over) rather than hold more than max runs.
type runSet struct {
	runs []Range
	max  int
	over bool
}

func (r *runSet) add(h uint64) {
	if r == nil || r.over {
		return
	}
	if n := len(r.runs); n > 0 && r.runs[n-1].To+1 == h {
		r.runs[n-1].To = h
		return
	}
	if r.max > 0 && len(r.runs) == r.max {
		r.runs, r.over = nil, true
		return
	}
	r.runs = append(r.runs, Range{h, h})
}

// clipRuns returns the parts of runs (ordered, disjoint) within [from, to]:
// none when to < from, as a walk of it finds none.
func clipRuns(runs []Range, from, to uint64) []Range {
	if to < from {
		return nil
	}
	i, _ := slices.BinarySearchFunc(runs, from, func(r Range, h uint64) int { return cmp.Compare(r.To, h) })
	var out []Range
	for ; i < len(runs) && runs[i].From <= to; i++ {
		out = append(out, Range{max(runs[i].From, from), min(runs[i].To, to)})
	}
	return out
}

// gaps returns the runs of [from, to] that staged (ordered, disjoint,
// within it) leaves out.
func gaps(staged []Range, from, to uint64) []Range {
	var out []Range
	next := from
	for _, r := range staged {
		if r.From > next {
			out = append(out, Range{next, r.From - 1})
		}
		if r.To >= to {
			return out
		}
		next = r.To + 1
	}
	return append(out, Range{next, to})
}

// ContiguousFrom returns the highest height h such that every height of
// [from, h] is staged, or ok=false when from itself is not staged.
func (s *Store) ContiguousFrom(from, to uint64) (h uint64, ok bool, err error) {
	next := from
	err = s.scanIndexUntil(from, to, func(k uint64) bool {
		if k != next {
			return false
		}
		next++
		return true
	})
	if next == from {
		return 0, false, err
	}
	return next - 1, true, err
}

func (s *Store) scanIndex(from, to uint64, fn func(h uint64)) error {
	return s.scanIndexUntil(from, to, func(h uint64) bool { fn(h); return true })
}

func (s *Store) scanIndexUntil(from, to uint64, fn func(h uint64) bool) (err error) {
	if err := s.faults.broken(); err != nil {
		return err
	}
	s.indexWalks.Add(1)
	op := fmt.Sprintf("scan %d-%d", from, to)
	defer s.contain(op, false, &err)
	lo, hi := boundsFor(prefixIndex, from, to)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("staging: %s: %w", op, s.corruptErr(err, nil))
	}
	for valid := it.First(); valid; valid = it.Next() {
		if !fn(keyHeight(it.Key())) {
			break
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return fmt.Errorf("staging: %s: %w", op, s.corruptErr(err, nil))
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("staging: %s: %w", op, s.corruptErr(err, nil))
	}
	return nil
}

// Bounds returns the lowest and highest staged heights; ok is false for an
// empty store.
func (s *Store) Bounds() (lo, hi uint64, ok bool, err error) {
	if err := s.faults.broken(); err != nil {
		return 0, 0, false, err
	}
	defer s.contain("bounds", false, &err)
	wrap := func(err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("staging: bounds: %w", s.corruptErr(err, nil))
	}
	l, h := boundsFor(prefixIndex, 0, ^uint64(0))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: l, UpperBound: h})
	if err != nil {
		return 0, 0, false, wrap(err)
	}
	defer it.Close()
	if !it.First() {
		return 0, 0, false, wrap(it.Error())
	}
	lo = keyHeight(it.Key())
	if !it.Last() {
		return 0, 0, false, wrap(it.Error())
	}
	return lo, keyHeight(it.Key()), true, wrap(it.Error())
}

// Iterator reads staged blocks in height order. It is not safe for
// concurrent use and must be closed before the store.
type Iterator struct {
	s     *Store
	it    *pebble.Iterator
	first bool
	reuse bool
	buf   []byte
	block chain.Block
	hdr   Header
	err   error
}

// Scan returns an iterator over the staged blocks of [from, to]. Heights
// that are not staged are simply absent: callers check contiguity.
func (s *Store) Scan(from, to uint64) (_ *Iterator, err error) {
	if err := s.faults.broken(); err != nil {
		return nil, err
	}
	defer s.contain(fmt.Sprintf("scan %d-%d", from, to), false, &err)
	lo, hi := boundsFor(prefixBlock, from, to)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("staging: scan %d-%d: %w", from, to, s.corruptErr(err, nil))
	}
	return &Iterator{s: s, it: it, first: true}, nil
}

// Next advances to the next staged block, verifying and decompressing it.
// It returns false at the end or on error (see Err).
func (i *Iterator) Next() bool {
	if i.err != nil {
		return false
	}
	if err := i.s.faults.broken(); err != nil {
		i.err = err
		return false
	}
	ok, h, read := i.next()
	if i.err != nil && read && unreadable(i.err) {
		// Drop it, so that fetch stages it again.
		i.err = i.s.dropUnreadable(h, i.err)
	}
	return ok
}

// next is Next's Pebble part; reading is the height whose record was being
// read (read is false if it did not get that far).
func (i *Iterator) next() (_ bool, reading uint64, read bool) {
	defer i.s.contain("scan", false, &i.err)
	var valid bool
	if i.first {
		valid, i.first = i.it.First(), false
	} else {
		valid = i.it.Next()
	}
	if !valid {
		if err := i.it.Error(); err != nil {
			i.err = fmt.Errorf("staging: scan: %w", i.s.corruptErr(err, nil))
		}
		return false, 0, false
	}
	h := keyHeight(i.it.Key())
	reading, read = h, true
	v, err := i.it.ValueAndErr()
	if err != nil {
		i.err = fmt.Errorf("staging: read %d: %w", h, i.s.corruptErr(err, &h))
		return false, h, true
	}
	// Each block gets its own Raw buffer unless the caller promised not to
	// keep it past the next move (ReuseBuffer).
	var dst []byte
	if i.reuse {
		dst = i.buf
	}
	i.block, i.hdr, i.err = i.s.decodeValue(h, v, dst)
	if i.reuse && i.err == nil {
		i.buf = i.block.Raw[:0]
	}
	return i.err == nil, h, true
}

// ReuseBuffer makes every block's Raw share one buffer, valid only until the
// next call to Next: no allocation or zeroing per block. For callers that
// decode each block before moving on and keep no slice of it.
func (i *Iterator) ReuseBuffer() { i.reuse = true }

// Block returns the current block. Its Raw is the caller's to keep, unless
// ReuseBuffer was called.
func (i *Iterator) Block() chain.Block { return i.block }

// Family is the chain family recorded in the current block's header.
func (i *Iterator) Family() chain.Family { return i.hdr.Family }

// Err returns the error that stopped iteration, if any; a corrupt record is
// a *CorruptRecordError naming its height.
func (i *Iterator) Err() error { return i.err }

// Close releases the iterator.
func (i *Iterator) Close() (err error) {
	defer i.s.contain("close iterator", false, &err)
	if err := i.it.Close(); err != nil {
		return fmt.Errorf("staging: scan: %w", i.s.corruptErr(err, nil))
	}
	return nil
}

// FirstBreak returns the first height h in (from, to] whose staged parent
// hash is not the staged hash of h-1, scanning the index only. ok is false
// when every staged pair in the range links up (gaps are not breaks).
func (s *Store) FirstBreak(from, to uint64) (h uint64, ok bool, err error) {
	if err := s.faults.broken(); err != nil {
		return 0, false, err
	}
	defer s.contain(fmt.Sprintf("continuity scan %d-%d", from, to), false, &err)
	lo, hi := boundsFor(prefixIndex, from, to)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, false, fmt.Errorf("staging: continuity scan %d-%d: %w", from, to, s.corruptErr(err, nil))
	}
	defer it.Close()
	var prevH uint64
	var prevHash []byte
	for valid := it.First(); valid; valid = it.Next() {
		k := keyHeight(it.Key())
		hash, parent, good := parseIndexValue(it.Value())
		if !good {
			return k, true, &CorruptRecordError{Height: k, Reason: "index entry malformed"}
		}
		if prevHash != nil && k == prevH+1 && string(parent) != string(prevHash) {
			return k, true, nil
		}
		prevH, prevHash = k, append(prevHash[:0], hash...)
	}
	if err := it.Error(); err != nil {
		return 0, false, fmt.Errorf("staging: continuity scan %d-%d: %w", from, to, s.corruptErr(err, nil))
	}
	return 0, false, nil
}
