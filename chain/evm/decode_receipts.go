package evm

import (
	"bytes"
	"errors"
	"fmt"
	"math"
)

// Receipts and their logs: each receipt is checked against the transaction
// at its position (hash, index, block hash and number) and its fields are
// joined into that transaction's row.

func (st *decodeState) receipts() error {
	s := &st.sc
	n := 0
	if !s.Null() {
		var err error
		n, err = s.eachElem(func(i int) error {
			if i >= len(st.txs) {
				return fmt.Errorf("%w: more receipts than the block's %d transactions", ErrReceiptMismatch, len(st.txs))
			}
			if err := st.receipt(i); err != nil {
				return inElem("", i, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if n != len(st.txs) {
		return fmt.Errorf("%w: %d receipts for %d transactions", ErrReceiptMismatch, n, len(st.txs))
	}
	return nil
}

// Required fields of a receipt.
const (
	reqRcptTxHash = 1 << iota
	reqRcptGasUsed
	reqRcptCumulative
	reqAllRcpt = 1<<iota - 1
)

var rcptRequired = []string{"transactionHash", "gasUsed", "cumulativeGasUsed"}

func (st *decodeState) receipt(i int) error {
	s := &st.sc
	t := &st.txs[i]
	row := t.row
	var have int
	var h [32]byte
	for key := range s.object() {
		if s.Null() {
			continue
		}
		if string(key) == "logs" {
			if err := st.logs(t, i); err != nil {
				return inField("logs", err)
			}
			continue
		}
		v, ok, err := s.member(key)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		switch string(key) {
		case "transactionHash":
			have |= reqRcptTxHash
			if bytes.Equal(v, t.hashText) {
				break
			}
			if err := parseFixed(h[:], v); err != nil {
				return inField("transactionHash", err)
			}
			if h != t.hash {
				return inField("transactionHash", fmt.Errorf("%w: 0x%x is not the hash of transaction %d (0x%x)",
					ErrReceiptMismatch, h, i, t.hash))
			}
		case "blockHash":
			err = st.checkBlockHash(v)
		case "blockNumber":
			err = st.checkBlockNumber(v)
		case "transactionIndex":
			err = checkIndex(v, i)
		case "status":
			var x uint64
			if x, err = parseUint(v); err == nil {
				if x > 1 {
					err = badHex(v, errRange)
				}
				row[colTxStatus] = int16(x)
			}
		case "gasUsed":
			err = st.putInt64(row, colTxGasUsed, v, &have, reqRcptGasUsed)
		case "cumulativeGasUsed":
			err = st.putInt64(row, colTxCumulativeGasUsed, v, &have, reqRcptCumulative)
		case "effectiveGasPrice":
			err = st.putNumeric(row, colTxEffectiveGasPrice, v)
		case "contractAddress":
			err = st.putFixed(row, colTxContractAddress, v, 20, nil, 0)
		case "blobGasUsed":
			err = st.putInt64(row, colTxBlobGasUsed, v, nil, 0)
		case "blobGasPrice":
			err = st.putNumeric(row, colTxBlobGasPrice, v)
		case "root": // pre-Byzantium: the state root after the transaction
			err = st.putFixed(row, colTxRoot, v, 32, nil, 0)
		case "logsBloom":
			// Any length: a chain that sends no real bloom must not stop
			// the export for it.
			err = st.putBytes(row, colTxLogsBloom, v)
		}
		if err != nil {
			return inField(string(key), err)
		}
	}
	return s.closed(rcptRequired, have, reqAllRcpt)
}

func (st *decodeState) checkBlockHash(v []byte) error {
	if bytes.Equal(v, st.hashText) {
		return nil
	}
	var h [32]byte
	if err := parseFixed(h[:], v); err != nil {
		return err
	}
	if h != st.blockHash {
		return fmt.Errorf("%w: block hash 0x%x is not 0x%x", ErrReceiptMismatch, h, st.blockHash)
	}
	return nil
}

func (st *decodeState) checkBlockNumber(v []byte) error {
	x, err := parseUint(v)
	if err != nil {
		return err
	}
	if x != st.height {
		return fmt.Errorf("%w: block number %d is not %d", ErrReceiptMismatch, x, st.height)
	}
	return nil
}

func checkIndex(v []byte, i int) error {
	x, err := parseUint(v)
	if err != nil {
		return err
	}
	if x != uint64(i) {
		return fmt.Errorf("%w: transaction index %d is not %d", ErrReceiptMismatch, x, i)
	}
	return nil
}

func (st *decodeState) logs(t *txState, txIndex int) error {
	_, err := st.sc.eachIn(func(i int) error { return st.log(t, txIndex) })
	return err
}

// Required fields of a log.
const (
	reqLogAddress = 1 << iota
	reqLogTopics
	reqLogData
	reqLogIndex
	reqAllLog = 1<<iota - 1
)

var logRequired = []string{"address", "topics", "data", "logIndex"}

func (st *decodeState) log(t *txState, txIndex int) error {
	s := &st.sc
	row := st.rows.Row(TableLogs)
	row[colLogBlockNumber] = st.heightVal
	row[colLogBlockTime] = st.timeVal
	row[colLogTxIndex] = t.indexVal
	row[colLogTxHash] = t.hashVal
	var have int
	for key := range s.object() {
		if string(key) == "topics" {
			if err := st.topics(row); err != nil {
				return inField("topics", err)
			}
			have |= reqLogTopics
			continue
		}
		v, ok, err := s.member(key) // removed, and anything new
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		switch string(key) {
		case "address":
			err = st.putFixed(row, colLogAddress, v, 20, &have, reqLogAddress)
		case "data":
			err = st.putBytes(row, colLogData, v)
			have |= reqLogData
		case "logIndex":
			var x uint64
			if x, err = parseUint(v); err == nil {
				if int64(x) <= st.lastLog || x > math.MaxInt32 {
					err = fmt.Errorf("log index %d does not follow %d", x, st.lastLog)
				}
				st.lastLog = int64(x)
				row[colLogIndex] = st.rows.BoxInt32(int32(x))
				have |= reqLogIndex
			}
		case "transactionHash":
			var h [32]byte
			if bytes.Equal(v, t.hashText) {
				break
			}
			if err = parseFixed(h[:], v); err == nil && h != t.hash {
				err = fmt.Errorf("%w: 0x%x is not the hash of transaction %d (0x%x)", ErrReceiptMismatch, h, txIndex, t.hash)
			}
		case "transactionIndex":
			err = checkIndex(v, txIndex)
		case "blockHash":
			err = st.checkBlockHash(v)
		case "blockNumber":
			err = st.checkBlockNumber(v)
		}
		if err != nil {
			return inField(string(key), err)
		}
	}
	return s.closed(logRequired, have, reqAllLog)
}

func (st *decodeState) topics(row []any) error {
	s := &st.sc
	_, err := s.eachElem(func(i int) error {
		if i >= 4 {
			return errors.New("more than 4 topics")
		}
		v, err := s.str()
		if err != nil {
			return inElem("", i, err)
		}
		b, err := st.slab.fixed(v, 32)
		if err != nil {
			return inElem("", i, err)
		}
		row[colLogTopic0+i] = st.rows.BoxBytes(b)
		return nil
	})
	return err
}
