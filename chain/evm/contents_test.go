package evm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// The fixtures in testdata/execution-apis are answers of geth on the test
// chain of ethereum/execution-apis (tests/, see testdata/README.md): a
// Cancun block with a withdrawal and its receipts, a block with contract
// creations and access lists, and the chain's blob (type 3) and set-code
// (type 4) transactions.
const execAPIsDir = "testdata/execution-apis"

func execAPIs(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(execAPIsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVerifyBlockRealContents: every transaction hash and root of real
// blocks recomputes to what the node sent, the roots checked with the
// header's hash: geth-dev's 31 blocks (types 0, 1 and 2, logs, reverted
// and creating transactions, empty withdrawals) and the execution-apis
// blocks (EIP-155 legacy, access lists, a non-empty withdrawals list).
func TestVerifyBlockRealContents(t *testing.T) {
	checked := map[string]int{}
	check := func(name string, raw []byte) {
		t.Helper()
		v := &verifier{}
		if _, err := v.record(raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, r := range v.roots() {
			if r.check {
				checked[headerFields[r.field].key]++
			}
		}
		checked["transactions"] += len(v.txs)
	}
	for h := uint64(0); h <= 30; h++ {
		check(fmt.Sprintf("geth-dev block %d", h), fixtureRecord(t, h))
	}
	check("execution-apis block 20", MarshalRecord(execAPIs(t, "block_20.json"), execAPIs(t, "receipts_20.json")))
	check("execution-apis block 2", []byte(`{"block":`+string(execAPIs(t, "block_2.json"))+`}`))
	t.Logf("checked: %v", checked)
	if checked["transactionsRoot"] != 33 || checked["receiptsRoot"] != 32 || checked["withdrawalsRoot"] != 33 || checked["transactions"] != 54 {
		t.Fatalf("checked %v: want every block's transactions and withdrawals roots, and receipts where recorded", checked)
	}
}

// TestTransactionHashTypedEnvelopes recomputes the hashes of real blob
// (EIP-4844) and set-code (EIP-7702) transactions, which the recorded
// blocks lack.
func TestTransactionHashTypedEnvelopes(t *testing.T) {
	for _, name := range []string{"tx_blob.json", "tx_setcode.json", "tx_authlist.json"} {
		raw := execAPIs(t, name)
		claimed, got, err := transactionHash(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != claimed {
			t.Errorf("%s: hash %x, node sent %x", name, got, claimed)
		}
		// One byte of a field the hash covers changes it.
		for _, field := range []string{`"nonce":"0x`, `"maxFeePerBlobGas":"0x`, `"blobVersionedHashes":["0x01`, `"authorizationList":[{"chainId":"0x`} {
			i := bytes.Index(raw, []byte(field))
			if i < 0 {
				continue
			}
			bad := bytes.Clone(raw)
			bad[i+len(field)] ^= 1 // a digit stays a digit
			if _, got, err := transactionHash(bad); err != nil || got == claimed {
				t.Errorf("%s with %s changed: hash %x, %v; want another hash", name, field, got, err)
			}
		}
	}
}

// transactionHash reads one transaction object and returns the hash it
// claims and the hash of its encoding.
func transactionHash(raw []byte) (claimed, sum [32]byte, err error) {
	v := &verifier{}
	v.reset()
	if err := v.transaction(newScanner(raw), 0); err != nil {
		return claimed, sum, err
	}
	if v.unknown == 0 {
		return claimed, sum, errors.New("unknown type")
	}
	sp := v.txs[0]
	return v.claimed[0], v.keccak(v.arena[sp.start:sp.end]), nil
}

// TestVerifyBlockNamesWhatIsWrong changes one thing of a real record at a
// time and expects the named mismatch: which transaction, or which root,
// with the value the record claims and the one its contents give.
func TestVerifyBlockNamesWhatIsWrong(t *testing.T) {
	block10 := fixtureRecord(t, 10) // 10 transactions, logs
	var rec struct {
		Block    map[string]json.RawMessage
		Receipts []map[string]json.RawMessage
	}
	if err := json.Unmarshal(block10, &rec); err != nil {
		t.Fatal(err)
	}
	var txs []map[string]json.RawMessage
	if err := json.Unmarshal(rec.Block["transactions"], &txs); err != nil || len(txs) != 10 {
		t.Fatalf("block 10: %d transactions, %v", len(txs), err)
	}
	remarshal := func(edit func(txs []map[string]json.RawMessage, rcpts []map[string]json.RawMessage, block map[string]json.RawMessage)) []byte {
		var r struct {
			Block    map[string]json.RawMessage
			Receipts []map[string]json.RawMessage
		}
		json.Unmarshal(block10, &r)
		var ts []map[string]json.RawMessage
		json.Unmarshal(r.Block["transactions"], &ts)
		edit(ts, r.Receipts, r.Block)
		r.Block["transactions"], _ = json.Marshal(ts)
		b, _ := json.Marshal(map[string]any{"block": r.Block, "receipts": r.Receipts})
		return b
	}
	field := func(m map[string]json.RawMessage, k string) string {
		var s string
		json.Unmarshal(m[k], &s)
		return s
	}
	txHash := func(i int) string { return field(txs[i], "hash") }
	root := func(k string) string { return field(rec.Block, k) }
	q := func(s string) json.RawMessage { return json.RawMessage(`"` + s + `"`) }

	block6 := fixtureRecord(t, 6) // logs
	var b6 struct{ Block struct{ ReceiptsRoot string } }
	json.Unmarshal(block6, &b6)
	root6 := b6.Block.ReceiptsRoot
	if !bytes.Contains(block6[bytes.Index(block6, []byte(`"receipts"`)):], []byte(`"data":"0x`)) || root6 == "" {
		t.Fatal("block 6 has no logs in its receipts")
	}
	block20 := MarshalRecord(execAPIs(t, "block_20.json"), execAPIs(t, "receipts_20.json"))
	for _, c := range []struct {
		name    string
		raw     []byte
		what    string
		claimed string
	}{
		{"a transaction's value", remarshal(func(ts, _ []map[string]json.RawMessage, _ map[string]json.RawMessage) {
			ts[3]["value"] = q("0x1234")
		}), "transaction 3 hash", txHash(3)},
		{"a transaction's input", remarshal(func(ts, _ []map[string]json.RawMessage, _ map[string]json.RawMessage) {
			ts[7]["input"] = q("0x00")
		}), "transaction 7 hash", txHash(7)},
		{"a transaction's signature", remarshal(func(ts, _ []map[string]json.RawMessage, _ map[string]json.RawMessage) {
			ts[0]["s"] = q("0x1")
		}), "transaction 0 hash", txHash(0)},
		{"a claimed transaction hash", remarshal(func(ts, _ []map[string]json.RawMessage, _ map[string]json.RawMessage) {
			ts[9]["hash"] = q("0x" + strings.Repeat("ab", 32))
		}), "transaction 9 hash", "0x" + strings.Repeat("ab", 32)},
		{"two transactions swapped", remarshal(func(ts, _ []map[string]json.RawMessage, _ map[string]json.RawMessage) {
			ts[1], ts[2] = ts[2], ts[1]
		}), "transactionsRoot", root("transactionsRoot")},
		{"a transaction left out", remarshal(func(ts, _ []map[string]json.RawMessage, b map[string]json.RawMessage) {
			ts[9] = ts[8]
		}), "transactionsRoot", root("transactionsRoot")},
		{"a receipt's gas", remarshal(func(_, rs []map[string]json.RawMessage, _ map[string]json.RawMessage) {
			rs[4]["cumulativeGasUsed"] = q("0x1")
		}), "receiptsRoot", root("receiptsRoot")},
		{"a receipt's status", remarshal(func(_, rs []map[string]json.RawMessage, _ map[string]json.RawMessage) {
			if field(rs[5], "status") == "0x1" {
				rs[5]["status"] = q("0x0")
			} else {
				rs[5]["status"] = q("0x1")
			}
		}), "receiptsRoot", root("receiptsRoot")},
		{"a log's data", setDigits(block6, bytes.Index(block6, []byte(`"data":"0x`)), "0102"), "receiptsRoot", root6},
		{"a receipt's type", remarshal(func(_, rs []map[string]json.RawMessage, _ map[string]json.RawMessage) {
			rs[2]["type"] = q("0x1")
			if field(rs[2], "type") == field(txs[2], "type") {
				rs[2]["type"] = q("0x2")
			}
		}), "receiptsRoot", root("receiptsRoot")},
		{"a receipt left out", remarshal(func(_, rs []map[string]json.RawMessage, _ map[string]json.RawMessage) {
			rs[9] = rs[8]
		}), "receiptsRoot", root("receiptsRoot")},
		{"a withdrawal's amount", bytes.Replace(block20, []byte(`"amount":"0x64"`), []byte(`"amount":"0x65"`), 1),
			"withdrawalsRoot", "0xaf7e8178225d047b7373d37459e9cb4060b8875bd0286059d211df82ec5d84ee"},
		{"a withdrawal left out", bytes.Replace(block20, []byte(`"withdrawals":[{"index":"0x6","validatorIndex":"0x5","address":"0x1f5bde34b4afc686f136c7a3cb6ec376f7357759","amount":"0x64"}]`), []byte(`"withdrawals":[]`), 1),
			"withdrawalsRoot", "0xaf7e8178225d047b7373d37459e9cb4060b8875bd0286059d211df82ec5d84ee"},
		{"an EIP-155 legacy transaction's v", bytes.Replace(block20, []byte(`"v":"0x18e5bb3abd109f"`), []byte(`"v":"0x18e5bb3abd10a0"`), 1),
			"transaction 2 hash", "0xcc1e8ab47dc46bee11fe02aaa3954dc62f5eeeef4e785868f652bde0d7727486"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := VerifyBlock(c.raw)
			var hm *chain.HashMismatchError
			if !errors.As(err, &hm) {
				t.Fatalf("err = %v, want a *chain.HashMismatchError", err)
			}
			t.Logf("%v", err)
			want, _ := hex.DecodeString(strings.TrimPrefix(c.claimed, "0x"))
			if hm.What != c.what || !bytes.Equal(hm.Claimed, want) || bytes.Equal(hm.Computed, want) || len(hm.Computed) != 32 {
				t.Fatalf("mismatch %q claimed %x computed %x; want %q claimed %s and another computed value", hm.What, hm.Claimed, hm.Computed, c.what, c.claimed)
			}
			if hm.Height != 6 && hm.Height != 10 && hm.Height != 20 || !jsonrpcRetryable(err) {
				t.Fatalf("height %d, retryable %v", hm.Height, jsonrpcRetryable(err))
			}
		})
	}
	// The same record unchanged, re-marshalled (keys reordered): still sound.
	if _, err := VerifyBlock(remarshal(func(_, _ []map[string]json.RawMessage, _ map[string]json.RawMessage) {})); err != nil {
		t.Fatalf("re-marshalled record: %v", err)
	}
}

func jsonrpcRetryable(err error) bool { return fault.Retryable(err) }

// TestVerifyBlockUnknownTransactionType: a transaction of a type the
// package cannot encode (an OP-stack deposit, 0x7e) leaves the block's
// roots unchecked, but not its block hash nor the other transactions.
func TestVerifyBlockUnknownTransactionType(t *testing.T) {
	raw := fixtureRecord(t, 10)
	deposit := setDigits(raw, bytes.Index(raw, []byte(`"type":"0x`)), "7e") // transaction 0's
	if _, err := VerifyBlock(deposit); err != nil {
		t.Fatalf("block with a deposit transaction: %v", err)
	}
	// Another transaction of the same block is still checked.
	bad := setDigits(deposit, bytes.LastIndex(deposit, []byte(`"value":"0x`)), "7777777") // transaction 9's
	var hm *chain.HashMismatchError
	if _, err := VerifyBlock(bad); !errors.As(err, &hm) || !strings.HasPrefix(hm.What, "transaction ") {
		t.Fatalf("err = %v, want a transaction hash mismatch", err)
	}
}

// setDigits replaces the hex digits of the "key":"0x..." at i.
func setDigits(raw []byte, i int, digits string) []byte {
	j := i + bytes.Index(raw[i:], []byte(`"0x`)) + len(`"0x`)
	k := j + bytes.IndexByte(raw[j:], '"')
	return append(append(append([]byte(nil), raw[:j]...), digits...), raw[k:]...)
}

// TestVerifyBlockGethSetCode verifies a whole block of a real geth 1.17
// --dev node holding an EIP-7702 set-code transaction beside an EIP-1559
// one (testdata/geth-dev-setcode): both hashes, the transactions root, and
// the receipts root over a type-4 receipt.
func TestVerifyBlockGethSetCode(t *testing.T) {
	result := func(name string) json.RawMessage { return rpcResultIn(t, "testdata/geth-dev-setcode", name) }
	raw := MarshalRecord(result("block_13.json"), result("receipts_13.json"))
	v := &verifier{}
	hash, err := v.record(raw)
	if err != nil {
		t.Fatal(err)
	}
	want, _, _, _ := BlockIdentity(raw)
	if !bytes.Equal(hash, want) || len(v.txs) != 2 || v.txTypes[0] != 4 || len(v.rcpts) != 2 {
		t.Fatalf("hash %x (node %x), %d transactions of types %v, %d receipts", hash, want, len(v.txs), v.txTypes, len(v.rcpts))
	}
	for _, r := range v.roots() {
		if !r.check {
			t.Errorf("%s not checked", headerFields[r.field].key)
		}
	}
	// The authorization is part of the hash.
	bad := bytes.Replace(raw, []byte(`"nonce":"0x5"`), []byte(`"nonce":"0x6"`), 1)
	var hm *chain.HashMismatchError
	if _, err := VerifyBlock(bad); !errors.As(err, &hm) || hm.What != "transaction 0 hash" {
		t.Fatalf("authorization nonce changed: %v, want transaction 0's hash mismatch", err)
	}
}
