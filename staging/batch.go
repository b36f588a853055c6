package staging

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/cockroachdb/pebble/v2"
)

// ConflictError reports a block whose hash differs from the one already
// staged at its height: another fork or another chain. Nothing is written.
type ConflictError struct {
	Height      uint64
	Have, Given []byte
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("staging: height %d already holds block %X, refusing block %X", e.Height, e.Have, e.Given)
}

// Batch groups block writes into one Pebble commit. A Batch belongs to one
// goroutine; reuse it after Commit.
type Batch struct {
	s        *Store
	b        *pebble.Batch
	n        int
	rawBytes int64
	buf      []byte
	comp     []byte
}

// NewBatch returns an empty batch.
func (s *Store) NewBatch() *Batch { return &Batch{s: s, b: s.db.NewBatch()} }

// Put compresses b and adds it to the batch. A block already staged with the
// same hash is skipped; with another hash it is a *ConflictError.
func (bt *Batch) Put(b chain.Block) error {
	s := bt.s
	if len(b.Hash) == 0 {
		return fmt.Errorf("staging: block %d has no hash", b.Height)
	}
	if err := s.checkFirst(&b); err != nil {
		return err
	}
	have, _, err := s.Header(b.Height)
	switch {
	case err == nil && bytes.Equal(have, b.Hash):
		return nil
	case err == nil:
		return &ConflictError{Height: b.Height, Have: have, Given: b.Hash}
	case !errors.Is(err, ErrNotFound):
		return err
	}
	id, _ := s.Identity()
	bt.comp = s.enc.EncodeAll(b.Raw, bt.comp[:0])
	bt.buf, err = appendValue(bt.buf[:0], id.Family, &b, bt.comp)
	if err != nil {
		return err
	}
	if err := bt.b.Set(heightKey(prefixBlock, b.Height), bt.buf, nil); err != nil {
		return err
	}
	if err := bt.b.Set(heightKey(prefixIndex, b.Height), indexValue(b.Hash, b.ParentHash), nil); err != nil {
		return err
	}
	bt.n++
	bt.rawBytes += int64(len(b.Raw))
	return nil
}

// Len is the number of blocks in the batch.
func (bt *Batch) Len() int { return bt.n }

// Size is the batch's encoded size in bytes (compressed records).
func (bt *Batch) Size() int { return bt.b.Len() }

// RawBytes is the uncompressed size of the batch's records.
func (bt *Batch) RawBytes() int64 { return bt.rawBytes }

// Commit writes the batch. Block data is written without fsync: a crash may
// lose the last batches, which fetch simply stages again. Durable state
// (identity, checkpoint mirrors) is written with sync elsewhere.
func (bt *Batch) Commit() error {
	if bt.n > 0 {
		if err := bt.b.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("staging: commit batch: %w", err)
		}
	}
	bt.b.Reset()
	bt.n, bt.rawBytes = 0, 0
	return nil
}

// Close releases the batch without committing what it holds.
func (bt *Batch) Close() { bt.b.Close() }
