package evm

import (
	"bytes"
	"errors"
	"fmt"
	"hash"
	"slices"

	"github.com/blockhaul/blockhaul/chain"
	"golang.org/x/crypto/sha3"
)

// This file recomputes a block's hash from its header the way go-ethereum
// does (core/types/block.go, Header.Hash): keccak256 of the header's RLP
// list, whose shape grew with the forks — 15 fields up to Berlin, then
// base fee (London), withdrawals root (Shanghai), blob gas used, excess blob
// gas and parent beacon block root (Cancun), requests hash (Prague). An
// optional field is encoded when present, and so is every optional field
// before a present one (as zero), as geth's `rlp:"optional"` does.

// headerField is one field of the header RLP list, in order.
type headerField struct {
	key  string
	kind byte // 'h' fixed-length bytes (hash, address, bloom, nonce), 'b' byte string, 'q' quantity
	size int  // byte length of 'h' fields
}

var headerFields = [...]headerField{
	{"parentHash", 'h', 32},
	{"sha3Uncles", 'h', 32},
	{"miner", 'h', 20},
	{"stateRoot", 'h', 32},
	{"transactionsRoot", 'h', 32},
	{"receiptsRoot", 'h', 32},
	{"logsBloom", 'h', 256},
	{"difficulty", 'q', 0},
	{"number", 'q', 0},
	{"gasLimit", 'q', 0},
	{"gasUsed", 'q', 0},
	{"timestamp", 'q', 0},
	{"extraData", 'b', 0},
	{"mixHash", 'h', 32},
	{"nonce", 'h', 8},
	// Optional, by fork.
	{"baseFeePerGas", 'q', 0},
	{"withdrawalsRoot", 'h', 32},
	{"blobGasUsed", 'q', 0},
	{"excessBlobGas", 'q', 0},
	{"parentBeaconBlockRoot", 'h', 32},
	{"requestsHash", 'h', 32},
}

// Indexes of headerFields.
const (
	FieldParentHash = iota
	FieldUncles
	FieldMiner
	FieldStateRoot
	FieldTxRoot
	FieldReceiptsRoot
	FieldBloom
	FieldDifficulty
	FieldNumber
	FieldGasLimit
	FieldGasUsed
	FieldTimestamp
	FieldExtra
	FieldMixHash
	FieldNonce
	FieldBaseFee
	FieldWithdrawalsRoot
	FieldBlobGasUsed
	FieldExcessBlobGas
	FieldBeaconRoot
	FieldRequestsHash
)

const firstOptional = FieldBaseFee

// blockBodyKeys are the keys of a block object (eth_getBlockByNumber's
// result, as geth's RPCMarshalBlock writes it) that are not header fields:
// any other key the header hash does not cover is named when the hash does
// not match (an EIP-7685 draft's requestsRoot, say).
var blockBodyKeys = map[string]bool{
	"hash": true, "size": true, "totalDifficulty": true,
	"transactions": true, "uncles": true, "withdrawals": true,
}

// headerIndex maps a JSON key of the block object to its headerFields index.
func headerIndex(key []byte) int {
	for i := range headerFields {
		if headerFields[i].key == string(key) {
			return i
		}
	}
	return -1
}

// headerRLP accumulates a header's field encodings and hashes them.
type headerRLP struct {
	vals [len(headerFields)][]byte // field contents as raw bytes (quantities big-endian, minimal)
	have uint32
	// unknown are the block object's keys that are neither header fields
	// nor its known body (a fork newer than this hasher, or a draft one):
	// named when the hash does not match, as the likely cause.
	unknown []string
	body    []byte
	out     []byte
	k       hash.Hash
	sum     [32]byte
}

// set decodes the JSON value v (a 0x-hex string) of field i.
func (r *headerRLP) set(i int, v []byte, arena []byte) ([]byte, error) {
	f := &headerFields[i]
	d, err := digits(v)
	if err != nil {
		return arena, err
	}
	if f.kind == 'q' {
		if d, err = quantityDigits(v); err != nil {
			return arena, err
		}
		if len(d) == 1 && d[0] == '0' {
			d = d[:0]
		}
	}
	if len(d)%2 == 1 {
		// A quantity of odd length: decode with a leading zero nibble.
		arena = append(arena, 0)
		start := len(arena) - 1
		arena = append(arena, make([]byte, len(d)/2)...)
		x := unhex[d[0]]
		if x > 0xf {
			return arena, badHex(v, errHexDigit)
		}
		arena[start] = x
		if !decodeHex(arena[start+1:], d[1:]) {
			return arena, badHex(v, errHexDigit)
		}
		r.vals[i] = arena[start:]
	} else {
		start := len(arena)
		arena = append(arena, make([]byte, len(d)/2)...)
		if !decodeHex(arena[start:], d) {
			return arena, badHex(v, errHexDigit)
		}
		r.vals[i] = arena[start:]
	}
	if f.kind == 'h' && len(r.vals[i]) != f.size {
		return arena, fmt.Errorf("%d bytes, want %d", len(r.vals[i]), f.size)
	}
	r.have |= 1 << i
	return arena, nil
}

// hash returns keccak256 of the header's RLP.
func (r *headerRLP) hash() ([32]byte, error) {
	for i := 0; i < firstOptional; i++ {
		if r.have&(1<<i) == 0 {
			return [32]byte{}, &fieldError{path: headerFields[i].key, err: errMissing}
		}
	}
	last := firstOptional - 1
	for i := firstOptional; i < len(headerFields); i++ {
		if r.have&(1<<i) != 0 {
			last = i
		}
	}
	b := r.body[:0]
	for i := 0; i <= last; i++ {
		v := r.vals[i]
		if r.have&(1<<i) == 0 {
			v = nil // an absent optional field before a present one: zero
			if headerFields[i].kind == 'h' {
				v = make([]byte, headerFields[i].size)
			}
		}
		b = appendRLPString(b, v)
	}
	r.body = b
	out := appendRLPListHeader(r.out[:0], len(b))
	out = append(out, b...)
	r.out = out
	if r.k == nil {
		r.k = sha3.NewLegacyKeccak256()
	}
	r.k.Reset()
	r.k.Write(out)
	r.k.Sum(r.sum[:0])
	return r.sum, nil
}

// VerifyBlock checks a raw record against the commitments of its own
// header and returns the block's hash. It recomputes, in this order:
//
//   - the block hash, keccak256 of the RLP header, whatever the fork;
//   - every transaction's hash, keccak256 of its canonical encoding
//     (legacy RLP, or the typed envelopes 0x01 to 0x04);
//   - transactionsRoot, withdrawalsRoot (when the block has withdrawals)
//     and receiptsRoot, each the root of the trie of the items' encodings
//     by rlp(index) (see trie.go).
//
// The first value that does not match is a *chain.HashMismatchError naming
// the height, the value ("block hash", "transaction 3 hash",
// "transactionsRoot", ...) and both hashes. A record that cannot be read is
// an error naming the field.
//
// A transaction of a type this package does not know (a rollup's deposit,
// say) cannot be re-encoded: its hash is taken as sent, and the
// transactions and receipts roots of its block are not checked (the block
// hash still is).
func VerifyBlock(raw []byte) (hash []byte, err error) {
	v, _ := verifiers.Get().(*verifier)
	if v == nil {
		v = &verifier{}
	}
	defer verifiers.Put(v)
	hash, err = v.record(raw)
	if err != nil {
		var hm *chain.HashMismatchError
		if errors.As(err, &hm) {
			return nil, err
		}
		if v.height >= 0 {
			return nil, fmt.Errorf("evm: verify block %d: %w", v.height, err)
		}
		return nil, fmt.Errorf("evm: verify block: %w", err)
	}
	return hash, nil
}

// VerifyHeader checks the block hash alone of a block object (a result of
// eth_getBlockByNumber): keccak256 of its RLP header. Bytes after the
// object are ignored.
func VerifyHeader(block []byte) (hash []byte, err error) {
	var r headerRLP
	claimed, height, err := r.read(newScanner(block), nil)
	if err != nil {
		return nil, fmt.Errorf("evm: verify block: %w", err)
	}
	return r.check(claimed, height)
}

// check compares the header's hash with the claimed one.
func (r *headerRLP) check(claimed []byte, height uint64) ([]byte, error) {
	sum, err := r.hash()
	if err != nil {
		return nil, fmt.Errorf("evm: verify block %d: %w", height, err)
	}
	if string(sum[:]) != string(claimed) {
		return nil, &chain.HashMismatchError{Family: chain.FamilyEVM, Height: height, What: "block hash",
			Claimed: claimed, Computed: append([]byte(nil), sum[:]...), Unknown: slices.Clone(r.unknown)}
	}
	return append([]byte(nil), sum[:]...), nil
}

// read fills r from the block object at the cursor and returns the block's
// claimed hash and number. With c set, it also reads the block's
// transactions and withdrawals into c; without, it skips them.
func (r *headerRLP) read(s *scanner, c *verifier) (claimed []byte, height uint64, err error) {
	if s.Null() {
		return nil, 0, errors.New("block is null (not found on the node?)")
	}
	r.unknown = r.unknown[:0]
	arena := make([]byte, 0, 1024)
	claimed = make([]byte, 32)
	sawHash := false
	for key := range s.object() {
		if string(key) == "hash" {
			v, err := s.str()
			if err != nil {
				return nil, 0, inField("hash", err)
			}
			if err := parseFixed(claimed, v); err != nil {
				return nil, 0, inField("hash", err)
			}
			sawHash = true
			continue
		}
		if c != nil {
			switch string(key) {
			case "transactions":
				if err := c.transactions(s); err != nil {
					return nil, 0, inField("transactions", err)
				}
				continue
			case "withdrawals":
				if err := c.withdrawals(s); err != nil {
					return nil, 0, inField("withdrawals", err)
				}
				continue
			}
		}
		i := headerIndex(key)
		if i < 0 || s.Null() {
			if i < 0 {
				if !blockBodyKeys[string(key)] {
					r.unknown = append(r.unknown, string(key))
				}
				if err := s.skip(); err != nil {
					return nil, 0, err
				}
			}
			continue
		}
		v, err := s.str()
		if err != nil {
			return nil, 0, inField(headerFields[i].key, err)
		}
		if arena, err = r.set(i, v, arena); err != nil {
			return nil, 0, inField(headerFields[i].key, err)
		}
	}
	if err := s.Err(); err != nil {
		return nil, 0, err
	}
	if !sawHash {
		return nil, 0, &fieldError{path: "hash", err: errMissing}
	}
	num := r.vals[8]
	for _, c := range num {
		height = height<<8 | uint64(c)
	}
	if len(num) > 8 {
		return nil, 0, inField("number", errors.New("above 64 bits"))
	}
	return claimed, height, nil
}

// VerifyBlock is the package's VerifyBlock, for export to name the wrong
// block of a continuity break (export.BlockVerifier).
func (*Decoder) VerifyBlock(raw []byte) ([]byte, error) { return VerifyBlock(raw) }

// VerifyRecordHeader checks the block hash alone of a raw record
// (VerifyHeader of its block object), for chain.VerifyHeader.
func VerifyRecordHeader(raw []byte) (hash []byte, err error) {
	const prefix = `{"block":`
	if !bytes.HasPrefix(raw, []byte(prefix)) {
		return nil, errors.New(`evm: verify header: the record does not start with {"block":`)
	}
	return VerifyHeader(raw[len(prefix):])
}
