package staging

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint is an export checkpoint as mirrored into staging after each
// commit: the last height exported to one target and that block's hash.
// PostgreSQL holds the truth; the mirror lets status and a re-export see
// what each target had without connecting to it.
type Checkpoint struct {
	// From is the first height of the stream's rows (a backfill's range
	// start, where the head stream started); zero in mirrors written
	// before it was recorded.
	From    uint64    `json:"from,omitempty"`
	Height  uint64    `json:"height"`
	Hash    []byte    `json:"hash,omitempty"`
	Updated time.Time `json:"updated"`
}

// Target names one export destination: database identity, schema and
// stream. It never contains credentials.
func mirrorKey(target string) []byte { return append([]byte{prefixMirror}, target...) }

// SetMirror records cp as the checkpoint of target, with sync: the mirror
// claims durability.
func (s *Store) SetMirror(target string, cp Checkpoint) error {
	v, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	return s.setSync(mirrorKey(target), v, "mirror checkpoint for "+target)
}

// Mirror returns the mirrored checkpoint of target.
func (s *Store) Mirror(target string) (_ Checkpoint, _ bool, err error) {
	if err := s.faults.broken(); err != nil {
		return Checkpoint{}, false, err
	}
	defer s.contain("read mirror "+target, false, &err)
	v, closer, err := s.db.Get(mirrorKey(target))
	if errors.Is(err, pebble.ErrNotFound) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("staging: read mirror %s: %w", target, s.corruptErr(err, nil))
	}
	defer closer.Close()
	var cp Checkpoint
	if err := json.Unmarshal(v, &cp); err != nil {
		return Checkpoint{}, false, fmt.Errorf("staging: mirror %s is corrupt: %w", target, err)
	}
	return cp, true, nil
}

// Mirrors returns every mirrored checkpoint by target.
func (s *Store) Mirrors() (_ map[string]Checkpoint, err error) {
	if err := s.faults.broken(); err != nil {
		return nil, err
	}
	defer s.contain("read mirrors", false, &err)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixMirror}, UpperBound: []byte{prefixMirror + 1}})
	if err != nil {
		return nil, fmt.Errorf("staging: read mirrors: %w", s.corruptErr(err, nil))
	}
	defer it.Close()
	out := map[string]Checkpoint{}
	for ok := it.First(); ok; ok = it.Next() {
		var cp Checkpoint
		if err := json.Unmarshal(it.Value(), &cp); err != nil {
			return nil, fmt.Errorf("staging: mirror %s is corrupt: %w", it.Key()[1:], err)
		}
		out[string(it.Key()[1:])] = cp
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("staging: read mirrors: %w", s.corruptErr(err, nil))
	}
	return out, nil
}
