package staging

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Garbage targets of the blob files: the share of their record bytes no
// key refers to any more that Pebble lets stand before it rewrites one.
const (
	// garbageTarget is the standing target. Staged records are written
	// once: only prunes, repairs and reorged heads make garbage.
	garbageTarget = 0.5
	// pruneGarbageTarget is the target while Prune runs: a prune is asked
	// for the space, so all but a tenth of what it frees comes back before
	// it returns (a lower target would rewrite files for little).
	pruneGarbageTarget = 0.1
)

// blobPolicy is the part of Pebble's value separation policy that changes
// while the store is open.
type blobPolicy struct {
	reclaiming atomic.Bool
}

func (b *blobPolicy) target() float64 {
	if b.reclaiming.Load() {
		return pruneGarbageTarget
	}
	return garbageTarget
}

// reclaimPoll is how often Prune looks at Pebble's metrics while it waits
// for the blob files to be rewritten.
const reclaimPoll = 20 * time.Millisecond

// Prune deletes every staged block below height below (records and index
// entries, one range deletion each), compacts that key range so that the
// sstables holding them are rewritten without them, and waits while Pebble
// rewrites the blob files that still hold records at or above below beside
// deleted ones, until no more than pruneGarbageTarget of the blob bytes is
// garbage. Without that wait the space would not come back at all on most
// stores: a blob file is removed only when no key refers to it, and one
// file often holds the whole store's records (compactions over many blob
// files write their records into one).
func (s *Store) Prune(ctx context.Context, below uint64) (err error) {
	if below == 0 {
		return nil
	}
	// The rewrites are picked when a compaction ends: the target must be
	// low before the compaction below ends.
	s.blobs.reclaiming.Store(true)
	defer s.blobs.reclaiming.Store(false)
	if err := s.Delete(0, below-1); err != nil {
		return err
	}
	defer s.contain(fmt.Sprintf("compact below %d", below), false, &err)
	for _, p := range []byte{prefixBlock, prefixIndex} {
		lo, hi := boundsFor(p, 0, below-1)
		if err := s.db.Compact(ctx, lo, hi, true); err != nil {
			return fmt.Errorf("staging: compact below %d: %w", below, s.corruptErr(err, nil))
		}
	}
	if err := s.awaitReclaim(ctx); err != nil {
		return fmt.Errorf("staging: prune below %d: reclaim the blob files: %w", below, err)
	}
	return s.faults.broken()
}

// awaitReclaim waits until the blob files' garbage is at most
// pruneGarbageTarget and the files Pebble no longer needs are deleted (no
// zombie or obsolete file left), or
// until Pebble has nothing in progress for idleChecks polls in a row (it
// picked no rewrite: none left that it would do) or ctx ends. It returns
// early, with the error, when Pebble reports a background error.
func (s *Store) awaitReclaim(ctx context.Context) error {
	// A compaction's end and the pick of the next one are two critical
	// sections: one poll can fall between them.
	const idleChecks = 5
	idle := 0
	tick := time.NewTicker(reclaimPoll)
	defer tick.Stop()
	start := time.Now()
	if m := s.db.Metrics(); garbage(m) > pruneGarbageTarget {
		s.opts.Logger.Info("staging: prune: Pebble rewrites the blob files shared with kept records",
			"dir", s.dir, "garbage", fmt.Sprintf("%.0f%%", 100*garbage(m)), "blob_bytes", m.BlobFiles.LiveSize)
		defer func() {
			m := s.db.Metrics()
			s.opts.Logger.Info("staging: prune: blob files rewritten", "dir", s.dir,
				"garbage", fmt.Sprintf("%.0f%%", 100*garbage(m)), "blob_bytes", m.BlobFiles.LiveSize, "duration", time.Since(start).Round(time.Millisecond))
		}()
	}
	for {
		if err := s.faults.broken(); err != nil {
			return err
		}
		m := s.db.Metrics()
		// A file the rewrite replaced is a zombie until the version that
		// refers to it is released, then obsolete until it is deleted.
		if garbage(m) <= pruneGarbageTarget && m.BlobFiles.ZombieCount == 0 && m.BlobFiles.ObsoleteCount == 0 &&
			m.Table.ZombieCount == 0 && m.Table.ObsoleteCount == 0 {
			return nil
		}
		if m.Compact.NumInProgress == 0 {
			idle++
			if idle >= idleChecks {
				return nil
			}
		} else {
			idle = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.faults.failed:
		case <-tick.C:
		}
	}
}

// garbage is the share of the live blob files' record bytes no key refers
// to.
func garbage(m *pebble.Metrics) float64 {
	if m.BlobFiles.ValueSize == 0 {
		return 0
	}
	return float64(m.BlobFiles.ValueSize-m.BlobFiles.ReferencedValueSize) / float64(m.BlobFiles.ValueSize)
}

// Checkpoint writes a consistent copy of the store into dir, which must not
// exist: Pebble's checkpoint (hard links where the filesystem allows, the
// WAL flushed first), taken while the store stays open for writes.
func (s *Store) Checkpoint(dir string) (err error) {
	if err := s.faults.broken(); err != nil {
		return err
	}
	defer s.contain("checkpoint", false, &err)
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("staging: checkpoint into %s: %w", dir, s.corruptErr(err, nil))
	}
	return nil
}
