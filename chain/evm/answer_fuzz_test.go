package evm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// FuzzBlockAnswer feeds arbitrary eth_getBlockByNumber answers and receipt
// lists to the checks a source runs before a block may be staged. It must
// never panic; an accepted block is the height asked for, with the hash it
// claims; accepted receipts are one per transaction, in order, each naming
// the block; and VerifyBlock, when it can recompute the hash, agrees.
func FuzzBlockAnswer(f *testing.F) {
	s := NewSynthetic(SyntheticConfig{Seed: 1, TxPerBlock: 2, LogsPerBlock: 3})
	for h := uint64(1); h < 4; h++ {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(s.Record(h), &m); err != nil {
			f.Fatal(err)
		}
		f.Add(h, []byte(m["block"]), []byte(m["receipts"]))
		f.Add(h+1, []byte(m["block"]), []byte(m["receipts"]))
	}
	f.Add(uint64(18), []byte(`{"number":"0x12","hash":"0x`+strings.Repeat("ab", 32)+`","parentHash":"0x`+strings.Repeat("cd", 32)+`","transactions":[]}`), []byte(`[]`))
	src := &RPCSource{via: "fuzz"}
	f.Fuzz(func(t *testing.T, h uint64, blockRes, receipts []byte) {
		hd, err := src.parseBlock(h, blockRes)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.FormatUint(h, 10)) {
				t.Fatalf("error does not name height %d: %v", h, err)
			}
			return
		}
		var blk map[string]json.RawMessage
		if json.Unmarshal(blockRes, &blk) != nil {
			t.Fatal("accepted a block encoding/json refuses")
		}
		var number, hash string
		json.Unmarshal(blk["number"], &number)
		json.Unmarshal(blk["hash"], &hash)
		if hd.height != h || !strings.EqualFold(number, "0x"+strconv.FormatUint(h, 16)) && !sameQuantity(number, h) {
			t.Fatalf("accepted number %q for height %d", number, h)
		}
		want, herr := hex.DecodeString(strings.TrimPrefix(strings.ToLower(hash), "0x"))
		if herr == nil && !bytes.Equal(want, hd.hash) {
			t.Fatalf("accepted hash %x, the answer says %q", hd.hash, hash)
		}
		raw := MarshalRecord(blockRes, receipts)
		if vh, verr := VerifyBlock(raw); verr == nil && !bytes.Equal(vh, hd.hash) {
			t.Fatalf("VerifyBlock recomputed %x, the answer check took %x", vh, hd.hash)
		}
		var rs []receiptRef
		if json.Unmarshal(receipts, &rs) != nil {
			return
		}
		if err := src.checkReceipts(&hd, rs); err == nil {
			if len(rs) != len(hd.txs) {
				t.Fatalf("accepted %d receipts for %d transactions", len(rs), len(hd.txs))
			}
			for i, r := range rs {
				if !strings.EqualFold(r.BlockHash, "0x"+hex.EncodeToString(hd.hash)) {
					t.Fatalf("accepted receipt %d of block %s, the block is %x", i, r.BlockHash, hd.hash)
				}
			}
		}
	})
}

// sameQuantity reads q as a hex quantity, leniently, and compares it with h.
func sameQuantity(q string, h uint64) bool {
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(q), "0x"), 16, 64)
	return err == nil && v == h
}
