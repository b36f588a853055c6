package evm

import (
	"errors"
	"fmt"
	"hash"
	"sync"

	"github.com/blockhaul/blockhaul/chain"
	"golang.org/x/crypto/sha3"
)

// This file re-encodes what a record carries beside its header — the
// transactions, the receipts, the withdrawals — the way the chain commits
// to them (go-ethereum core/types: transaction*.go, receipt.go,
// withdrawal.go), so that VerifyBlock can check each transaction's hash
// and the header's roots.

// verifier is the scratch of one VerifyBlock call, pooled.
type verifier struct {
	hdr    headerRLP
	height int64 // -1 until the block's number is known

	w         rlpWriter
	lw        rlpWriter // a receipt's logs
	arena     []byte    // the items' encodings, back to back
	txs       []span    // each transaction's encoding in arena
	txTypes   []uint64  // each transaction's type
	haveTxs   bool      // the block object has a transactions list
	claimed   [][32]byte
	wds       []span
	haveWds   bool
	haveRcpts bool
	rcpts     []span
	unknown   int // index of the first transaction of an unknown type; -1 for none

	values [][]byte
	trie   trieHasher
	k      hash.Hash
	sum    [32]byte
}

type span struct{ start, end int }

var verifiers sync.Pool // *verifier

func (v *verifier) reset() {
	v.hdr.vals = [len(headerFields)][]byte{}
	v.hdr.have = 0
	v.height = -1
	v.arena = v.arena[:0]
	v.txs = v.txs[:0]
	v.txTypes = v.txTypes[:0]
	v.claimed = v.claimed[:0]
	v.wds = v.wds[:0]
	v.haveWds = false
	v.haveTxs = false
	v.haveRcpts = false
	v.rcpts = v.rcpts[:0]
	v.unknown = -1
}

// record reads and checks a whole raw record (see VerifyBlock).
func (v *verifier) record(raw []byte) ([]byte, error) {
	claimed, height, err := v.read(raw)
	if err != nil {
		return nil, err
	}
	hash, err := v.hdr.check(claimed, height)
	if err != nil {
		return nil, err
	}
	// Transactions first: a wrong one is named by its index.
	for i, sp := range v.txs {
		if i == v.unknown {
			continue
		}
		sum := v.keccak(v.arena[sp.start:sp.end])
		if sum != v.claimed[i] {
			return nil, v.mismatch(fmt.Sprintf("transaction %d hash", i), v.claimed[i][:], sum)
		}
	}
	for _, r := range v.roots() {
		if !r.check {
			continue
		}
		if root := v.root(r.items); string(root[:]) != string(v.hdr.vals[r.field]) {
			return nil, v.mismatch(headerFields[r.field].key, v.hdr.vals[r.field], root)
		}
	}
	return hash, nil
}

// read reads a whole raw record: its header into v.hdr, and its
// transactions, withdrawals and receipts re-encoded into v.arena.
func (v *verifier) read(raw []byte) (claimed []byte, height uint64, err error) {
	v.reset()
	s := newScanner(raw)
	_, err = walkRecord(s, func() (err error) {
		if claimed, height, err = v.hdr.read(s, v); err == nil {
			v.height = int64(height)
		}
		return err
	}, func() error { return v.readReceipts(s) })
	if err != nil {
		return nil, 0, err
	}
	return claimed, height, nil
}

// readReceipts reads the receipts at the cursor, once the block is read:
// encoded when the block has transactions of known types to check them
// against, skipped otherwise.
func (v *verifier) readReceipts(s *scanner) error {
	if !v.haveTxs || v.unknown >= 0 {
		return s.skip()
	}
	v.haveRcpts = true
	return v.receipts(s)
}

// headerRoot is one root of the header and the items it commits to.
type headerRoot struct {
	field int // index in headerFields
	items []span
	check bool // the record carries the items, and the header the root
}

// roots returns the header's roots in the order they are checked.
func (v *verifier) roots() [3]headerRoot {
	has := func(i int) bool { return v.hdr.have&(1<<i) != 0 }
	// A block object without its transactions (a header) has no contents to
	// check, nor receipts to check against them.
	txs := v.haveTxs && v.unknown < 0
	return [3]headerRoot{
		{FieldTxRoot, v.txs, txs && has(FieldTxRoot)},
		{FieldWithdrawalsRoot, v.wds, v.haveWds && has(FieldWithdrawalsRoot)},
		{FieldReceiptsRoot, v.rcpts, v.haveRcpts && has(FieldReceiptsRoot)},
	}
}

// root returns the root of the trie of items by rlp(index).
func (v *verifier) root(items []span) [32]byte {
	v.values = v.values[:0]
	for _, sp := range items {
		v.values = append(v.values, v.arena[sp.start:sp.end])
	}
	return v.trie.indexRoot(v.values)
}

func (v *verifier) keccak(b []byte) [32]byte {
	if v.k == nil {
		v.k = sha3.NewLegacyKeccak256()
	}
	v.k.Reset()
	v.k.Write(b)
	v.k.Sum(v.sum[:0])
	return v.sum
}

func (v *verifier) mismatch(what string, claimed []byte, computed [32]byte) error {
	return &chain.HashMismatchError{Family: chain.FamilyEVM, Height: uint64(v.height), What: what,
		Claimed: append([]byte(nil), claimed...), Computed: append([]byte(nil), computed[:]...)}
}

// keep appends the writer's value to the arena and returns where it is.
func (v *verifier) keep() span {
	start := len(v.arena)
	v.arena = append(v.arena, v.w.b...)
	return span{start, len(v.arena)}
}

// txFields are the values of one transaction object, as written.
type txFields struct {
	hash, typ, chainID, nonce, gasPrice, tip, maxFee, gas, to, value, input, blobFee, v, r, s, yParity []byte
	accessList, authList, blobHashes                                                                   []byte // JSON arrays
}

func (v *verifier) transactions(s *scanner) error {
	if s.Null() {
		return nil
	}
	v.haveTxs = true
	_, err := s.eachIn(func(i int) error { return v.transaction(s, i) })
	return err
}

func (v *verifier) transaction(s *scanner, i int) error {
	if s.Peek() != '{' {
		return errors.New("want a transaction object (fetch blocks with full transactions)")
	}
	var f txFields
	for key := range s.object() {
		if s.Null() {
			continue
		}
		var dst *[]byte
		switch string(key) {
		case "accessList", "authorizationList", "blobVersionedHashes":
			start := s.Pos()
			if err := s.skip(); err != nil {
				return inField(string(key), err)
			}
			switch string(key) {
			case "accessList":
				f.accessList = s.Bytes()[start:s.Pos()]
			case "authorizationList":
				f.authList = s.Bytes()[start:s.Pos()]
			default:
				f.blobHashes = s.Bytes()[start:s.Pos()]
			}
			continue
		case "hash":
			dst = &f.hash
		case "type":
			dst = &f.typ
		case "chainId":
			dst = &f.chainID
		case "nonce":
			dst = &f.nonce
		case "gasPrice":
			dst = &f.gasPrice
		case "maxPriorityFeePerGas":
			dst = &f.tip
		case "maxFeePerGas":
			dst = &f.maxFee
		case "gas":
			dst = &f.gas
		case "to":
			dst = &f.to
		case "value":
			dst = &f.value
		case "input":
			dst = &f.input
		case "data": // an older name of input
			if f.input == nil {
				dst = &f.input
			}
		case "maxFeePerBlobGas":
			dst = &f.blobFee
		case "v":
			dst = &f.v
		case "r":
			dst = &f.r
		case "s":
			dst = &f.s
		case "yParity":
			dst = &f.yParity
		}
		if err := s.memberInto(key, dst); err != nil {
			return err
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	if f.hash == nil {
		return &fieldError{path: "hash", err: errMissing}
	}
	var claimed [32]byte
	if err := parseFixed(claimed[:], f.hash); err != nil {
		return inField("hash", err)
	}
	typ := uint64(0)
	if f.typ != nil {
		var err error
		if typ, err = parseUint(f.typ); err != nil {
			return inField("type", err)
		}
	}
	v.claimed = append(v.claimed, claimed)
	v.txTypes = append(v.txTypes, typ)
	if typ > 4 {
		if v.unknown < 0 {
			v.unknown = i
		}
		v.txs = append(v.txs, span{})
		return nil
	}
	if err := v.encodeTx(&f, typ); err != nil {
		return err
	}
	v.txs = append(v.txs, v.keep())
	return nil
}

// encodeTx writes the canonical encoding of a transaction of type typ
// (0 to 4) into v.w: legacy RLP, or the type byte and the RLP of the
// typed payload (EIP-2718). Absent fields are errors naming them.
func (v *verifier) encodeTx(f *txFields, typ uint64) error {
	w := &v.w
	w.reset()
	if typ > 0 {
		w.b = append(w.b, byte(typ))
	}
	w.open()
	q := func(name string, val []byte) error {
		if val == nil {
			return &fieldError{path: name, err: errMissing}
		}
		if err := w.quantity(val); err != nil {
			return inField(name, err)
		}
		return nil
	}
	var err error
	step := func(fn func() error) {
		if err == nil {
			err = fn()
		}
	}
	to := func() error {
		if f.to == nil {
			w.b = append(w.b, 0x80) // a creation
			return nil
		}
		return inFieldIf("to", w.bytes(f.to, 20))
	}
	input := func() error {
		if f.input == nil {
			return &fieldError{path: "input", err: errMissing}
		}
		return inFieldIf("input", w.bytes(f.input, 0))
	}
	parity := func() error {
		if f.yParity != nil {
			return q("yParity", f.yParity)
		}
		return q("v", f.v)
	}
	if typ == 0 {
		step(func() error { return q("nonce", f.nonce) })
		step(func() error { return q("gasPrice", f.gasPrice) })
		step(func() error { return q("gas", f.gas) })
		step(to)
		step(func() error { return q("value", f.value) })
		step(input)
		step(func() error { return q("v", f.v) })
	} else {
		step(func() error { return q("chainId", f.chainID) })
		step(func() error { return q("nonce", f.nonce) })
		if typ == 1 {
			step(func() error { return q("gasPrice", f.gasPrice) })
		} else {
			step(func() error { return q("maxPriorityFeePerGas", f.tip) })
			step(func() error { return q("maxFeePerGas", f.maxFee) })
		}
		step(func() error { return q("gas", f.gas) })
		step(to)
		step(func() error { return q("value", f.value) })
		step(input)
		step(func() error { return inFieldIf("accessList", v.accessList(f.accessList)) })
		switch typ {
		case 3:
			step(func() error { return q("maxFeePerBlobGas", f.blobFee) })
			step(func() error { return inFieldIf("blobVersionedHashes", v.hashList(f.blobHashes)) })
		case 4:
			step(func() error { return inFieldIf("authorizationList", v.authList(f.authList)) })
		}
		step(parity)
	}
	step(func() error { return q("r", f.r) })
	step(func() error { return q("s", f.s) })
	if err != nil {
		return err
	}
	w.close()
	return nil
}

func inFieldIf(name string, err error) error {
	if err == nil {
		return nil
	}
	return inField(name, err)
}

// accessList encodes [[address, [storageKey, ...]], ...]; an absent list
// is empty.
func (v *verifier) accessList(list []byte) error {
	w := &v.w
	w.open()
	if list != nil {
		s := newScanner(list)
		_, err := s.eachElem(func(i int) error {
			var addr, keys []byte
			for key := range s.object() {
				var err error
				switch string(key) {
				case "address":
					if addr, err = s.str(); err != nil {
						return inElem("", i, inField("address", err))
					}
				case "storageKeys":
					start := s.Pos()
					if err := s.skip(); err != nil {
						return inElem("", i, inField("storageKeys", err))
					}
					keys = s.Bytes()[start:s.Pos()]
				default:
					if err := s.skip(); err != nil {
						return inElem("", i, err)
					}
				}
			}
			if err := s.Err(); err != nil {
				return inElem("", i, err)
			}
			if addr == nil {
				return inElem("", i, &fieldError{path: "address", err: errMissing})
			}
			w.open()
			if err := w.bytes(addr, 20); err != nil {
				return inElem("", i, inField("address", err))
			}
			if err := v.hashList(keys); err != nil {
				return inElem("", i, inField("storageKeys", err))
			}
			w.close()
			return nil
		})
		if err != nil {
			return err
		}
	}
	w.close()
	return nil
}

// hashList encodes a JSON array of 32-byte hashes as a list; absent or
// null is empty.
func (v *verifier) hashList(list []byte) error { return hashListInto(&v.w, list) }

func hashListInto(w *rlpWriter, list []byte) error {
	w.open()
	if list != nil {
		s := newScanner(list)
		if !s.Null() {
			_, err := s.eachElem(func(i int) error {
				h, err := s.str()
				if err == nil {
					err = w.bytes(h, 32)
				}
				if err != nil {
					return inElem("", i, err)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	w.close()
	return nil
}

// authList encodes an EIP-7702 authorization list:
// [[chainId, address, nonce, yParity, r, s], ...].
func (v *verifier) authList(list []byte) error {
	w := &v.w
	w.open()
	if list != nil {
		s := newScanner(list)
		_, err := s.eachIn(func(i int) error { return v.authorization(s) })
		if err != nil {
			return err
		}
	}
	w.close()
	return nil
}

func (v *verifier) authorization(s *scanner) error {
	var chainID, addr, nonce, parity, vv, r, sig []byte
	for key := range s.object() {
		var dst *[]byte
		switch string(key) {
		case "chainId":
			dst = &chainID
		case "address":
			dst = &addr
		case "nonce":
			dst = &nonce
		case "yParity":
			dst = &parity
		case "v":
			dst = &vv
		case "r":
			dst = &r
		case "s":
			dst = &sig
		}
		if s.Null() {
			continue
		}
		if err := s.memberInto(key, dst); err != nil {
			return err
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	if parity == nil {
		parity = vv
	}
	w := &v.w
	w.open()
	for _, fld := range [...]struct {
		name string
		val  []byte
		size int // 0: a quantity
	}{{"chainId", chainID, 0}, {"address", addr, 20}, {"nonce", nonce, 0}, {"yParity", parity, 0}, {"r", r, 0}, {"s", sig, 0}} {
		if fld.val == nil {
			return &fieldError{path: fld.name, err: errMissing}
		}
		var err error
		if fld.size > 0 {
			err = w.bytes(fld.val, fld.size)
		} else {
			err = w.quantity(fld.val)
		}
		if err != nil {
			return inField(fld.name, err)
		}
	}
	w.close()
	return nil
}

// withdrawals encodes each withdrawal as [index, validatorIndex, address,
// amount] (EIP-4895).
func (v *verifier) withdrawals(s *scanner) error {
	if s.Null() {
		return nil
	}
	v.haveWds = true
	_, err := s.eachIn(func(i int) error { return v.withdrawal(s) })
	return err
}

func (v *verifier) withdrawal(s *scanner) error {
	var vals [4][]byte // index, validatorIndex, address, amount
	for key := range s.object() {
		var err error
		j := -1
		switch string(key) {
		case "index":
			j = 0
		case "validatorIndex":
			j = 1
		case "address":
			j = 2
		case "amount":
			j = 3
		}
		if j < 0 {
			if err := s.skip(); err != nil {
				return inField(string(key), err)
			}
			continue
		}
		if vals[j], err = s.str(); err != nil {
			return inField(string(key), err)
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	w := &v.w
	w.reset()
	w.open()
	for j, name := range wdRequired {
		if vals[j] == nil {
			return &fieldError{path: name, err: errMissing}
		}
		var err error
		if j == 2 {
			err = w.bytes(vals[j], 20)
		} else {
			err = w.quantity(vals[j])
		}
		if err != nil {
			return inField(name, err)
		}
	}
	w.close()
	v.wds = append(v.wds, v.keep())
	return nil
}

// receipts encodes each receipt as its type byte (when typed) and
// [status or post-state root, cumulativeGasUsed, logsBloom, logs], each log
// [address, [topic, ...], data] (go-ethereum core/types/receipt.go).
func (v *verifier) receipts(s *scanner) error {
	if s.Null() {
		return nil
	}
	_, err := s.eachIn(func(i int) error { return v.receipt(s, i) })
	return err
}

func (v *verifier) receipt(s *scanner, i int) error {
	var typ, status, root, cum, bloom []byte
	haveLogs := false
	for key := range s.object() {
		if s.Null() {
			continue
		}
		var dst *[]byte
		switch string(key) {
		case "logs":
			// Encoded as they are read, into a writer of their own: the
			// receipt's other fields, which come first in its encoding, may
			// follow in the object.
			v.lw.reset()
			v.lw.open()
			if _, err := s.eachElem(func(j int) error {
				if err := v.log(s); err != nil {
					return inElem("logs", j, err)
				}
				return nil
			}); err != nil {
				return err
			}
			v.lw.close()
			haveLogs = true
			continue
		case "type":
			dst = &typ
		case "status":
			dst = &status
		case "root":
			dst = &root
		case "cumulativeGasUsed":
			dst = &cum
		case "logsBloom":
			dst = &bloom
		}
		if err := s.memberInto(key, dst); err != nil {
			return err
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	// The receipt's own type, as the record has it; the transaction's when
	// the node leaves it out.
	t := uint64(0)
	switch {
	case typ != nil:
		var err error
		if t, err = parseUint(typ); err != nil {
			return inField("type", err)
		}
		if t > 0x7f {
			return inField("type", badHex(typ, errRange))
		}
	case i < len(v.txTypes):
		t = v.txTypes[i]
	}
	w := &v.w
	w.reset()
	if t > 0 {
		w.b = append(w.b, byte(t))
	}
	w.open()
	switch {
	case root != nil: // pre-Byzantium: the state root after the transaction
		if err := w.bytes(root, 32); err != nil {
			return inField("root", err)
		}
	case status != nil:
		x, err := parseUint(status)
		if err == nil && x > 1 {
			err = badHex(status, errRange)
		}
		if err != nil {
			return inField("status", err)
		}
		if x == 1 {
			w.b = append(w.b, 0x01)
		} else {
			w.b = append(w.b, 0x80)
		}
	default:
		return &fieldError{path: "status", err: errMissing}
	}
	if cum == nil {
		return &fieldError{path: "cumulativeGasUsed", err: errMissing}
	}
	if err := w.quantity(cum); err != nil {
		return inField("cumulativeGasUsed", err)
	}
	if bloom == nil {
		return &fieldError{path: "logsBloom", err: errMissing}
	}
	if err := w.bytes(bloom, 256); err != nil {
		return inField("logsBloom", err)
	}
	if haveLogs {
		w.raw(v.lw.b)
	} else {
		w.b = append(w.b, 0xc0) // no logs
	}
	w.close()
	v.rcpts = append(v.rcpts, v.keep())
	return nil
}

func (v *verifier) log(s *scanner) error {
	var addr, topics, data []byte
	for key := range s.object() {
		var err error
		switch string(key) {
		case "address":
			if addr, err = s.str(); err != nil {
				return inField("address", err)
			}
		case "data":
			if data, err = s.str(); err != nil {
				return inField("data", err)
			}
		case "topics":
			start := s.Pos()
			if err := s.skip(); err != nil {
				return inField("topics", err)
			}
			topics = s.Bytes()[start:s.Pos()]
		default:
			if err := s.skip(); err != nil {
				return inField(string(key), err)
			}
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	w := &v.lw
	w.open()
	if addr == nil {
		return &fieldError{path: "address", err: errMissing}
	}
	if err := w.bytes(addr, 20); err != nil {
		return inField("address", err)
	}
	if err := hashListInto(w, topics); err != nil {
		return inField("topics", err)
	}
	if data == nil {
		return &fieldError{path: "data", err: errMissing}
	}
	if err := w.bytes(data, 0); err != nil {
		return inField("data", err)
	}
	w.close()
	return nil
}
