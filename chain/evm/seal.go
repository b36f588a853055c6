package evm

import "fmt"

// This file is what a generator of EVM records (chain/evmsynth) needs to
// make their hashes real: the transactions' hashes and the header's roots
// its contents commit to, and the header's hash, computed as VerifyBlock
// recomputes them.

// HeaderFields is the number of header fields (the Field* indexes).
const HeaderFields = len(headerFields)

// HeaderFieldKey returns the block object's JSON key of header field i
// (a Field* index).
func HeaderFieldKey(i int) string { return headerFields[i].key }

// Header is a block header set field by field, hashed as geth hashes it
// (keccak256 of its RLP list). The zero value is an empty header; a Header
// is not safe for concurrent use.
type Header struct{ rlp headerRLP }

// Set sets field i (a Field* index) from its JSON value without quotes
// ("0x…"), appending the bytes it keeps to arena, and returns arena.
func (h *Header) Set(i int, v []byte, arena []byte) ([]byte, error) { return h.rlp.set(i, v, arena) }

// SetParent sets the parent hash, as raw bytes (32).
func (h *Header) SetParent(parent []byte) { h.rlp.vals[FieldParentHash] = parent }

// Hash returns the header's hash; a required field not set is an error.
func (h *Header) Hash() ([32]byte, error) { return h.rlp.hash() }

// Root is one of the roots a header holds over a block's contents.
type Root struct {
	Field   int      // the header field (FieldTxRoot, FieldWithdrawalsRoot, FieldReceiptsRoot)
	Present bool     // the record carries the items and the header the field
	Sum     [32]byte // the root of the items, when Present
}

// Commitments reads a raw record as VerifyBlock does and returns what its
// contents commit to: each transaction's hash (keccak256 of its
// encoding), in order, and the header's transactions, withdrawals and
// receipts roots computed from the items. A transaction of a type this
// package does not know is an error.
func Commitments(raw []byte) (txHashes [][32]byte, roots [3]Root, err error) {
	v, _ := verifiers.Get().(*verifier)
	if v == nil {
		v = &verifier{}
	}
	defer verifiers.Put(v)
	if _, _, err := v.read(raw); err != nil {
		return nil, roots, err
	}
	if v.unknown >= 0 {
		return nil, roots, fmt.Errorf("evm: transaction %d is of a type this verifier does not know", v.unknown)
	}
	txHashes = make([][32]byte, len(v.txs))
	for i, sp := range v.txs {
		txHashes[i] = v.keccak(v.arena[sp.start:sp.end])
	}
	for i, r := range v.roots() {
		roots[i] = Root{Field: r.field, Present: r.check}
		if r.check {
			roots[i].Sum = v.root(r.items)
		}
	}
	return txHashes, roots, nil
}
