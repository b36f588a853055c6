package staging

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Records are individually replaceable: a record that cannot be read (its
// checksum fails, Pebble's block checksum fails, its blob file is truncated)
// is removed when a read meets it, so that the missing-heights query that
// fetch plans from reports it and a fetch stages it again. Nothing reads a
// corrupt record twice, and a refetch is never refused as "already staged".

// maxProbe bounds how far past an unreadable record the run of unreadable
// records is looked for (a truncated blob file loses a run of heights).
const maxProbe = 1 << 16

// unreadable reports whether err says the record read could not be used.
func unreadable(err error) bool {
	var cr *CorruptRecordError
	var cs *CorruptStoreError
	var br *BrokenStoreError
	return !errors.As(err, &br) && (errors.As(err, &cr) || errors.As(err, &cs))
}

type readState int

const (
	readOK readState = iota
	readMissing
	readBad
)

// probe reads the record at h and verifies its checksum.
func (s *Store) probe(h uint64) (st readState) {
	var err error
	defer func() {
		if recover() != nil {
			st = readBad
		}
	}()
	v, closer, err := s.db.Get(heightKey(prefixBlock, h))
	if errors.Is(err, pebble.ErrNotFound) {
		return readMissing
	}
	if err != nil {
		return readBad
	}
	defer closer.Close()
	if _, _, err := parseValue(h, v); err != nil {
		return readBad
	}
	return readOK
}

// badRun returns the run of unreadable records around h (known bad): how
// many before it and after it are unreadable too. Damage is contiguous in
// key order (a bad block holds consecutive heights, a truncated blob file
// loses its tail, a lost footer all of it), and a probe that meets a bad
// table block costs milliseconds (Pebble searches the block for a single
// flipped bit), so each end of the run is found by galloping and
// bisection: O(log n) probes. Both ends: a read that meets the damage in
// its middle (an export stream starting inside it) removes all of it, not
// only the part after the height it read, so that the heights named are
// all the run holds. A readable record caught between two unreadable ones
// may be removed with them; fetch restores it like the others.
func (s *Store) badRun(h uint64) Range {
	before := runLen(func(d uint64) bool { return d <= h && s.probe(h-d) == readBad })
	after := runLen(func(d uint64) bool { return h+d > h && s.probe(h+d) == readBad })
	return Range{From: h - before, To: h + after}
}

// runLen is the largest d below maxProbe with bad(1) … bad(d) all true, bad
// known to be true from 0 up to some distance and false after it.
func runLen(bad func(d uint64) bool) uint64 {
	lo, hi := uint64(0), uint64(1) // bad(lo); hi is the first distance probed
	for hi < maxProbe && bad(hi) {
		lo, hi = hi, hi*2
	}
	if hi >= maxProbe {
		return lo
	}
	for hi-lo > 1 { // bad(lo), !bad(hi)
		mid := lo + (hi-lo)/2
		if bad(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// dropUnreadable removes the run of unreadable records around h (found
// unreadable by a read that failed with cause) and returns cause as
// a *CorruptStoreError naming the run. A read-only or broken store keeps
// them and returns cause unchanged.
func (s *Store) dropUnreadable(h uint64, cause error) error {
	if s.opts.ReadOnly || s.faults.broken() != nil {
		return cause
	}
	run := s.badRun(h)
	var cs *CorruptStoreError
	out := &CorruptStoreError{Dir: s.dir, Heights: &run, Err: cause}
	if errors.As(cause, &cs) {
		out.File, out.Err = cs.File, cs.Err
		if cs.Err == nil {
			out.Err = cause
		}
	}
	out.Other, out.Unchecked = s.otherDamage(h, run)
	if s.opts.KeepDamage {
		out.Kept = true
		return out
	}
	// Said before the records go: a reader of another stream that finds
	// them gone asks DroppedAt why.
	s.droppedMu.Lock()
	s.dropped = append(s.dropped, out)
	s.droppedMu.Unlock()
	for _, r := range append([]Range{run}, out.Other...) {
		if err := s.Delete(r.From, r.To); err != nil {
			return errors.Join(out, fmt.Errorf("staging: remove unreadable records %s: %w", r, err))
		}
	}
	out.Dropped = true
	s.opts.Logger.Warn("staging: removed unreadable records; fetch them again", "dir", s.dir, "heights", out.heights(), "file", out.File, "err", cause)
	return out
}

// KeepsDamage reports whether the store was opened to keep damaged
// records (Options.KeepDamage): its reader names them and removes nothing.
func (s *Store) KeepsDamage() bool { return s.opts.KeepDamage }

// DroppedAt returns the damage for which this process removed the record
// of h as unreadable (a *CorruptStoreError), or nil. A reader that finds h
// missing reports that cause: the height was staged and lost to a damaged
// file, not never fetched (another export stream's read may have removed
// it along with the rest of the file's damage).
func (s *Store) DroppedAt(h uint64) error {
	s.droppedMu.Lock()
	defer s.droppedMu.Unlock()
	for _, e := range s.dropped {
		for _, r := range append([]Range{*e.Heights}, e.Other...) {
			if r.From <= h && h <= r.To {
				return e
			}
		}
	}
	return nil
}

// maxFileProbe bounds the heights otherDamage reads: a store whose damaged
// files hold more is sent to repair, which reads every record.
const maxFileProbe = 1 << 18

// otherDamage finds the other unreadable records of the files that hold
// h's (found unreadable, in the run known): a damaged blob file holds the
// records of every table that refers to it, often heights apart (a flush
// takes what the memtable holds; a compaction rewrites several ranges),
// so the run around h is not all its damage. It reads every height of the
// tables that hold h's key or refer to a blob file one of those refers
// to, and returns the runs of unreadable records outside known; unchecked
// is true when those tables hold more than maxFileProbe heights, or cannot
// be listed: then not all the damage is known.
func (s *Store) otherDamage(h uint64, known Range) (runs []Range, unchecked bool) {
	cands, ok := s.sharedFileHeights(h)
	var n uint64
	for _, c := range cands {
		n += c.Len()
	}
	if !ok || n > maxFileProbe {
		return nil, true
	}
	var cur *Range
	end := func() {
		if cur != nil {
			runs = append(runs, *cur)
			cur = nil
		}
	}
	for _, c := range cands {
		for x := c.From; x <= c.To && x >= c.From; x++ {
			if known.From <= x && x <= known.To {
				end()
				x = known.To
				continue
			}
			if s.probe(x) != readBad {
				end()
				continue
			}
			if cur == nil {
				cur = &Range{From: x}
			}
			cur.To = x
		}
		end()
	}
	return runs, false
}

// sharedFileHeights lists, merged and in order, the block heights the
// tables that hold h's record key cover, and those of every table that
// refers to a blob file one of them refers to.
func (s *Store) sharedFileHeights(h uint64) (out []Range, ok bool) {
	defer func() {
		if recover() != nil {
			out, ok = nil, false
		}
	}()
	key := heightKey(prefixBlock, h)
	levels, err := s.db.SSTables()
	if err != nil {
		return nil, false
	}
	holds := func(t pebble.SSTableInfo) bool {
		return bytes.Compare(t.Smallest.UserKey, key) <= 0 && bytes.Compare(key, t.Largest.UserKey) <= 0
	}
	blobs := map[string]bool{}
	for _, l := range levels {
		for _, t := range l {
			if holds(t) {
				for _, b := range t.GetBlobReferenceFiles() {
					blobs[fmt.Sprint(b)] = true
				}
			}
		}
	}
	_, high, staged, err := s.Bounds()
	if err != nil || !staged {
		return nil, false
	}
	var rs []Range
	for _, l := range levels {
		for _, t := range l {
			shared := holds(t)
			for _, b := range t.GetBlobReferenceFiles() {
				shared = shared || blobs[fmt.Sprint(b)]
			}
			if r, ok := blockHeights(t.Smallest.UserKey, t.Largest.UserKey, high); shared && ok {
				rs = append(rs, r)
			}
		}
	}
	slices.SortFunc(rs, func(a, b Range) int { return cmp.Compare(a.From, b.From) })
	for _, r := range rs {
		if n := len(out); n > 0 && r.From <= out[n-1].To+1 {
			out[n-1].To = max(out[n-1].To, r.To)
			continue
		}
		out = append(out, r)
	}
	return out, true
}

// blockHeights is the block heights in the user keys [lo, hi] (of a
// table), at most high; ok is false when it holds none.
func blockHeights(lo, hi []byte, high uint64) (Range, bool) {
	r := Range{To: high}
	switch {
	case len(lo) > 0 && lo[0] > prefixBlock, len(hi) > 0 && hi[0] < prefixBlock:
		return r, false
	}
	if len(lo) >= 9 && lo[0] == prefixBlock {
		r.From = keyHeight(lo)
	}
	if len(hi) >= 9 && hi[0] == prefixBlock {
		r.To = min(keyHeight(hi), high)
	}
	return r, r.From <= r.To
}
