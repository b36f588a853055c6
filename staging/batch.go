package staging

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
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

// Fault marks the error as data that is wrong (exit 4).
func (e *ConflictError) Fault() fault.Class { return fault.Data }

// Batch groups block writes into one Pebble commit. A Batch belongs to one
// goroutine; reuse it after Commit.
type Batch struct {
	s        *Store
	b        *pebble.Batch
	n        int
	rawBytes int64
	records  int64             // the records' bytes as stored (Size.Records' measure)
	heights  map[uint64][]byte // hashes put since the last commit: each height counted once
	high     uint64
	trust    bool // the batch holds a trust checkpoint (PutTrust)
}

// NewBatch returns an empty batch.
//
// The batch's buffer is sized for a loader commit (8 MiB of compressed
// records and the span that crosses it) and kept across commits, rather
// than grown by doubling, copied at each step, and dropped at every Reset
// as Pebble does with buffers over 1 MiB.
func (s *Store) NewBatch() *Batch {
	return &Batch{s: s, b: s.db.NewBatchWithSize(batchBufferSize, pebble.WithMaxRetainedSizeBytes(2*batchBufferSize)),
		heights: map[uint64][]byte{}}
}

const batchBufferSize = 10 << 20

// Encoded is a block compressed and framed for staging, ready for a batch.
// Encoding is the costly part of a write; Store.Encode may be called from
// many goroutines so that it runs in parallel, while one writer commits.
type Encoded struct {
	Height     uint64
	Hash       []byte
	ParentHash []byte
	Value      []byte
	RawLen     int
}

// Encode compresses and frames b. It is safe for concurrent use.
func (s *Store) Encode(b chain.Block) (Encoded, error) {
	if len(b.Hash) == 0 {
		return Encoded{}, fmt.Errorf("staging: block %d has no hash", b.Height)
	}
	id, ok := s.Identity()
	if !ok {
		return Encoded{}, fmt.Errorf("staging: %s: Bind must be called before blocks are written", s.dir)
	}
	// Room for the header and a record compressed to a third or better (the
	// synthetic and recorded chains compress 4 to 6.5 times); a worse ratio
	// only costs a reallocation.
	size := fixedHeaderLen + len(b.Hash) + len(b.ParentHash) + len(b.Raw)/3 + 64
	v, err := appendValueFunc(make([]byte, 0, size), id.Family, &b, func(dst []byte) []byte {
		return s.enc.EncodeAll(b.Raw, dst)
	})
	if err != nil {
		return Encoded{}, err
	}
	return Encoded{Height: b.Height, Hash: b.Hash, ParentHash: b.ParentHash, Value: v, RawLen: len(b.Raw)}, nil
}

// Put compresses b and adds it to the batch; see PutEncoded.
func (bt *Batch) Put(b chain.Block) error {
	e, err := bt.s.Encode(b)
	if err != nil {
		return err
	}
	return bt.PutEncoded(e)
}

// PutEncoded adds an encoded block to the batch. A block already staged
// with the same hash is skipped; with another hash it is a *ConflictError.
func (bt *Batch) PutEncoded(e Encoded) error {
	s := bt.s
	if err := s.checkFirst(e.Height, e.Hash); err != nil {
		return err
	}
	if have, dup := bt.heights[e.Height]; dup {
		if !bytes.Equal(have, e.Hash) {
			return &ConflictError{Height: e.Height, Have: have, Given: e.Hash}
		}
		return nil // the batch holds it already
	}
	// A fill above the highest height staged (a fresh store, a range
	// fetched past its tip) has nothing to look up: the lookup was a
	// Pebble Get a block (2.4% of fetch --node-home's CPU).
	if s.mayBeStaged(e.Height) {
		have, _, err := s.Header(e.Height)
		switch {
		case err == nil && bytes.Equal(have, e.Hash):
			return nil
		case err == nil:
			return &ConflictError{Height: e.Height, Have: have, Given: e.Hash}
		case !errors.Is(err, ErrNotFound):
			return err
		}
	}
	if err := bt.b.Set(heightKey(prefixBlock, e.Height), e.Value, nil); err != nil {
		return err
	}
	if err := bt.b.Set(heightKey(prefixIndex, e.Height), indexValue(e.Hash, e.ParentHash), nil); err != nil {
		return err
	}
	bt.n++
	bt.rawBytes += int64(e.RawLen)
	bt.records += int64(len(e.Value))
	bt.heights[e.Height] = e.Hash
	bt.high = max(bt.high, e.Height)
	return nil
}

// Len is the number of blocks in the batch.
func (bt *Batch) Len() int { return bt.n }

// Size is the batch's encoded size in bytes (compressed records).
func (bt *Batch) Size() int { return bt.b.Len() }

// RecordBytes is what the batch's records take as stored: what they add
// to the store's Size().Records.
func (bt *Batch) RecordBytes() int64 { return bt.records }

// RawBytes is the uncompressed size of the batch's records.
func (bt *Batch) RawBytes() int64 { return bt.rawBytes }

// Commit writes the batch. Block data is written without fsync: a crash may
// lose the last batches, which fetch simply stages again. Durable state
// (identity, checkpoint mirrors) is written with sync elsewhere.
//
// A batch that would leave less than Options.MinFreeBytes free is refused
// with a *NoSpaceError and stays in the batch, unwritten; any failure of
// Pebble's is an error, never a panic, and leaves nothing half-written
// (Pebble applies a batch whole or not at all).
func (bt *Batch) Commit() (err error) {
	if bt.n > 0 || bt.trust {
		s := bt.s
		if err := s.faults.broken(); err != nil {
			return err
		}
		if err := s.reserve(uint64(bt.b.Len()), false); err != nil {
			return err
		}
		s.raiseIndexHigh(bt.high) // before: a batch started now must look
		if err := bt.commit(); err != nil {
			return err
		}
		s.addRecords(bt.n, bt.high)
	}
	bt.b.Reset()
	bt.n, bt.rawBytes, bt.records, bt.high = 0, 0, 0, 0
	bt.trust = false
	clear(bt.heights)
	return nil
}

func (bt *Batch) commit() error {
	return bt.s.write("commit batch", func() error {
		if err := bt.b.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("staging: commit batch: %w", err)
		}
		return nil
	})
}

// Close releases the batch without committing what it holds. After a
// commit abandoned inside a wedged Pebble (see Store.write) the batch is
// still Pebble's and is left to it.
func (bt *Batch) Close() {
	if bt.s.faults.isWedged() {
		return
	}
	bt.b.Close()
}
