package aptos_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/aptos"
	"github.com/blockhaul/blockhaul/chain/aptossynth"
)

// obj is a JSON object read generically (numbers as json.Number), apart
// from the decoder's own reading.
type obj = map[string]any

func generic(t testing.TB, raw []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func str(v any) string { s, _ := v.(string); return s }

func u64(t testing.TB, v any) int64 {
	t.Helper()
	x, err := strconv.ParseInt(str(v), 10, 64)
	if err != nil {
		t.Fatalf("%v: %v", v, err)
	}
	return x
}

// hexBytes reads a hash, or an address zero-extended to 32 bytes.
func hexBytes(t testing.TB, v any) []byte {
	t.Helper()
	s := strings.TrimPrefix(str(v), "0x")
	s = strings.Repeat("0", max(0, 64-len(s))) + s
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("%v: %v", v, err)
	}
	return b
}

// same compares a decoded value with the one read from the JSON: bytes,
// times, numbers and JSON documents by value.
func same(t testing.TB, where string, got, want any) {
	t.Helper()
	switch w := want.(type) {
	case nil:
		if got != nil {
			t.Fatalf("%s = %v, want NULL", where, got)
		}
		return
	case []byte:
		if g, ok := got.([]byte); !ok || !bytes.Equal(g, w) {
			t.Fatalf("%s = %x, want %x", where, got, w)
		}
		return
	case time.Time:
		if g, ok := got.(time.Time); !ok || !g.Equal(w) {
			t.Fatalf("%s = %v, want %v", where, got, w)
		}
		return
	case jsonDoc:
		g, ok := got.([]byte)
		if !ok || !reflect.DeepEqual(generic(t, g), w.v) {
			t.Fatalf("%s = %s, want %v", where, got, w.v)
		}
		return
	case numeric:
		var g *big.Int
		switch x := got.(type) {
		case int64:
			g = big.NewInt(x)
		case pgtype.Numeric:
			g = x.Int
		}
		if g == nil || g.String() != string(w) {
			t.Fatalf("%s = %v, want %s", where, got, w)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %v (%T), want %v (%T)", where, got, got, want, want)
	}
}

type jsonDoc struct{ v any }
type numeric string

// expectRows reads the rows a record must give from its JSON, without the
// decoder: the node's block answer and its pages, and the parent.
func expectRows(t testing.TB, raw []byte) [][][]any {
	t.Helper()
	rec := generic(t, raw).(obj)
	blk := rec["block"].(obj)
	txs, _ := blk["transactions"].([]any)
	if pages, ok := rec["pages"].([]any); ok {
		for _, p := range pages {
			txs = append(txs, p.([]any)...)
		}
	}
	height := u64(t, blk["block_height"])
	ts := time.UnixMicro(u64(t, blk["block_timestamp"]))
	out := make([][][]any, 5)
	var parent any
	if p, ok := rec["parent"].(obj); ok {
		parent = hexBytes(t, p["block_hash"])
	}
	b := []any{height, hexBytes(t, blk["block_hash"]), parent, ts, u64(t, blk["first_version"]), u64(t, blk["last_version"]), nil, nil, nil, int32(len(txs))}
	if m := txs[0].(obj); m["type"] == "block_metadata_transaction" {
		b[6], b[7], b[8] = u64(t, m["epoch"]), u64(t, m["round"]), hexBytes(t, m["proposer"])
	}
	out[aptos.TableBlocks] = append(out[aptos.TableBlocks], b)
	for _, x := range txs {
		tx := x.(obj)
		version := u64(t, tx["version"])
		events, _ := tx["events"].([]any)
		changes, _ := tx["changes"].([]any)
		var ckpt any
		if tx["state_checkpoint_hash"] != nil {
			ckpt = hexBytes(t, tx["state_checkpoint_hash"])
		}
		out[aptos.TableTransactions] = append(out[aptos.TableTransactions], []any{version, height, hexBytes(t, tx["hash"]), tx["type"], tx["success"], tx["vm_status"],
			numeric(str(tx["gas_used"])), hexBytes(t, tx["state_change_hash"]), hexBytes(t, tx["event_root_hash"]), ckpt, hexBytes(t, tx["accumulator_root_hash"]), ts, int32(len(events)), int32(len(changes))})
		if tx["type"] == "user_transaction" {
			p := tx["payload"].(obj)
			var fn any
			if f, ok := p["function"]; ok {
				fn = f
			}
			out[aptos.TableUserTransactions] = append(out[aptos.TableUserTransactions], []any{version, height, hexBytes(t, tx["sender"]), u64(t, tx["sequence_number"]),
				numeric(str(tx["max_gas_amount"])), numeric(str(tx["gas_unit_price"])), time.Unix(u64(t, tx["expiration_timestamp_secs"]), 0),
				fn, p["type"], jsonDoc{p}, tx["signature"].(obj)["type"], time.UnixMicro(u64(t, tx["timestamp"]))})
		}
		for j, y := range events {
			e := y.(obj)
			g := e["guid"].(obj)
			var acct, cn, seq any
			if !(str(g["account_address"]) == "0x0" && str(g["creation_number"]) == "0" && str(e["sequence_number"]) == "0") {
				acct, cn, seq = hexBytes(t, g["account_address"]), u64(t, g["creation_number"]), u64(t, e["sequence_number"])
			}
			out[aptos.TableEvents] = append(out[aptos.TableEvents], []any{version, int32(j), height, acct, cn, seq, e["type"], jsonDoc{e["data"]}})
		}
		for j, y := range changes {
			c := y.(obj)
			var addr, rtype, handle, data any
			if c["address"] != nil {
				addr = hexBytes(t, c["address"])
			}
			switch c["type"] {
			case "write_resource":
				d := c["data"].(obj)
				rtype, data = d["type"], jsonDoc{d["data"]}
			case "delete_resource":
				rtype = c["resource"]
			case "write_module":
				d := c["data"].(obj)
				abi := d["abi"].(obj)
				rtype, data = str(abi["address"])+"::"+str(abi["name"]), jsonDoc{d}
			case "delete_module":
				rtype = c["module"]
			case "write_table_item":
				handle, data = hexBytes(t, c["handle"]), jsonDoc{obj{"key": c["key"], "value": c["value"], "data": c["data"]}}
			case "delete_table_item":
				handle, data = hexBytes(t, c["handle"]), jsonDoc{obj{"key": c["key"], "data": c["data"]}}
			}
			out[aptos.TableWriteSetChanges] = append(out[aptos.TableWriteSetChanges], []any{version, int32(j), height, c["type"], addr, hexBytes(t, c["state_key_hash"]), rtype, handle, data})
		}
	}
	return out
}

// checkColumns decodes raw and compares every column of every row with
// expectRows'.
func checkColumns(t testing.TB, raw []byte) (counts [5]int) {
	t.Helper()
	d := aptos.NewDecoder()
	tables := d.Tables()
	want := expectRows(t, raw)
	h := uint64(want[aptos.TableBlocks][0][0].(int64))
	rows := chain.NewRows(tables)
	if err := d.Decode(h, raw, rows); err != nil {
		t.Fatal(err)
	}
	for i, tb := range tables {
		if rows.Len(i) != len(want[i]) {
			t.Fatalf("block %d: %s: %d rows, want %d", h, tb.Name, rows.Len(i), len(want[i]))
		}
		for r, row := range rows.Table(i) {
			for c, col := range tb.Columns {
				same(t, fmt.Sprintf("block %d %s row %d %s", h, tb.Name, r, col.Name), row[c], want[i][r][c])
			}
		}
		counts[i] = rows.Len(i)
	}
	return counts
}

// TestColumnsOfRealBlocks: every column of every table, for each recorded
// mainnet block (one fetched in pages), equals the value read from the
// node's JSON: handle and module events, failed user transactions (an
// abort and an execution limit), a script payload, fee payer signatures,
// table items written and deleted, a state checkpoint and block epilogues.
func TestColumnsOfRealBlocks(t *testing.T) {
	var total [5]int
	failed, module, handle, scripts := 0, 0, 0, 0
	for _, h := range realBlocks {
		raw := readReal(t, fmt.Sprintf("mainnet_block_%d.json", h))
		e := parseEnvelope(t, raw)
		first := e.u64(t, "first_version")
		// The block's answer carries its first two transactions, a page
		// the rest, as a node with a small page size answers.
		rec := aptos.MarshalRecord(e.with(e.txs[:2]), []json.RawMessage{joinJSON(e.txs[2:])}, &aptos.Parent{BlockHash: assembledParentHash(h), LastVersion: fmt.Sprint(first - 1)})
		if _, err := aptos.VerifyBlock(rec); err != nil {
			t.Fatal(err)
		}
		c := checkColumns(t, rec)
		for i := range total {
			total[i] += c[i]
		}
		b, _ := aptos.ParseRecord(rec)
		for _, tx := range b.Txs {
			if tx.Type == aptos.TxUser && !tx.Success {
				failed++
			}
			if tx.Type == aptos.TxUser && strings.Contains(string(tx.Payload), `"script_payload"`) {
				scripts++
			}
			for _, ev := range tx.Events {
				if ev.GUID.AccountAddress == "0x0" {
					module++
				} else {
					handle++
				}
			}
		}
	}
	if failed != 2 || module == 0 || handle == 0 || scripts != 1 || total[aptos.TableTransactions] != 15 || total[aptos.TableUserTransactions] != 9 {
		t.Fatalf("the recordings hold %d failed, %d module and %d handle events, %d scripts, rows %v", failed, module, handle, scripts, total)
	}
}

// TestColumnsOfSyntheticBlocks: the same for the synthetic chain: genesis
// (a module written), blocks with deleted resources and table items, and
// an epoch change.
func TestColumnsOfSyntheticBlocks(t *testing.T) {
	syn := aptossynth.New(aptossynth.Config{Seed: 11})
	kinds := map[string]int{}
	for _, h := range []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, aptossynth.EpochBlocks, aptossynth.EpochBlocks + 1} {
		raw := mustRecord(t, syn, h)
		if _, err := aptos.VerifyBlock(raw); err != nil {
			t.Fatalf("block %d: %v", h, err)
		}
		checkColumns(t, raw)
		b, _ := aptos.ParseRecord(raw)
		for _, tx := range b.Txs {
			for _, c := range tx.Changes {
				kinds[c.Type]++
			}
		}
	}
	for _, k := range []string{"write_resource", "write_module", "write_table_item", "delete_table_item", "delete_resource"} {
		if kinds[k] == 0 {
			t.Errorf("no %s change in the blocks checked: %v", k, kinds)
		}
	}
}

// TestDecodeRefusesAnotherHeight: a record is decoded only as the height it
// is staged at, and a failing block leaves the rows as they were.
func TestDecodeRefusesAnotherHeight(t *testing.T) {
	syn := aptossynth.New(aptossynth.Config{Seed: 1})
	d := aptos.NewDecoder()
	rows := chain.NewRows(d.Tables())
	if err := d.Decode(3, mustRecord(t, syn, 3), rows); err != nil {
		t.Fatal(err)
	}
	before := rows.Total()
	err := d.Decode(5, mustRecord(t, syn, 4), rows)
	if err == nil || !strings.Contains(err.Error(), "block 5") || rows.Total() != before {
		t.Fatalf("%v; %d rows, want %d", err, rows.Total(), before)
	}
	bad := bytes.Replace(mustRecord(t, syn, 4), []byte(`"gas_unit_price":"100"`), []byte(`"gas_unit_price":"x"`), 1)
	if err := d.Decode(4, bad, rows); err == nil || !strings.Contains(err.Error(), "gas_unit_price") || rows.Total() != before {
		t.Fatalf("%v; %d rows, want %d", err, rows.Total(), before)
	}
}
