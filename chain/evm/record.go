// Package evm is blockhaul's Ethereum-family chain: the raw record format
// staged for one block, its RPC source and block verification, and the
// decoder that turns them into rows of the blocks, transactions and logs
// tables (whose DDL it also owns). Its synthetic chain is package
// chain/evmsynth.
//
// A raw record is one JSON object holding what an execution client returns
// for a block, byte for byte:
//
//	{"block": <eth_getBlockByNumber(h, true)>, "receipts": <eth_getBlockReceipts(h)>}
//
// Keeping the node's own JSON lets a schema change be re-exported from
// staging without refetching anything.
package evm

import (
	"encoding/json"
	"errors"
	"fmt"
)

// GenesisHeight is the height of an EVM chain's first block, its genesis:
// a range starts there unless it says otherwise. The genesis block has no
// transactions; its state root commits to the genesis allocations and,
// on a chain with Shanghai active from genesis, its withdrawals root is the
// empty trie's. It is verified and exported like every other block.
const GenesisHeight = 0

// MarshalRecord builds the raw record of one block from the result of
// eth_getBlockByNumber (with full transactions) and the result of
// eth_getBlockReceipts (a JSON array). Both are embedded unchanged; a nil
// or empty receipts stands for an empty list.
func MarshalRecord(block, receipts json.RawMessage) []byte {
	if len(receipts) == 0 {
		receipts = json.RawMessage("[]")
	}
	out := make([]byte, 0, len(block)+len(receipts)+len(`{"block":,"receipts":}`))
	out = append(out, `{"block":`...)
	out = append(out, block...)
	out = append(out, `,"receipts":`...)
	out = append(out, receipts...)
	return append(out, '}')
}

// MarshalRecordReceipts is MarshalRecord for receipts fetched one by one
// (eth_getTransactionReceipt), given in transaction order.
func MarshalRecordReceipts(block json.RawMessage, receipts []json.RawMessage) []byte {
	n := 2
	for _, r := range receipts {
		n += len(r) + 1
	}
	arr := make([]byte, 0, n)
	arr = append(arr, '[')
	for i, r := range receipts {
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, r...)
	}
	arr = append(arr, ']')
	return MarshalRecord(block, arr)
}

// BlockIdentity reads the height, hash and parent hash of the block in a
// raw record without decoding the rest, for sources that must check that a
// node returned the block that was asked for.
//
// It is strict about what it reads: the record must be whole (every object
// and array closed, nothing after it), so a record cut short after the
// three fields is refused, and every hex value must carry the "0x" prefix
// (errPrefix; "0X" is refused as everywhere else in the package). It does
// not validate the contents of strings and numbers it skips: records are
// built from answers the JSON-RPC layer has validated whole.
func BlockIdentity(raw []byte) (hash, parentHash []byte, height uint64, err error) {
	hash, parentHash, height, err = blockIdentity(raw)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("evm: block identity: %w", err)
	}
	return hash, parentHash, height, nil
}

func blockIdentity(raw []byte) (hash, parentHash []byte, height uint64, err error) {
	s := newScanner(raw)
	_, err = walkRecord(s, func() (err error) {
		hash, parentHash, height, err = s.identityFields()
		return err
	}, nil)
	if err != nil {
		return nil, nil, 0, err
	}
	return hash, parentHash, height, nil
}

// walkRecord is the one walk of a raw record's members, for every reader
// of it (the decoder, the block verification, BlockIdentity): with the
// scanner at the record's start, it calls block at the block object, which
// must be there once, then receipts at the receipts (once, if there; nil
// skips them) — after the block even where the record writes them first,
// since they are read against it — and checks that nothing follows the
// record. Its errors, and the callbacks', name the member
// ("block.transactions[3].value"); sawReceipts says whether there were
// receipts.
func walkRecord(s *scanner, block, receipts func() error) (sawReceipts bool, err error) {
	sawBlock, receiptsAt := false, -1
	readReceipts := func() error {
		if receipts == nil {
			return inFieldIf("receipts", s.skip())
		}
		return inFieldIf("receipts", receipts())
	}
	for key := range s.object() {
		switch string(key) {
		case "block":
			if sawBlock {
				return false, &fieldError{path: "block", err: errors.New("duplicate field")}
			}
			sawBlock = true
			if err := block(); err != nil {
				return false, inField("block", err)
			}
			if receiptsAt >= 0 {
				resume := s.Pos()
				s.Seek(receiptsAt)
				if err := readReceipts(); err != nil {
					return false, err
				}
				s.Seek(resume)
			}
		case "receipts":
			if sawReceipts {
				return false, &fieldError{path: "receipts", err: errors.New("duplicate field")}
			}
			sawReceipts = true
			if sawBlock {
				if err := readReceipts(); err != nil {
					return false, err
				}
				continue
			}
			receiptsAt = s.Pos()
			if err := s.skip(); err != nil {
				return false, inField("receipts", err)
			}
		default:
			if err := s.skip(); err != nil {
				return false, inField(string(key), err)
			}
		}
	}
	if err := s.Err(); err != nil {
		return false, err
	}
	if !sawBlock {
		return false, &fieldError{path: "block", err: errMissing}
	}
	return sawReceipts, s.end()
}

// identityFields reads the block object at the cursor, to its end, and
// returns its hash, parent hash and number.
func (s *scanner) identityFields() (hash, parentHash []byte, height uint64, err error) {
	if s.Null() {
		return nil, nil, 0, errors.New("block is null (not found on the node?)")
	}
	if err := s.beginObject(); err != nil {
		return nil, nil, 0, err
	}
	const all = 7
	seen, m := 0, 0
	hash, parentHash = make([]byte, 32), make([]byte, 32)
	for {
		key, done, err := s.nextKey(&m)
		if err != nil {
			return nil, nil, 0, err
		}
		if done {
			if seen != all {
				return nil, nil, 0, missingField([]string{"number", "hash", "parentHash"}, seen, all)
			}
			return hash, parentHash, height, nil
		}
		var v []byte
		switch string(key) {
		case "number", "hash", "parentHash":
			if v, err = s.str(); err != nil {
				return nil, nil, 0, inField(string(key), err)
			}
		default:
			if err := s.skip(); err != nil {
				return nil, nil, 0, err
			}
			continue
		}
		switch string(key) {
		case "number":
			height, err = parseUint(v)
			seen |= 1
		case "hash":
			err = parseFixed(hash, v)
			seen |= 2
		case "parentHash":
			err = parseFixed(parentHash, v)
			seen |= 4
		}
		if err != nil {
			return nil, nil, 0, inField(string(key), err)
		}
	}
}
