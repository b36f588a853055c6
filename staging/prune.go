package staging

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Prune deletes every staged block below height below (records and index
// entries, one range deletion each) and compacts that key range, so that
// the sstables holding them are rewritten without them and the blob files
// only they referenced are removed. A blob file that also holds records at
// or above below is kept until Pebble rewrites it (value separation's
// garbage ratio), so the space comes back in steps on a mixed store.
func (s *Store) Prune(ctx context.Context, below uint64) (err error) {
	if below == 0 {
		return nil
	}
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
	return s.faults.broken()
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
