package staging

import (
	"errors"
	"fmt"

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

// badRunLen returns how many records after h (known bad) are unreadable
// too. Damage is contiguous in key order (a bad block holds consecutive
// heights, a truncated blob file loses its tail, a lost footer all of it),
// and a probe that meets a bad table block costs milliseconds (Pebble
// searches the block for a single flipped bit), so the end of the run is
// found by galloping and bisection: O(log n) probes. A readable record
// caught between two unreadable ones may be removed with them; fetch
// restores it like the others.
func (s *Store) badRunLen(h uint64) uint64 {
	bad := func(d uint64) bool { return h+d > h && s.probe(h+d) == readBad }
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

// dropUnreadable removes the run of unreadable records that starts at h
// (found unreadable by a read that failed with cause) and returns cause as
// a *CorruptStoreError naming the run. A read-only or broken store keeps
// them and returns cause unchanged.
func (s *Store) dropUnreadable(h uint64, cause error) error {
	if s.opts.ReadOnly || s.faults.broken() != nil {
		return cause
	}
	run := Range{From: h, To: h + s.badRunLen(h)}
	var cs *CorruptStoreError
	out := &CorruptStoreError{Dir: s.dir, Heights: &run, Err: cause}
	if errors.As(cause, &cs) {
		out.File, out.Err = cs.File, cs.Err
		if cs.Err == nil {
			out.Err = cause
		}
	}
	if err := s.Delete(run.From, run.To); err != nil {
		return errors.Join(out, fmt.Errorf("staging: remove unreadable records %s: %w", run, err))
	}
	out.Dropped = true
	s.opts.Logger.Warn("staging: removed unreadable records; fetch them again", "dir", s.dir, "heights", run.String(), "file", out.File, "err", cause)
	return out
}
