package staging

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The chain of trust's checkpoint (chain/cometbft/trust): the tracked state
// after the last height proven, and the root it was proven from, as the
// family's chain of trust encodes it. Staging keeps it opaque. The loader
// writes it in the batch that stages the records it proves, so that it is
// never ahead of them (a batch lost in a crash loses both); verify writes it
// on its own, durably, after proving records staged before.

var trustKey = []byte{prefixTrust}

// PutTrust adds the chain of trust's checkpoint to the batch: it commits
// with the batch's records, and a batch that holds only it commits too.
func (bt *Batch) PutTrust(v []byte) error {
	if err := bt.b.Set(trustKey, v, nil); err != nil {
		return fmt.Errorf("staging: trust checkpoint: %w", err)
	}
	bt.trust = true
	return nil
}

// SetTrust writes the chain of trust's checkpoint on its own, durably.
func (s *Store) SetTrust(v []byte) error {
	return s.setSync(trustKey, v, "write trust checkpoint")
}

// Trust returns the chain of trust's checkpoint; ok is false when the
// store's history has not been proven.
func (s *Store) Trust() (v []byte, ok bool, err error) {
	defer s.contain("read trust checkpoint", false, &err)
	b, closer, err := s.db.Get(trustKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("staging: read trust checkpoint: %w", s.corruptErr(err, nil))
	}
	defer closer.Close()
	return append([]byte(nil), b...), true, nil
}
