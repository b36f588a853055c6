package evm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/chaintest"
	"github.com/jackc/pgx/v5/pgtype"
)

// Compile-time check that Decoder has the shape export.Decoder needs,
// without importing export.
var _ interface {
	Family() chain.Family
	Tables() []chain.Table
	Decode(uint64, []byte, *chain.Rows) error
} = (*Decoder)(nil)

func decodeOne(t *testing.T, d *Decoder, h uint64, raw []byte) *chain.Rows {
	t.Helper()
	rows := chain.NewRows(d.Tables())
	if err := d.Decode(h, raw, rows); err != nil {
		t.Fatalf("decode %d: %v", h, err)
	}
	return rows
}

func TestDecodeCountsMatchGenerator(t *testing.T) {
	d := NewDecoder()
	for _, cfg := range []SyntheticConfig{{Seed: 1}, {Seed: 8, TxPerBlock: 4, LogsPerBlock: 7}} {
		s := NewSynthetic(cfg)
		rows := chain.NewRows(d.Tables())
		var wantTx, wantLogs int
		for h := uint64(0); h <= 60; h++ {
			if err := d.Decode(h, s.Record(h), rows); err != nil {
				t.Fatalf("%+v: %v", cfg, err)
			}
			txs, logs := s.ExpectedCounts(h)
			wantTx += txs
			wantLogs += logs
			if got := rows.Table(TableBlocks)[h][colBlockTxCount]; got != int32(txs) {
				t.Fatalf("block %d: transaction_count %v, want %d", h, got, txs)
			}
		}
		if rows.Len(TableBlocks) != 61 || rows.Len(TableTransactions) != wantTx || rows.Len(TableLogs) != wantLogs {
			t.Fatalf("%+v: rows %d/%d/%d, want 61/%d/%d", cfg, rows.Len(TableBlocks),
				rows.Len(TableTransactions), rows.Len(TableLogs), wantTx, wantLogs)
		}
	}
}

// norm renders a decoded value for comparison with the reference.
func norm(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return "0x" + hex.EncodeToString(v)
	case int16, int32, int64:
		return fmt.Sprint(v)
	case pgtype.Numeric:
		if !v.Valid || v.Exp != 0 {
			return fmt.Sprintf("bad numeric %+v", v)
		}
		return v.Int.String()
	case time.Time:
		return strconv.FormatInt(v.Unix(), 10)
	case [][]byte:
		s := make([]string, len(v))
		for i, b := range v {
			s[i] = "0x" + hex.EncodeToString(b)
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	return fmt.Sprintf("unexpected %T", v)
}

// refValue renders a JSON field the way norm renders the decoded column:
// the reference decoding, through encoding/json.
func refValue(t *testing.T, obj map[string]json.RawMessage, key, kind string) string {
	t.Helper()
	raw, ok := obj[key]
	if !ok || string(raw) == "null" {
		switch {
		case kind == "type":
			return "0"
		}
		return "NULL"
	}
	if kind == "json" {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			t.Fatal(err)
		}
		return "0x" + hex.EncodeToString(b.Bytes())
	}
	if kind == "list" {
		var hs []string
		if err := json.Unmarshal(raw, &hs); err != nil {
			t.Fatal(err)
		}
		return "[" + strings.ToLower(strings.Join(hs, ",")) + "]"
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	switch kind {
	case "bytes":
		return strings.ToLower(s)
	case "status":
		if s == "0x0" {
			return "0"
		}
		return "1"
	case "word": // a quantity as 32 big-endian bytes
		n, ok := new(big.Int).SetString(s[2:], 16)
		if !ok {
			t.Fatalf("%s: bad quantity %q", key, s)
		}
		return "0x" + hex.EncodeToString(n.FillBytes(make([]byte, 32)))
	default: // quantity
		n, ok := new(big.Int).SetString(s[2:], 16)
		if !ok {
			t.Fatalf("%s: bad quantity %q", key, s)
		}
		return n.String()
	}
}

type refCol struct{ col, key, kind string }

var (
	refBlock = []refCol{
		{"number", "number", "q"}, {"hash", "hash", "bytes"}, {"parent_hash", "parentHash", "bytes"},
		{"timestamp", "timestamp", "q"}, {"miner", "miner", "bytes"}, {"gas_limit", "gasLimit", "q"},
		{"gas_used", "gasUsed", "q"}, {"base_fee_per_gas", "baseFeePerGas", "q"}, {"size", "size", "q"},
		{"extra_data", "extraData", "bytes"}, {"nonce", "nonce", "bytes"}, {"difficulty", "difficulty", "q"},
		{"sha3_uncles", "sha3Uncles", "bytes"}, {"logs_bloom", "logsBloom", "bytes"},
		{"state_root", "stateRoot", "bytes"}, {"transactions_root", "transactionsRoot", "bytes"},
		{"receipts_root", "receiptsRoot", "bytes"}, {"mix_hash", "mixHash", "bytes"},
		{"withdrawals_root", "withdrawalsRoot", "bytes"}, {"blob_gas_used", "blobGasUsed", "q"},
		{"excess_blob_gas", "excessBlobGas", "q"}, {"parent_beacon_block_root", "parentBeaconBlockRoot", "bytes"},
		{"requests_hash", "requestsHash", "bytes"}, {"total_difficulty", "totalDifficulty", "q"},
	}
	refTx = []refCol{
		{"hash", "hash", "bytes"}, {"type", "type", "type"}, {"nonce", "nonce", "q"},
		{"from_address", "from", "bytes"}, {"to_address", "to", "bytes"}, {"value", "value", "q"},
		{"input", "input", "bytes"}, {"gas", "gas", "q"}, {"gas_price", "gasPrice", "q"},
		{"max_fee_per_gas", "maxFeePerGas", "q"}, {"max_priority_fee_per_gas", "maxPriorityFeePerGas", "q"},
		{"max_fee_per_blob_gas", "maxFeePerBlobGas", "q"}, {"blob_versioned_hashes", "blobVersionedHashes", "list"},
		{"chain_id", "chainId", "q"}, {"v", "v", "q"}, {"r", "r", "word"}, {"s", "s", "word"}, {"y_parity", "yParity", "q"},
		{"access_list", "accessList", "json"}, {"authorization_list", "authorizationList", "json"},
	}
	refReceipt = []refCol{
		{"status", "status", "status"}, {"gas_used", "gasUsed", "q"}, {"cumulative_gas_used", "cumulativeGasUsed", "q"},
		{"effective_gas_price", "effectiveGasPrice", "q"}, {"contract_address", "contractAddress", "bytes"},
		{"blob_gas_used", "blobGasUsed", "q"}, {"blob_gas_price", "blobGasPrice", "q"}, {"root", "root", "bytes"},
		{"logs_bloom", "logsBloom", "bytes"},
	}
)

// TestDecodeMatchesReference decodes records with the scanner and with
// encoding/json and compares every column of every row.
func TestDecodeMatchesReference(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 21})
	for h := uint64(0); h <= 8; h++ {
		checkAgainstReference(t, NewDecoder(), h, s.Record(h))
	}
}

func checkAgainstReference(t *testing.T, d *Decoder, h uint64, raw []byte) {
	t.Helper()
	tables := d.Tables()
	rows := decodeOne(t, d, h, raw)
	block, txs, receipts := chaintest.ParseGethRecord(t, raw)
	check := func(table int, row []any, cols []refCol, obj map[string]json.RawMessage, what string) {
		t.Helper()
		for _, c := range cols {
			got := norm(row[chaintest.ColumnIndex(t, tables[table], c.col)])
			want := refValue(t, obj, c.key, c.kind)
			if got != want {
				t.Fatalf("block %d %s %s: decoded %s, reference %s", h, what, c.col, got, want)
			}
		}
	}
	check(TableBlocks, rows.Table(TableBlocks)[0], refBlock, block, "block")
	var wds []map[string]json.RawMessage
	if w := block["withdrawals"]; len(w) > 0 && string(w) != "null" {
		if err := json.Unmarshal(w, &wds); err != nil {
			t.Fatal(err)
		}
	}
	if rows.Len(TableWithdrawals) != len(wds) {
		t.Fatalf("block %d: %d withdrawals rows, reference %d", h, rows.Len(TableWithdrawals), len(wds))
	}
	for i, w := range wds {
		row := rows.Table(TableWithdrawals)[i]
		check(TableWithdrawals, row, []refCol{{"withdrawal_index", "index", "q"}, {"validator_index", "validatorIndex", "q"},
			{"address", "address", "bytes"}, {"amount", "amount", "q"}}, w, fmt.Sprintf("withdrawal %d", i))
		if row[colWdBlockNumber] != int64(h) || row[colWdBlockTime] != rows.Table(TableBlocks)[0][colBlockTimestamp] {
			t.Fatalf("block %d withdrawal %d: keyed as %v at %v", h, i, row[colWdBlockNumber], row[colWdBlockTime])
		}
	}
	if got := rows.Table(TableBlocks)[0][colBlockTxCount]; got != int32(len(txs)) {
		t.Fatalf("block %d: transaction_count %v, want %d", h, got, len(txs))
	}
	logIdx := 0
	for i := range txs {
		row := rows.Table(TableTransactions)[i]
		check(TableTransactions, row, refTx, txs[i], fmt.Sprintf("tx %d", i))
		check(TableTransactions, row, refReceipt, receipts[i], fmt.Sprintf("receipt %d", i))
		if row[colTxBlockNumber] != int64(h) || row[colTxIndex] != int32(i) {
			t.Fatalf("block %d tx %d: keyed as %v/%v", h, i, row[colTxBlockNumber], row[colTxIndex])
		}
		var logs []map[string]json.RawMessage
		if err := json.Unmarshal(receipts[i]["logs"], &logs); err != nil {
			t.Fatal(err)
		}
		for _, l := range logs {
			lrow := rows.Table(TableLogs)[logIdx]
			logIdx++
			check(TableLogs, lrow, []refCol{{"log_index", "logIndex", "q"}, {"address", "address", "bytes"},
				{"data", "data", "bytes"}, {"transaction_hash", "transactionHash", "bytes"}}, l, "log")
			var topics []string
			_ = json.Unmarshal(l["topics"], &topics)
			for k := range 4 {
				want := "NULL"
				if k < len(topics) {
					want = topics[k]
				}
				if got := norm(lrow[colLogTopic0+k]); got != want {
					t.Fatalf("block %d log %d topic%d: %s, want %s", h, logIdx-1, k, got, want)
				}
			}
			if lrow[colLogTxIndex] != int32(i) || lrow[colLogBlockNumber] != int64(h) {
				t.Fatalf("block %d log %d: keyed as %v/%v", h, logIdx-1, lrow[colLogBlockNumber], lrow[colLogTxIndex])
			}
		}
	}
	if logIdx != rows.Len(TableLogs) {
		t.Fatalf("block %d: %d log rows, reference %d", h, rows.Len(TableLogs), logIdx)
	}
}

// TestDecodeNullability checks, per transaction type, which columns are
// NULL, and that every type and a wei value beyond int64 occur.
func TestDecodeNullability(t *testing.T) {
	d := NewDecoder()
	s := NewSynthetic(SyntheticConfig{Seed: 4})
	seen := map[int16]int{}
	var creations, bigValues int
	for h := uint64(1); h <= 10; h++ {
		rows := decodeOne(t, d, h, s.Record(h))
		for i, row := range rows.Table(TableTransactions) {
			typ := row[colTxType].(int16)
			seen[typ]++
			null := func(c int) bool { return row[c] == nil }
			want := map[int]bool{
				colTxMaxFee:            typ < 2,
				colTxMaxPriorityFee:    typ < 2,
				colTxMaxFeePerBlobGas:  typ != 3,
				colTxBlobHashes:        typ != 3,
				colTxBlobGasUsed:       typ != 3,
				colTxBlobGasPrice:      typ != 3,
				colTxGasPrice:          false,
				colTxEffectiveGasPrice: false,
				colTxStatus:            false,
				colTxValue:             false,
				colTxInput:             false,
			}
			for c, w := range want {
				if null(c) != w {
					t.Fatalf("block %d tx %d type %d: column %s NULL = %v, want %v",
						h, i, typ, d.Tables()[TableTransactions].Columns[c].Name, null(c), w)
				}
			}
			if typ == 3 && len(row[colTxBlobHashes].([][]byte)) == 0 {
				t.Fatalf("block %d tx %d: blob transaction without hashes", h, i)
			}
			if null(colTxTo) != !null(colTxContractAddress) {
				t.Fatalf("block %d tx %d: to %v and contract address %v", h, i, row[colTxTo], row[colTxContractAddress])
			}
			if null(colTxTo) {
				creations++
			}
			if n, ok := row[colTxValue].(pgtype.Numeric); ok {
				if n.Int.IsInt64() {
					t.Fatalf("block %d tx %d: numeric %v fits int64", h, i, n.Int)
				}
				bigValues++
			}
			if in := row[colTxInput].([]byte); in == nil {
				t.Fatalf("block %d tx %d: input is nil, want empty bytea", h, i)
			}
		}
	}
	for typ := int16(0); typ <= 4; typ++ {
		if seen[typ] == 0 {
			t.Errorf("no transaction of type %d decoded: %v", typ, seen)
		}
	}
	if creations == 0 || bigValues == 0 {
		t.Errorf("creations %d, values beyond int64 %d: want both", creations, bigValues)
	}
}

// TestDecodeOlderShapes decodes hand-written records of pre-London and
// pre-Byzantium shape: absent fields become NULL, not errors.
func TestDecodeOlderShapes(t *testing.T) {
	const h = "0x1111111111111111111111111111111111111111111111111111111111111111"
	const tx = "0x2222222222222222222222222222222222222222222222222222222222222222"
	raw := `{"receipts":[{"blockHash":"` + h + `","blockNumber":"0x2a","contractAddress":null,` +
		`"cumulativeGasUsed":"0x5208","from":"0x3333333333333333333333333333333333333333","gasUsed":"0x5208",` +
		`"logs":[],"logsBloom":"0x00","root":"0x4444444444444444444444444444444444444444444444444444444444444444","to":null,"transactionHash":"` + tx + `","transactionIndex":"0x0"}],` +
		` "block": {"number":"0x2a","hash":"` + h + `","parentHash":"` + h + `","timestamp":"0x55ba4224",` +
		`"miner":"0x3333333333333333333333333333333333333333","gasLimit":"0x1388","gasUsed":"0x0",` +
		`"difficulty":"0x3ff800000","totalDifficulty":"0x400000000","uncles":[],` +
		`"transactions":[{"hash":"` + tx + `","from":"0x3333333333333333333333333333333333333333",` +
		`"to":null,"value":"0x1bc16d674ec80000","input":"0x","nonce":"0x0","gas":"0x5208","gasPrice":"0xba43b7400",` +
		`"blockHash":"` + h + `","blockNumber":"0x2a","transactionIndex":"0x0"}]}}`
	d := NewDecoder()
	rows := decodeOne(t, d, 42, []byte(raw))
	b := rows.Table(TableBlocks)[0]
	for _, c := range []int{colBlockBaseFee, colBlockWithdrawalsRoot, colBlockBlobGasUsed, colBlockExcessBlobGas,
		colBlockParentBeaconRoot, colBlockRequestsHash, colBlockSize, colBlockMixHash} {
		if b[c] != nil {
			t.Errorf("block column %s = %v, want NULL", d.Tables()[TableBlocks].Columns[c].Name, b[c])
		}
	}
	if b[colBlockDifficulty] != int64(0x3ff800000) || b[colBlockTotalDifficulty] != int64(0x400000000) {
		t.Errorf("difficulty %v, total difficulty %v", b[colBlockDifficulty], b[colBlockTotalDifficulty])
	}
	if tr := rows.Table(TableTransactions)[0]; tr[colTxChainID] != nil || tr[colTxYParity] != nil || tr[colTxAccessList] != nil {
		t.Errorf("pre-EIP-155 legacy tx: chain_id %v, y_parity %v, access_list %v; want NULL", tr[colTxChainID], tr[colTxYParity], tr[colTxAccessList])
	}
	if ts := b[colBlockTimestamp].(time.Time); ts.Unix() != 0x55ba4224 || ts.Location() != time.UTC {
		t.Errorf("timestamp %v", ts)
	}
	tr := rows.Table(TableTransactions)[0]
	if tr[colTxType] != int16(0) || tr[colTxStatus] != nil || tr[colTxEffectiveGasPrice] != nil || tr[colTxTo] != nil {
		t.Errorf("legacy tx: type %v status %v effective price %v to %v", tr[colTxType], tr[colTxStatus],
			tr[colTxEffectiveGasPrice], tr[colTxTo])
	}
	if tr[colTxValue] != int64(2e18) {
		t.Errorf("value %v", tr[colTxValue])
	}
	if r, _ := tr[colTxRoot].([]byte); !bytes.Equal(r, bytes.Repeat([]byte{0x44}, 32)) {
		t.Errorf("root %x", tr[colTxRoot])
	}
	if in := tr[colTxInput].([]byte); in == nil || len(in) != 0 {
		t.Errorf("input %#v, want empty non-nil", in)
	}
}

// TestDecodePreByzantiumReceipt decodes mainnet's first transaction (block
// 46,147) with its receipt as nodes serve it: a state root and no status,
// or, from providers that synthesise one, both. The transaction and
// receipt are mainnet's; the header fields but number and hash are
// placeholders (the decoder does not check them).
func TestDecodePreByzantiumReceipt(t *testing.T) {
	const (
		blockHash = "0x4e3a3754410177e6937ef1f84bba68ea139e8d1a2258c5f85db9f1cd715a1bdd"
		txHash    = "0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060"
		root      = "0x96a8e009d2b88b1483e6941e6812e32263b05683fac202abc622a3e31aed1957"
	)
	receipt := `{"transactionHash":"` + txHash + `","blockHash":"` + blockHash + `","blockNumber":"0xb443",` +
		`"logsBloom":"0x` + strings.Repeat("00", 256) + `","gasUsed":"0x5208","root":"` + root + `","contractAddress":null,` +
		`"cumulativeGasUsed":"0x5208","transactionIndex":"0x0","from":"0xa1e4380a3b1f749673e270229993ee55f35663b4",` +
		`"to":"0x5df9b87991262f6ba471f09758cde1c0fc1de734","type":"0x0","effectiveGasPrice":"0x2d79883d2000","logs":[]}`
	block := `{"number":"0xb443","hash":"` + blockHash + `","parentHash":"0x` + strings.Repeat("11", 32) + `",` +
		`"timestamp":"0x55c42659","miner":"0x` + strings.Repeat("22", 20) + `","gasLimit":"0x2fefd8","gasUsed":"0x5208",` +
		`"transactions":[{"hash":"` + txHash + `","from":"0xa1e4380a3b1f749673e270229993ee55f35663b4",` +
		`"to":"0x5df9b87991262f6ba471f09758cde1c0fc1de734","value":"0x7a69","input":"0x","nonce":"0x0","gas":"0x5208",` +
		`"gasPrice":"0x2d79883d2000","blockHash":"` + blockHash + `","blockNumber":"0xb443","transactionIndex":"0x0","type":"0x0"}]}`
	wantRoot, _ := hex.DecodeString(root[2:])
	for _, c := range []struct {
		name    string
		receipt string
		status  any
	}{
		{"canonical", receipt, nil},
		{"synthesised status", strings.Replace(receipt, `"logs":[]`, `"logs":[],"status":"0x1"`, 1), int16(1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := decodeOne(t, NewDecoder(), 46147, []byte(`{"block":`+block+`,"receipts":[`+c.receipt+`]}`))
			tr := rows.Table(TableTransactions)[0]
			if r, _ := tr[colTxRoot].([]byte); !bytes.Equal(r, wantRoot) {
				t.Errorf("root %x, want %s", tr[colTxRoot], root)
			}
			if tr[colTxStatus] != c.status {
				t.Errorf("status %v, want %v", tr[colTxStatus], c.status)
			}
		})
	}
	// Byzantium and later: status, no root.
	s := NewSynthetic(SyntheticConfig{Seed: 2})
	rows := decodeOne(t, NewDecoder(), 5, s.Record(5))
	for _, tr := range rows.Table(TableTransactions) {
		if tr[colTxRoot] != nil || tr[colTxStatus] == nil {
			t.Fatalf("post-Byzantium tx: root %v status %v", tr[colTxRoot], tr[colTxStatus])
		}
	}
}

// TestDecodeFormatting: the same record pretty-printed, with members in
// another order (receipts first) and escaped keys, decodes to the same rows.
func TestDecodeFormatting(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 6, TxPerBlock: 12, LogsPerBlock: 30})
	raw := s.Record(9)
	d := NewDecoder()
	want := decodeOne(t, d, 9, raw)

	var indented bytes.Buffer
	if err := json.Indent(&indented, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	var parts struct{ Block, Receipts json.RawMessage }
	if err := json.Unmarshal(raw, &parts); err != nil {
		t.Fatal(err)
	}
	receiptsFirst := []byte(`{"extra":[1,{"a":null}],"receipts":` + string(parts.Receipts) + `,"block":` + string(parts.Block) + `}`)
	escaped := bytes.Replace(raw, []byte(`"gasUsed":`), []byte(`"gas\u0055sed":`), -1)

	for name, variant := range map[string][]byte{"indented": indented.Bytes(), "receipts first": receiptsFirst, "escaped keys": escaped} {
		got := decodeOne(t, d, 9, variant)
		for ti := range d.Tables() {
			if got.Len(ti) != want.Len(ti) {
				t.Fatalf("%s: table %d has %d rows, want %d", name, ti, got.Len(ti), want.Len(ti))
			}
			for r := range want.Table(ti) {
				for c := range want.Table(ti)[r] {
					if g, w := norm(got.Table(ti)[r][c]), norm(want.Table(ti)[r][c]); g != w {
						t.Fatalf("%s: table %d row %d col %d: %s, want %s", name, ti, r, c, g, w)
					}
				}
			}
		}
	}
}

func TestDecodeMismatchedReceipts(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 2, TxPerBlock: 6, LogsPerBlock: 10})
	var p5, p6 struct{ Block, Receipts json.RawMessage }
	for h, p := range map[uint64]any{5: &p5, 6: &p6} {
		if err := json.Unmarshal(s.Record(h), p); err != nil {
			t.Fatal(err)
		}
	}
	var rcpts []json.RawMessage
	if err := json.Unmarshal(p5.Receipts, &rcpts); err != nil {
		t.Fatal(err)
	}
	if len(rcpts) < 2 {
		t.Fatalf("block 5 has %d receipts; the test needs two", len(rcpts))
	}
	swapped := append([]json.RawMessage{rcpts[1], rcpts[0]}, rcpts[2:]...)
	// A receipt whose block fields are right but whose hash is another's
	// (the receipt's own field comes after its logs').
	foreign := bytes.Clone(rcpts[0])
	at := bytes.LastIndex(foreign, []byte(`"transactionHash":"0x`)) + len(`"transactionHash":"0x`)
	if foreign[at] == 'f' {
		foreign[at] = '0'
	} else {
		foreign[at] = 'f'
	}

	cases := []struct {
		name  string
		raw   []byte
		field string
	}{
		{"another block's receipts", MarshalRecord(p5.Block, p6.Receipts), "receipts"},
		{"one receipt missing", MarshalRecordReceipts(p5.Block, rcpts[1:]), "receipts"},
		{"one receipt too many", MarshalRecordReceipts(p5.Block, append(append([]json.RawMessage{}, rcpts...), rcpts[0])), "receipts"},
		{"receipts out of order", MarshalRecordReceipts(p5.Block, swapped), "receipts[0]"},
		{"foreign transaction hash", MarshalRecordReceipts(p5.Block, append([]json.RawMessage{foreign}, rcpts[1:]...)), "receipts[0].transactionHash"},
		{"no receipts for a block with transactions", MarshalRecord(p5.Block, nil), "receipts"},
	}
	d := NewDecoder()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows := chain.NewRows(d.Tables())
			if err := d.Decode(4, s.Record(4), rows); err != nil {
				t.Fatal(err)
			}
			before := rows.Lens()
			err := d.Decode(5, tc.raw, rows)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrReceiptMismatch) {
				t.Fatalf("want a DecodeError wrapping ErrReceiptMismatch, got %v", err)
			}
			if de.Height != 5 || !strings.HasPrefix(de.Field, tc.field) {
				t.Fatalf("error names height %d field %q, want 5 and %q...: %v", de.Height, de.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), "block 5") {
				t.Fatalf("message does not name the height: %v", err)
			}
			if after := rows.Lens(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("rows changed from %v to %v", before, after)
			}
		})
	}
}

func TestDecodeBadRecords(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 2, TxPerBlock: 6, LogsPerBlock: 10})
	raw := string(s.Record(5))
	block5 := `"number":"0x5"`
	firstTx := strings.Index(raw, `"transactions":[{`) + len(`"transactions":[`)
	firstValue := strings.Index(raw[firstTx:], `"value":"`) + firstTx + len(`"value":"`)
	firstLog := strings.Index(raw, `"logs":[{`)
	cases := []struct {
		name, raw, field, msg string
		sentinel              error
	}{
		{"not json", "<html>502</html>", "record", "invalid JSON", nil},
		{"truncated", raw[:len(raw)/2], "", "unexpected end", nil},
		{"trailing garbage", raw + "x", "record", "end of input", nil},
		{"block null", `{"block":null,"receipts":[]}`, "block", "null", nil},
		{"no receipts member", `{"block":` + raw[9:strings.Index(raw, `,"receipts":`)] + `}`, "receipts", "missing", nil},
		{"other height", strings.Replace(raw, block5, `"number":"0x6"`, 1), "block.number", "another height", ErrHeightMismatch},
		{"bad hex value", raw[:firstValue] + "0xzz" + raw[strings.Index(raw[firstValue:], `"`)+firstValue:],
			"block.transactions[0].value", "invalid hex digit", nil},
		{"hash too short", strings.Replace(raw, `"hash":"0x`, `"hash":"0x12`, 1), "block.hash", "want 32 bytes", nil},
		{"missing tx hash", raw[:firstTx+1] + strings.Replace(raw[firstTx+1:], `"hash":`, `"hxsh":`, 1),
			"block.transactions[0].hash", "missing", nil},
		{"hashes only", strings.Replace(raw, `"transactions":[{`, `"transactions":["0x00",{`, 1),
			"block.transactions[0]", "full transactions", nil},
		{"five topics", raw[:firstLog] + strings.Replace(raw[firstLog:], `"topics":["0x`,
			`"topics":["0x0000000000000000000000000000000000000000000000000000000000000000","0x0000000000000000000000000000000000000000000000000000000000000000","0x0000000000000000000000000000000000000000000000000000000000000000","0x0000000000000000000000000000000000000000000000000000000000000000","0x`, 1),
			"receipts[", "more than 4 topics", nil},
		{"gas beyond bigint", strings.Replace(raw, `"gasLimit":"0x`, `"gasLimit":"0xffffffffffffffff`, 1),
			"block.gasLimit", "out of range", nil},
		{"quantity without 0x", strings.Replace(raw, `"gasUsed":"0x`, `"gasUsed":"`, 1), "block.gasUsed", "0x prefix", nil},
		{"string where a value goes", strings.Replace(raw, `"uncles":[]`, `"uncles":[}`, 1), "block.uncles", "invalid JSON", nil},
	}
	d := NewDecoder()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows := chain.NewRows(d.Tables())
			err := d.Decode(5, []byte(tc.raw), rows)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("want *DecodeError, got %v", err)
			}
			if de.Height != 5 || !strings.HasPrefix(de.Field, tc.field) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v (field %q), want field %q... and %q", err, de.Field, tc.field, tc.msg)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Fatalf("error does not wrap %v: %v", tc.sentinel, err)
			}
			if rows.Total() != 0 {
				t.Fatalf("%d rows left behind", rows.Total())
			}
		})
	}
}

func TestBlockIdentityErrors(t *testing.T) {
	for _, raw := range []string{``, `[]`, `{"receipts":[]}`, `{"block":null}`, `{"block":{"number":"0x1","hash":"0x00"}}`,
		`{"block":{"number":"0x1","hash":"0x` + strings.Repeat("00", 32) + `"}}`} {
		if _, _, _, err := BlockIdentity([]byte(raw)); err == nil || !strings.HasPrefix(err.Error(), "evm: block identity") {
			t.Errorf("%q: got %v", raw, err)
		}
	}
}
