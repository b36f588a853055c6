package evm

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5/pgtype"
)

// ErrReceiptMismatch is wrapped by a DecodeError when a record's receipts
// are not those of its block: another block's hash or number, another
// transaction's hash, or a different count.
var ErrReceiptMismatch = errors.New("evm: receipts do not belong to the block")

// ErrHeightMismatch is wrapped by a DecodeError when a record holds a block
// of another height than the one it is decoded as.
var ErrHeightMismatch = errors.New("evm: record holds another height")

// DecodeError reports a raw record that cannot be decoded, naming the
// height and the field (a path such as "block.transactions[3].value").
type DecodeError struct {
	Height uint64
	Field  string
	Err    error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("evm: decode block %d: %s: %v", e.Height, e.Field, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// fieldError carries the path of a failing field up the parse; the path is
// only built on the way out of an error, never on the hot path.
type fieldError struct {
	path string
	err  error
}

func (e *fieldError) Error() string { return e.path + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func inField(path string, err error) error {
	if fe, ok := err.(*fieldError); ok {
		if strings.HasPrefix(fe.path, "[") {
			fe.path = path + fe.path
		} else {
			fe.path = path + "." + fe.path
		}
		return fe
	}
	return &fieldError{path: path, err: err}
}

func inElem(name string, i int, err error) error {
	return inField(fmt.Sprintf("%s[%d]", name, i), err)
}

// Decoder turns staged EVM records (see MarshalRecord) into rows of the
// blocks, transactions, logs and withdrawals tables. It holds no per-call state and is
// safe for concurrent use.
//
// It reads the record with a hand-written scanner that visits only the
// fields that become columns and hex-decodes byte fields straight into the
// memory of the rows (chain.Rows.Bytes), boxing values in it too: a block
// costs no allocation per value, and none at all once the rows are reused.
type Decoder struct {
	pool sync.Pool // *decodeState
}

// NewDecoder returns an EVM decoder.
func NewDecoder() *Decoder { return &Decoder{} }

// Family reports chain.FamilyEVM.
func (d *Decoder) Family() chain.Family { return chain.FamilyEVM }

// Tables returns the export tables in the order Decode fills them.
func (d *Decoder) Tables() []chain.Table { return Tables() }

// Decode appends the rows of the block at height to rows: one blocks row,
// one transactions row per transaction (receipt fields joined in) and one
// logs row per log. A record that is malformed, holds another height, or
// whose receipts are not the block's returns a *DecodeError and leaves
// rows as it found them.
func (d *Decoder) Decode(height uint64, raw []byte, rows *chain.Rows) error {
	lens := rows.Lens()
	st, _ := d.pool.Get().(*decodeState)
	if st == nil {
		st = &decodeState{}
	}
	st.reset(height, raw, rows)
	err := st.record()
	st.release()
	d.pool.Put(st)
	if err != nil {
		rows.Truncate(lens)
		de := &DecodeError{Height: height, Field: "record", Err: err}
		if fe, ok := err.(*fieldError); ok {
			de.Field, de.Err = fe.path, fe.err
		}
		return de
	}
	return nil
}

// txState is what a transaction's receipt and logs are checked against.
type txState struct {
	row         []any
	hash        [32]byte
	hashText    []byte // as written in the record, for cheap comparisons
	hashVal     any    // the hash bytea, shared by the transaction and its logs
	indexVal    any
	blockHash   []byte // as written; checked once the block's hash is known
	blockNumber uint64
	index       uint64
	seen        uint8 // seenBlockHash | seenBlockNumber | seenIndex
}

const (
	seenBlockHash = 1 << iota
	seenBlockNumber
	seenIndex
)

type decodeState struct {
	height    uint64
	sc        scanner
	rows      *chain.Rows
	slab      slab
	heightVal any
	timeVal   any // the block's timestamp, boxed once for every child row
	blockRow  []any
	blockHash [32]byte
	hashText  []byte // as written in the record, for cheap comparisons
	txs       []txState
	lastLog   int64
	firstWd   int // the block's first row in the withdrawals table
}

func (st *decodeState) reset(height uint64, raw []byte, rows *chain.Rows) {
	st.height = height
	st.sc.Reset(raw)
	st.rows = rows
	st.slab = slab{rows: rows}
	st.heightVal = rows.BoxInt64(int64(height))
	st.timeVal = nil
	st.blockRow = nil
	st.hashText = nil
	st.txs = st.txs[:0]
	st.lastLog = -1
	st.firstWd = rows.Len(TableWithdrawals)
}

// release drops references into the caller's rows and input before the
// state goes back to the pool.
func (st *decodeState) release() {
	clear(st.txs)
	st.txs = st.txs[:0]
	st.sc.Reset(nil)
	st.rows = nil
	st.slab = slab{}
	st.blockRow = nil
	st.heightVal = nil
	st.timeVal = nil
}

func (st *decodeState) record() error {
	sawReceipts, err := walkRecord(&st.sc, st.block, st.receipts)
	if err == nil && !sawReceipts {
		err = &fieldError{path: "receipts", err: errMissing}
	}
	return err
}

var errMissing = errors.New("missing")

// Required fields of a block.
const (
	reqNumber = 1 << iota
	reqHash
	reqParentHash
	reqTimestamp
	reqMiner
	reqGasLimit
	reqGasUsed
	reqTransactions
	reqAllBlock = 1<<iota - 1
)

var blockRequired = []string{"number", "hash", "parentHash", "timestamp", "miner", "gasLimit", "gasUsed", "transactions"}

func missingField(names []string, have, all int) error {
	for i, n := range names {
		if all&(1<<i) != 0 && have&(1<<i) == 0 {
			return &fieldError{path: n, err: errMissing}
		}
	}
	return errMissing
}

func (st *decodeState) block() error {
	s := &st.sc
	if s.Null() {
		return errors.New("block is null (not found on the node?)")
	}
	row := st.rows.Row(TableBlocks)
	st.blockRow = row
	row[colBlockNumber] = st.heightVal
	var have int
	for key := range s.object() {
		if string(key) == "transactions" {
			if err := st.transactions(); err != nil {
				return inField("transactions", err)
			}
			have |= reqTransactions
			continue
		}
		if s.Null() {
			continue
		}
		if string(key) == "withdrawals" {
			if err := st.withdrawals(); err != nil {
				return inField("withdrawals", err)
			}
			continue
		}
		if s.Peek() != '"' {
			// uncles: not exported.
			if err := s.skip(); err != nil {
				return inField(string(key), err)
			}
			continue
		}
		if err := st.blockField(key, row, &have); err != nil {
			return inField(string(key), err)
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	if have != reqAllBlock {
		return missingField(blockRequired, have, reqAllBlock)
	}
	row[colBlockTxCount] = st.rows.BoxInt32(int32(len(st.txs)))
	st.timeVal = row[colBlockTimestamp]
	for i := range st.txs {
		st.txs[i].row[colTxBlockTime] = st.timeVal
	}
	for _, w := range st.rows.Table(TableWithdrawals)[st.firstWd:] {
		w[colWdBlockTime] = st.timeVal
	}
	// Transactions may precede the block hash in the object; check them now.
	for i := range st.txs {
		t := &st.txs[i]
		if t.seen&seenBlockHash != 0 {
			if err := st.checkBlockHash(t.blockHash); err != nil {
				return inElem("transactions", i, inField("blockHash", err))
			}
		}
		if t.seen&seenBlockNumber != 0 && t.blockNumber != st.height {
			return inElem("transactions", i, inField("blockNumber", fmt.Errorf("%w: %d is not the block's number %d",
				ErrReceiptMismatch, t.blockNumber, st.height)))
		}
	}
	return nil
}

func (st *decodeState) blockField(key []byte, row []any, have *int) error {
	s := &st.sc
	v, err := s.str()
	if err != nil {
		return err
	}
	switch string(key) {
	case "number":
		h, err := parseUint(v)
		if err != nil {
			return err
		}
		if h != st.height {
			return fmt.Errorf("%w: block %d", ErrHeightMismatch, h)
		}
		*have |= reqNumber
	case "hash":
		if err := parseFixed(st.blockHash[:], v); err != nil {
			return err
		}
		st.hashText = v
		b := st.slab.alloc(32)
		copy(b, st.blockHash[:])
		row[colBlockHash] = st.rows.BoxBytes(b)
		*have |= reqHash
	case "parentHash":
		return st.putFixed(row, colBlockParentHash, v, 32, have, reqParentHash)
	case "timestamp":
		ts, err := parseInt64(v)
		if err != nil {
			return err
		}
		row[colBlockTimestamp] = time.Unix(ts, 0).UTC()
		*have |= reqTimestamp
	case "miner":
		return st.putFixed(row, colBlockMiner, v, 20, have, reqMiner)
	case "gasLimit":
		return st.putInt64(row, colBlockGasLimit, v, have, reqGasLimit)
	case "gasUsed":
		return st.putInt64(row, colBlockGasUsed, v, have, reqGasUsed)
	case "baseFeePerGas":
		return st.putNumeric(row, colBlockBaseFee, v)
	case "size":
		return st.putInt64(row, colBlockSize, v, nil, 0)
	case "extraData":
		return st.putBytes(row, colBlockExtraData, v)
	case "nonce":
		return st.putBytes(row, colBlockNonce, v)
	case "difficulty":
		return st.putNumeric(row, colBlockDifficulty, v)
	case "sha3Uncles":
		return st.putFixed(row, colBlockSha3Uncles, v, 32, nil, 0)
	case "logsBloom":
		return st.putFixed(row, colBlockLogsBloom, v, 256, nil, 0)
	case "stateRoot":
		return st.putFixed(row, colBlockStateRoot, v, 32, nil, 0)
	case "transactionsRoot":
		return st.putFixed(row, colBlockTxRoot, v, 32, nil, 0)
	case "receiptsRoot":
		return st.putFixed(row, colBlockReceiptsRoot, v, 32, nil, 0)
	case "mixHash":
		return st.putFixed(row, colBlockMixHash, v, 32, nil, 0)
	case "withdrawalsRoot":
		return st.putFixed(row, colBlockWithdrawalsRoot, v, 32, nil, 0)
	case "blobGasUsed":
		return st.putInt64(row, colBlockBlobGasUsed, v, nil, 0)
	case "excessBlobGas":
		return st.putInt64(row, colBlockExcessBlobGas, v, nil, 0)
	case "parentBeaconBlockRoot":
		return st.putFixed(row, colBlockParentBeaconRoot, v, 32, nil, 0)
	case "requestsHash":
		return st.putFixed(row, colBlockRequestsHash, v, 32, nil, 0)
	case "totalDifficulty":
		return st.putNumeric(row, colBlockTotalDifficulty, v)
	}
	return nil
}

func (st *decodeState) putFixed(row []any, col int, v []byte, n int, have *int, bit int) error {
	b, err := st.slab.fixed(v, n)
	return st.putSlab(row, col, b, err, have, bit)
}

// putWord stores a quantity of up to 256 bits (a signature's r or s) as
// 32 big-endian bytes.
func (st *decodeState) putWord(row []any, col int, v []byte) error {
	b, err := st.slab.word(v)
	return st.putSlab(row, col, b, err, nil, 0)
}

func (st *decodeState) putBytes(row []any, col int, v []byte) error {
	b, err := st.slab.bytes(v)
	return st.putSlab(row, col, b, err, nil, 0)
}

// putSlab stores b, carved from the slab, in row[col] and sets bit in have
// (when have is not nil) — or returns err, the carving's.
func (st *decodeState) putSlab(row []any, col int, b []byte, err error, have *int, bit int) error {
	if err != nil {
		return err
	}
	row[col] = st.rows.BoxBytes(b)
	mark(have, bit)
	return nil
}

func (st *decodeState) putInt64(row []any, col int, v []byte, have *int, bit int) error {
	x, err := parseInt64(v)
	if err != nil {
		return err
	}
	row[col] = st.rows.BoxInt64(x)
	mark(have, bit)
	return nil
}

// mark sets bit in the required members seen, when they are counted.
func mark(have *int, bit int) {
	if have != nil {
		*have |= bit
	}
}

func (st *decodeState) putNumeric(row []any, col int, v []byte) error {
	small, large, err := parseNumeric(v)
	if err != nil {
		return err
	}
	if large != nil {
		row[col] = pgtype.Numeric{Int: large, Valid: true}
	} else {
		row[col] = st.rows.BoxInt64(small)
	}
	return nil
}

func (st *decodeState) transactions() error {
	s := &st.sc
	if s.Null() {
		return nil
	}
	_, err := s.eachElem(func(int) error {
		i := len(st.txs)
		if i >= math.MaxInt32 {
			return errRange
		}
		if err := st.transaction(i); err != nil {
			return inElem("", i, err)
		}
		return nil
	})
	return err
}

// Required fields of a transaction.
const (
	reqTxHash = 1 << iota
	reqTxFrom
	reqTxValue
	reqTxInput
	reqTxNonce
	reqTxGas
	reqAllTx = 1<<iota - 1
)

var txRequired = []string{"hash", "from", "value", "input", "nonce", "gas"}

func (st *decodeState) transaction(i int) error {
	s := &st.sc
	if s.Peek() != '{' {
		return errors.New("want a transaction object (fetch blocks with full transactions)")
	}
	st.txs = append(st.txs, txState{})
	t := &st.txs[i]
	row := st.rows.Row(TableTransactions)
	t.row = row
	t.indexVal = st.rows.BoxInt32(int32(i))
	row[colTxBlockNumber] = st.heightVal
	row[colTxIndex] = t.indexVal
	row[colTxType] = int16(0)
	var have int
	for key := range s.object() {
		if s.Null() {
			continue // to of a creation, fields a client sends as null
		}
		if string(key) == "blobVersionedHashes" {
			hs, err := st.hashList()
			if err != nil {
				return inField("blobVersionedHashes", err)
			}
			row[colTxBlobHashes] = hs
			continue
		}
		if s.Peek() != '"' {
			col := -1
			switch string(key) {
			case "accessList":
				col = colTxAccessList
			case "authorizationList":
				col = colTxAuthorizationList
			}
			start := s.Pos()
			if err := s.skip(); err != nil {
				return inField(string(key), err)
			}
			if col >= 0 {
				// Kept as the node wrote it, but for white space: a record
				// pretty-printed decodes to the same rows.
				b := st.slab.alloc(s.Pos() - start)
				row[col] = st.rows.BoxBytes(b[:compactJSON(b, s.Bytes()[start:s.Pos()])])
			}
			continue
		}
		if err := st.txField(t, key, row, &have); err != nil {
			return inField(string(key), err)
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	if have != reqAllTx {
		return missingField(txRequired, have, reqAllTx)
	}
	if t.seen&seenIndex != 0 && t.index != uint64(i) {
		return inField("transactionIndex", fmt.Errorf("%d at position %d", t.index, i))
	}
	return nil
}

func (st *decodeState) txField(t *txState, key []byte, row []any, have *int) error {
	v, err := st.sc.str()
	if err != nil {
		return err
	}
	switch string(key) {
	case "hash":
		if err := parseFixed(t.hash[:], v); err != nil {
			return err
		}
		b := st.slab.alloc(32)
		copy(b, t.hash[:])
		t.hashVal = st.rows.BoxBytes(b)
		t.hashText = v
		row[colTxHash] = t.hashVal
		*have |= reqTxHash
	case "from":
		return st.putFixed(row, colTxFrom, v, 20, have, reqTxFrom)
	case "to":
		return st.putFixed(row, colTxTo, v, 20, nil, 0)
	case "value":
		*have |= reqTxValue
		return st.putNumeric(row, colTxValue, v)
	case "input":
		*have |= reqTxInput
		return st.putBytes(row, colTxInput, v)
	case "nonce":
		return st.putInt64(row, colTxNonce, v, have, reqTxNonce)
	case "gas":
		return st.putInt64(row, colTxGas, v, have, reqTxGas)
	case "gasPrice":
		return st.putNumeric(row, colTxGasPrice, v)
	case "maxFeePerGas":
		return st.putNumeric(row, colTxMaxFee, v)
	case "maxPriorityFeePerGas":
		return st.putNumeric(row, colTxMaxPriorityFee, v)
	case "maxFeePerBlobGas":
		return st.putNumeric(row, colTxMaxFeePerBlobGas, v)
	case "chainId":
		return st.putNumeric(row, colTxChainID, v)
	case "v":
		return st.putNumeric(row, colTxV, v)
	case "r":
		return st.putWord(row, colTxR, v)
	case "s":
		return st.putWord(row, colTxS, v)
	case "yParity":
		x, err := parseUint(v)
		if err != nil {
			return err
		}
		if x > 1 {
			return badHex(v, errRange)
		}
		row[colTxYParity] = int16(x)
	case "type":
		x, err := parseUint(v)
		if err != nil {
			return err
		}
		if x > math.MaxInt16 {
			return badHex(v, errRange)
		}
		row[colTxType] = int16(x)
	case "blockHash":
		t.blockHash = v
		t.seen |= seenBlockHash
	case "blockNumber":
		x, err := parseUint(v)
		if err != nil {
			return err
		}
		t.blockNumber = x
		t.seen |= seenBlockNumber
	case "transactionIndex":
		x, err := parseUint(v)
		if err != nil {
			return err
		}
		t.index = x
		t.seen |= seenIndex
	}
	return nil
}

// Required fields of a withdrawal.
const (
	reqWdIndex = 1 << iota
	reqWdValidator
	reqWdAddress
	reqWdAmount
	reqAllWd = 1<<iota - 1
)

var wdRequired = []string{"index", "validatorIndex", "address", "amount"}

// withdrawals reads the block's withdrawals list into withdrawals rows; their
// block_time is set once the block's timestamp is known.
func (st *decodeState) withdrawals() error {
	s := &st.sc
	_, err := s.eachIn(func(i int) error { return st.withdrawal() })
	return err
}

func (st *decodeState) withdrawal() error {
	s := &st.sc
	row := st.rows.Row(TableWithdrawals)
	row[colWdBlockNumber] = st.heightVal
	var have int
	for key := range s.object() {
		v, ok, err := s.member(key)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		switch string(key) {
		case "index":
			err = st.putInt64(row, colWdIndex, v, &have, reqWdIndex)
		case "validatorIndex":
			err = st.putInt64(row, colWdValidatorIndex, v, &have, reqWdValidator)
		case "address":
			err = st.putFixed(row, colWdAddress, v, 20, &have, reqWdAddress)
		case "amount":
			err = st.putInt64(row, colWdAmount, v, &have, reqWdAmount)
		}
		if err != nil {
			return inField(string(key), err)
		}
	}
	return s.closed(wdRequired, have, reqAllWd)
}

// compactJSON copies the JSON text src (well-formed: the scanner has read
// it) into dst without the white space between its tokens, and returns the
// length written. dst must be at least as long as src.
func compactJSON(dst, src []byte) int {
	n := 0
	inString, escaped := false, false
	for _, c := range src {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == ' ', c == '\t', c == '\n', c == '\r':
			continue
		case c == '"':
			inString = true
		}
		dst[n] = c
		n++
	}
	return n
}

// hashList reads an array of 32-byte hashes.
func (st *decodeState) hashList() ([][]byte, error) {
	s := &st.sc
	out := make([][]byte, 0, 6)
	_, err := s.eachElem(func(i int) error {
		v, err := s.str()
		if err != nil {
			return err
		}
		b, err := st.slab.fixed(v, 32)
		if err != nil {
			return inElem("", i, err)
		}
		out = append(out, b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
