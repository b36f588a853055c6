package staging

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Pebble recovers from a damaged MANIFEST or WAL by dropping what it cannot
// read: a flipped byte there loses staged heights without an error. The
// ledger is a small file beside Pebble's, outside Pebble, that records how
// many records were durably staged (written at Flush and Close, after
// Pebble synced them, and lowered before a Delete). On Open the store counts
// its records again; fewer than the ledger says is damage, reported by
// Damage until the lost heights are fetched again.
const ledgerFile = "blockhaul-staged.json"

type ledger struct {
	Records uint64    `json:"records"`
	High    uint64    `json:"high"` // highest height staged when written
	Updated time.Time `json:"updated"`
}

// countRecords counts the staged heights (the index keyspace) and returns
// the highest.
func (s *Store) countRecords(from, to uint64) (n, high uint64, err error) {
	err = s.scanIndex(from, to, func(h uint64) { n, high = n+1, h })
	return n, high, err
}

func (s *Store) readLedger() (ledger, bool, error) {
	f, err := s.fs.Open(s.fs.PathJoin(s.dir, ledgerFile))
	if errors.Is(err, os.ErrNotExist) {
		return ledger{}, false, nil
	}
	if err != nil {
		return ledger{}, false, fmt.Errorf("staging: read %s: %w", ledgerFile, err)
	}
	defer f.Close()
	var l ledger
	if err := json.NewDecoder(f).Decode(&l); err != nil {
		return ledger{}, false, &CorruptStoreError{Dir: s.dir, File: ledgerFile, Err: err}
	}
	return l, true, nil
}

// writeLedger replaces the ledger atomically and durably.
func (s *Store) writeLedger(l ledger) error {
	l.Updated = time.Now().UTC()
	v, err := json.Marshal(l)
	if err != nil {
		return err
	}
	final := s.fs.PathJoin(s.dir, ledgerFile)
	tmp := final + ".tmp"
	f, err := s.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("staging: write %s: %w", ledgerFile, err)
	}
	_, err = f.Write(append(v, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, final)
	}
	if err == nil {
		var d vfs.File
		if d, err = s.fs.OpenDir(s.dir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("staging: write %s: %w", ledgerFile, err)
	}
	return nil
}

// openLedger is called by Open: it counts the records and compares them
// with the ledger. A store written before the ledger existed starts one.
// A read-only store keeps the runs of heights the count walked (see
// heldRuns): nothing changes them while it is open.
func (s *Store) openLedger() error {
	var n, high uint64
	runs := &runSet{max: maxHeldRuns}
	if !s.opts.ReadOnly {
		runs = nil
	}
	err := s.scanIndex(0, ^uint64(0), func(h uint64) {
		n, high = n+1, h
		runs.add(h)
	})
	var ce *CorruptStoreError
	if errors.As(err, &ce) {
		// The index cannot be read through: open anyway, so that what
		// can be read is, and the damage is said (Damage, and the reads
		// that meet it).
		s.ledgerMu.Lock()
		s.damage, s.ledgerOff = ce, true // uncounted: leave the ledger as it is
		s.ledgerMu.Unlock()
		s.indexHigh.Store(math.MaxUint64) // unknown: every height may be staged
		return nil
	}
	if err != nil {
		return err
	}
	l, ok, err := s.readLedger()
	if err != nil {
		return err
	}
	if runs != nil && !runs.over {
		s.held = runs.runs
	}
	s.ledgerMu.Lock()
	defer s.ledgerMu.Unlock()
	s.records, s.high = n, high
	s.indexHigh.Store(high)
	if ok {
		s.durable = l
	}
	if ok && n < l.Records {
		s.damage = &CorruptStoreError{Dir: s.dir, Err: fmt.Errorf(
			"%d staged records are lost: %d were durably staged (up to height %d), %d are left; Pebble's MANIFEST or WAL was damaged; the lost heights show as gaps: fetch them again",
			l.Records-n, l.Records, l.High, n)}
	}
	if !ok && !s.opts.ReadOnly {
		s.durable = ledger{Records: n, High: high}
		return s.writeLedger(s.durable)
	}
	return nil
}

// Damage reports records lost from what was durably staged (a damaged
// MANIFEST or WAL), found when the store was opened; nil once the lost
// heights have been staged again (see Flush) or for an intact store.
func (s *Store) Damage() error {
	s.ledgerMu.Lock()
	defer s.ledgerMu.Unlock()
	if s.damage == nil {
		return nil
	}
	return s.damage
}

// syncLedger syncs Pebble's WAL and records how many records are staged:
// the count (kept by commits and deletes since Open counted) is taken
// first, so that every record counted was committed before the sync made
// it durable. It never lowers the ledger (only Delete does): a damaged
// store stays damaged until its lost heights are fetched again.
func (s *Store) syncLedger() error {
	if s.opts.ReadOnly {
		return nil
	}
	s.ledgerMu.Lock()
	n, high, off := s.records, s.high, s.ledgerOff
	s.ledgerMu.Unlock()
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("staging: sync: %w", err)
	}
	if err := s.faults.broken(); err != nil {
		return err
	}
	if off {
		return nil
	}
	s.ledgerMu.Lock()
	defer s.ledgerMu.Unlock()
	if n >= s.durable.Records {
		s.damage = nil
		if n == s.durable.Records && high == s.durable.High {
			return nil
		}
		s.durable = ledger{Records: n, High: high}
		return s.writeLedger(s.durable)
	}
	return nil
}

// addRecords counts n records committed, the highest at height high.
func (s *Store) addRecords(n int, high uint64) {
	s.ledgerMu.Lock()
	defer s.ledgerMu.Unlock()
	s.records += uint64(n)
	s.high = max(s.high, high)
}

// raiseIndexHigh is called before a batch holding heights up to h
// commits: from then on they may be in the index.
func (s *Store) raiseIndexHigh(h uint64) {
	for {
		old := s.indexHigh.Load()
		if h <= old || s.indexHigh.CompareAndSwap(old, h) {
			return
		}
	}
}

// mayBeStaged reports whether height h may be in the index: false only
// when h is above every height staged or being committed.
func (s *Store) mayBeStaged(h uint64) bool { return h <= s.indexHigh.Load() }

// lowerLedger is called before records in [from, to] are deleted: the
// ledger must not claim them after the delete, and if the process dies
// between the two the count is only higher than the ledger, which is fine.
// It returns how many records the range held, for the count kept in
// memory once the delete is committed.
func (s *Store) lowerLedger(from, to uint64) (uint64, error) {
	if s.opts.ReadOnly {
		return 0, nil
	}
	n, _, err := s.countRecords(from, to)
	var ce *CorruptStoreError
	if errors.As(err, &ce) {
		// The range cannot be counted (it is being removed because it
		// cannot be read): assume every height of it was staged. The
		// ledger only claims less than it might.
		n, err = to-from+1, nil
	}
	if err != nil || n == 0 {
		return n, err
	}
	s.ledgerMu.Lock()
	defer s.ledgerMu.Unlock()
	if s.ledgerOff {
		return n, nil
	}
	s.durable.Records -= min(n, s.durable.Records)
	return n, s.writeLedger(s.durable)
}

// removedRecords counts n records deleted.
func (s *Store) removedRecords(n uint64) {
	s.ledgerMu.Lock()
	defer s.ledgerMu.Unlock()
	s.records -= min(n, s.records)
}
