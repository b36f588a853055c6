package cometbft

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
)

// This file recomputes a block's hash from its header the way CometBFT does
// (types/block.go, Header.Hash): the RFC 6962 Merkle root
// (crypto/merkle/tree.go, HashFromByteSlices) of the header's fields, each
// encoded as CometBFT encodes it for hashing — the Version and BlockID
// protobuf messages, the time as a protobuf Timestamp, and every other field
// through cdcEncode, the protobuf of a gogotypes wrapper (StringValue,
// Int64Value, BytesValue), which is empty for a zero value. The data_hash
// is the Merkle root of the SHA-256 of each tx (Txs.Hash).

// HeaderFields is a header in the types CometBFT hashes (exported for the
// synthetic chain, chain/cometbftsynth, which hashes the headers it writes).
type HeaderFields struct {
	VerBlock, VerApp   uint64
	ChainID            []byte
	Height             int64
	Sec                int64
	Nsec               int32
	LastHash           []byte
	LastPartsTotal     uint32
	LastPartsHash      []byte
	LastCommit, Data   []byte
	Vals, NextVals     []byte
	Consensus, App     []byte
	LastResults, Evid  []byte
	Proposer           []byte
	scratch            [14][]byte
	buf                []byte
	leaves             [14][32]byte
	tmp                [14][32]byte
	leafIn, innerInput []byte
}

// EmptyHashRaw is SHA-256 of nothing.
var EmptyHashRaw = sha256.Sum256(nil)

// Detach returns a copy of f that shares no scratch with it, for a header
// to be hashed later while f renders the next.
func (f *HeaderFields) Detach() HeaderFields {
	c := *f
	c.buf, c.leafIn, c.innerInput = nil, nil, nil
	own := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		return append([]byte(nil), b...)
	}
	c.LastPartsHash, c.LastCommit, c.Data = own(f.LastPartsHash), own(f.LastCommit), own(f.Data)
	c.App, c.LastResults = own(f.App), own(f.LastResults)
	return c
}

// Hash returns the header's hash (Header.Hash).
func (f *HeaderFields) Hash() [32]byte {
	b := f.buf[:0]
	mark := func(i, start int) { f.scratch[i] = b[start:len(b):len(b)] }
	s := len(b)
	if f.VerBlock != 0 {
		b = append(b, 0x08)
		b = appendUvarint(b, f.VerBlock)
	}
	if f.VerApp != 0 {
		b = append(b, 0x10)
		b = appendUvarint(b, f.VerApp)
	}
	mark(0, s)
	s = len(b)
	b = appendBytesField(b, 1, f.ChainID)
	mark(1, s)
	s = len(b)
	if f.Height != 0 {
		b = append(b, 0x08)
		b = appendUvarint(b, uint64(f.Height))
	}
	mark(2, s)
	s = len(b)
	if f.Sec != 0 {
		b = append(b, 0x08)
		b = appendUvarint(b, uint64(f.Sec))
	}
	if f.Nsec != 0 {
		b = append(b, 0x10)
		b = appendUvarint(b, uint64(int64(f.Nsec)))
	}
	mark(3, s)
	s = len(b)
	// BlockID{hash = 1, part_set_header = 2 (non-nullable: always written)}
	// with PartSetHeader{total = 1, hash = 2}.
	b = appendBytesField(b, 1, f.LastHash)
	psh := 0
	if f.LastPartsTotal != 0 {
		psh += 1 + uvarintLen(uint64(f.LastPartsTotal))
	}
	if len(f.LastPartsHash) > 0 {
		psh += 1 + uvarintLen(uint64(len(f.LastPartsHash))) + len(f.LastPartsHash)
	}
	b = append(b, 0x12)
	b = appendUvarint(b, uint64(psh))
	if f.LastPartsTotal != 0 {
		b = append(b, 0x08)
		b = appendUvarint(b, uint64(f.LastPartsTotal))
	}
	b = appendBytesField(b, 2, f.LastPartsHash)
	mark(4, s)
	for i, v := range [...][]byte{f.LastCommit, f.Data, f.Vals, f.NextVals, f.Consensus, f.App, f.LastResults, f.Evid, f.Proposer} {
		s = len(b)
		b = appendBytesField(b, 1, v)
		mark(5+i, s)
	}
	f.buf = b[:0] // the marks stay valid: appends that grew b left them in place
	for i := range f.leaves {
		f.leaves[i] = LeafHash(&f.leafIn, f.scratch[i])
	}
	return MerkleRootOfLeaves(f.leaves[:], f.tmp[:], &f.innerInput)
}

// appendBytesField appends protobuf field num (wire type 2) holding v, or
// nothing when v is empty (proto3 omits empty scalars).
func appendBytesField(b []byte, num byte, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = append(b, num<<3|2)
	b = appendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// LeafHash is RFC 6962's leaf hash: SHA-256(0x00 || item).
func LeafHash(scratch *[]byte, item []byte) [32]byte {
	b := append((*scratch)[:0], 0)
	b = append(b, item...)
	*scratch = b
	return sha256.Sum256(b)
}

// MerkleRootOfLeaves returns the RFC 6962 root of leaf hashes, splitting at
// the largest power of two below n as CometBFT does; tmp has room for
// len(leaves) hashes and is overwritten. No leaves is SHA-256 of nothing.
func MerkleRootOfLeaves(leaves, tmp [][32]byte, scratch *[]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := splitPoint(len(leaves))
	left := MerkleRootOfLeaves(leaves[:k], tmp[:k], scratch)
	right := MerkleRootOfLeaves(leaves[k:], tmp[k:], scratch)
	b := append((*scratch)[:0], 1)
	b = append(b, left[:]...)
	b = append(b, right[:]...)
	*scratch = b
	return sha256.Sum256(b)
}

// splitPoint is the largest power of two less than n (n ≥ 2).
func splitPoint(n int) int {
	k := 1
	for k*2 < n {
		k *= 2
	}
	return k
}

// txsHash is Txs.Hash: the Merkle root over SHA-256 of each tx.
func txsHash(txs [][]byte) [32]byte {
	leaves := make([][32]byte, len(txs))
	var scratch []byte
	for i, tx := range txs {
		h := sha256.Sum256(tx)
		leaves[i] = LeafHash(&scratch, h[:])
	}
	return MerkleRootOfLeaves(leaves, make([][32]byte, len(leaves)), &scratch)
}

// VerifyBlock recomputes the hash of a raw record's block from its header,
// as CometBFT computes it, and the header's data_hash from the block's txs.
// It returns the recomputed hash when both match what the record says, a
// *chain.HashMismatchError when one does not, and an error wrapping
// ErrMalformedRecord when the record cannot be read.
func VerifyBlock(raw []byte) (hash []byte, err error) {
	st := statePool.Get().(*decodeState)
	defer st.release()
	v := &st.View
	if err := v.parseBlockHalf(raw); err != nil {
		return nil, fmt.Errorf("cometbft: verify block: %w", err)
	}
	h, err := v.verify()
	if err != nil {
		return nil, fmt.Errorf("cometbft: verify block %d: %w", v.hdr.height, err)
	}
	return h, nil
}

// verify recomputes the block's hash and data_hash (see VerifyBlock).
func (v *View) verify() ([]byte, error) {
	claimed, err := v.Hash()
	if err != nil {
		return nil, err
	}
	f, err := v.Header()
	if err != nil {
		return nil, err
	}
	height := uint64(v.hdr.height)
	sum := f.Hash()
	if string(sum[:]) != string(claimed) {
		return nil, &chain.HashMismatchError{Family: chain.FamilyCometBFT, Height: height, What: "block hash",
			Claimed: claimed, Computed: append([]byte(nil), sum[:]...)}
	}
	txs := make([][]byte, len(v.txs))
	for i, r := range v.txs {
		tx, derr := base64.StdEncoding.AppendDecode(nil, v.bytesOf(r))
		if derr != nil {
			return nil, malformed("tx %d: %v", i, derr)
		}
		txs[i] = tx
	}
	if dh := txsHash(txs); string(dh[:]) != string(f.Data) {
		return nil, &chain.HashMismatchError{Family: chain.FamilyCometBFT, Height: height, What: "data_hash",
			Claimed: f.Data, Computed: append([]byte(nil), dh[:]...)}
	}
	return append([]byte(nil), sum[:]...), nil
}

// VerifyBlock is the package's VerifyBlock, for export to name the wrong
// block of a continuity break (export.BlockVerifier).
func (*Decoder) VerifyBlock(raw []byte) ([]byte, error) { return VerifyBlock(raw) }
