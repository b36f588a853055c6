package evm

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestDecodeBlobFieldsOfARealNode decodes the blob transaction and receipt
// geth sent on the execution-apis test chain (testdata/execution-apis) into
// the blob columns: max_fee_per_blob_gas and blob_versioned_hashes from the
// transaction, blob_gas_used and blob_gas_price from its receipt. The
// block around them is a minimal one of the same hash and height (the
// decoder checks the receipt against it, not the header's own hash).
func TestDecodeBlobFieldsOfARealNode(t *testing.T) {
	block := `{"number":"0x3","hash":"0x1732a5fe86d54098c431fa4fea34387b650e41dbff65ca554370028172fcdb6a",` +
		`"parentHash":"0x` + zeros(64) + `","timestamp":"0x1e","miner":"0x` + zeros(40) + `","gasLimit":"0x23f3e20",` +
		`"gasUsed":"0xca9c","blobGasUsed":"0x20000","excessBlobGas":"0x0","transactions":[` + string(execAPIs(t, "tx_blob.json")) + `]}`
	raw := []byte(`{"block":` + block + `,"receipts":[` + string(execAPIs(t, "receipt_blob.json")) + `]}`)
	rows := decodeOne(t, NewDecoder(), 3, raw)
	tx := rows.Table(TableTransactions)[0]
	hash, _ := hex.DecodeString("015a4cab4911426699ed34483de6640cf55a568afc5c5edffdcbd8bcd4452f68")
	if hs, _ := tx[colTxBlobHashes].([][]byte); len(hs) != 1 || !bytes.Equal(hs[0], hash) {
		t.Errorf("blob_versioned_hashes %x, want [%x]", tx[colTxBlobHashes], hash)
	}
	for _, c := range []struct {
		name string
		col  int
		want any
	}{
		{"type", colTxType, int16(3)},
		{"max_fee_per_blob_gas", colTxMaxFeePerBlobGas, int64(0x20000)},
		{"blob_gas_used", colTxBlobGasUsed, int64(0x20000)},
		{"blob_gas_price", colTxBlobGasPrice, int64(1)},
		{"max_fee_per_gas", colTxMaxFee, int64(0x281d620e)},
		{"status", colTxStatus, int16(1)},
	} {
		if tx[c.col] != c.want {
			t.Errorf("%s = %#v, want %#v", c.name, tx[c.col], c.want)
		}
	}
	if b := rows.Table(TableBlocks)[0]; b[colBlockBlobGasUsed] != int64(0x20000) || b[colBlockExcessBlobGas] != int64(0) {
		t.Errorf("block blob_gas_used %v excess_blob_gas %v", b[colBlockBlobGasUsed], b[colBlockExcessBlobGas])
	}
	// A transaction of another type has none of them.
	rows = decodeOne(t, NewDecoder(), 20, MarshalRecord(execAPIs(t, "block_20.json"), execAPIs(t, "receipts_20.json")))
	for i, tx := range rows.Table(TableTransactions) {
		for _, col := range []int{colTxMaxFeePerBlobGas, colTxBlobHashes, colTxBlobGasUsed, colTxBlobGasPrice} {
			if tx[col] != nil {
				t.Errorf("type %v transaction %d: blob column %d = %v, want NULL", tx[colTxType], i, col, tx[col])
			}
		}
	}
}

// TestSyntheticBlobTransactions: the synthetic chain carries blob
// transactions whose fields agree as a real chain's do — the block's
// blob_gas_used is the sum of its receipts', each receipt uses 2^17 gas
// per versioned hash at the block's blob gas price, which the
// transaction's max_fee_per_blob_gas covers, and each hash has version 1.
func TestSyntheticBlobTransactions(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 3})
	d := NewDecoder()
	blobTxs := 0
	for h := uint64(1); h <= 20; h++ {
		rows := decodeOne(t, d, h, s.Record(h))
		block := rows.Table(TableBlocks)[0]
		var sum int64
		var price any
		for i, tx := range rows.Table(TableTransactions) {
			if tx[colTxType] != int16(3) {
				continue
			}
			blobTxs++
			hs := tx[colTxBlobHashes].([][]byte)
			used := tx[colTxBlobGasUsed].(int64)
			if len(hs) == 0 || used != int64(len(hs))*blobGas {
				t.Fatalf("block %d tx %d: %d hashes, blob gas used %d", h, i, len(hs), used)
			}
			for _, vh := range hs {
				if len(vh) != 32 || vh[0] != 0x01 {
					t.Fatalf("block %d tx %d: versioned hash %x", h, i, vh)
				}
			}
			if price != nil && tx[colTxBlobGasPrice] != price {
				t.Fatalf("block %d: blob gas prices %v and %v", h, price, tx[colTxBlobGasPrice])
			}
			price = tx[colTxBlobGasPrice]
			if numeric(t, tx[colTxMaxFeePerBlobGas]) < numeric(t, price) {
				t.Fatalf("block %d tx %d: max fee per blob gas %v below the price %v", h, i, tx[colTxMaxFeePerBlobGas], price)
			}
			sum += used
		}
		if block[colBlockBlobGasUsed] != sum {
			t.Fatalf("block %d: blob_gas_used %v, its transactions use %d", h, block[colBlockBlobGasUsed], sum)
		}
	}
	if blobTxs < 5 {
		t.Fatalf("%d blob transactions in 20 blocks", blobTxs)
	}
}

func numeric(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case int64:
		return float64(x)
	case pgtype.Numeric:
		f, _ := x.Float64Value()
		return f.Float64
	}
	t.Fatalf("not a number: %#v", v)
	return 0
}
