package evm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
)

// FuzzDecode feeds arbitrary bytes to Decode: it must never panic, must
// leave rows untouched on error, and on success must have produced one
// block row whose transaction count matches its transaction rows.
func FuzzDecode(f *testing.F) {
	s := NewSynthetic(SyntheticConfig{Seed: 1, TxPerBlock: 2, LogsPerBlock: 3})
	for h := uint64(0); h < 4; h++ {
		f.Add(h, s.Record(h))
	}
	f.Add(uint64(18), fixtureRecord(f, 18)) // real geth: a creation with logs
	f.Add(uint64(5), []byte(`{"block":{"number":"0x5"},"receipts":null}`))
	f.Add(uint64(1), []byte(`{"receipts":[],"block":{"transactions":[]}}`))
	f.Add(uint64(0), []byte(`{"block":{"uncles":[[[[[]]]]],"a\"b":"\\"}}`))
	d := NewDecoder()
	f.Fuzz(func(t *testing.T, height uint64, raw []byte) {
		rows := chain.NewRows(d.Tables())
		// A row already present must survive a failed decode.
		prev := s.Record(1)
		if err := d.Decode(1, prev, rows); err != nil {
			t.Fatal(err)
		}
		before := rows.Lens()
		in := bytes.Clone(raw)
		err := d.Decode(height, raw, rows)
		if !bytes.Equal(in, raw) {
			t.Fatal("Decode modified its input")
		}
		after := rows.Lens()
		if err != nil {
			for i := range before {
				if after[i] != before[i] {
					t.Fatalf("failed decode left rows: %v -> %v: %v", before, after, err)
				}
			}
			return
		}
		if after[TableBlocks] != before[TableBlocks]+1 {
			t.Fatalf("decode succeeded with %d block rows", after[TableBlocks]-before[TableBlocks])
		}
		block := rows.Table(TableBlocks)[after[TableBlocks]-1]
		if n := block[colBlockTxCount].(int32); int(n) != after[TableTransactions]-before[TableTransactions] {
			t.Fatalf("transaction_count %d, %d transaction rows", n, after[TableTransactions]-before[TableTransactions])
		}
		if block[colBlockNumber] != int64(height) {
			t.Fatalf("block row number %v, decoded as %d", block[colBlockNumber], height)
		}
		if hash, _, h, err := BlockIdentity(raw); err != nil || h != height || !bytes.Equal(hash, block[colBlockHash].([]byte)) {
			t.Fatalf("BlockIdentity disagrees with Decode: %x %d %v", hash, h, err)
		}
	})
}

// FuzzBlockIdentity: never panics, refuses a record cut short, and what it
// reads is what an independent reading finds: encoding/json's decode of the record's
// block.number, block.hash and block.parentHash, and, where VerifyBlock can
// recompute the hash from the RLP header, that hash.
func FuzzBlockIdentity(f *testing.F) {
	s := NewSynthetic(SyntheticConfig{Seed: 1, TxPerBlock: 2, LogsPerBlock: 3})
	f.Add(s.Record(2))
	f.Add(s.Record(0))
	f.Add(fixtureRecord(f, 18))
	f.Add([]byte(`{"block":{"hash":"0x","number":"0x1"}}`))
	f.Add([]byte(`{"block":{"number":"0x10","hash":"0x` + strings.Repeat("aB", 32) + `","parentHash":"0x` + strings.Repeat("01", 32) + `"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		hash, parent, height, err := BlockIdentity(raw)
		if vh, verr := VerifyBlock(raw); verr == nil && (err != nil || !bytes.Equal(vh, hash)) {
			t.Fatalf("VerifyBlock recomputed %x, BlockIdentity read %x (%v)", vh, hash, err)
		}
		if err != nil {
			return
		}
		if len(hash) != 32 || len(parent) != 32 {
			t.Fatalf("hash %x parent %x", hash, parent)
		}
		// Strict: a record cut short is refused, wherever it is cut.
		whole := bytes.TrimRight(raw, " \t\r\n")
		for _, k := range []int{len(whole) - 1, len(whole) / 2} {
			if _, _, _, err := BlockIdentity(whole[:k]); err == nil {
				t.Fatalf("accepted %q and its first %d bytes %q", raw, k, whole[:k])
			}
		}
		// The independent reading. Keys are matched exactly, as nodes send
		// them; a record with a key twice is left out (which one counts
		// is a choice, not a fact).
		// BlockIdentity reads only what it needs and does not validate the
		// rest (records are built from answers the JSON-RPC layer has
		// validated whole): compare where the record is valid JSON.
		var rec map[string]json.RawMessage
		if !json.Valid(raw) || json.Unmarshal(raw, &rec) != nil {
			return
		}
		var blk map[string]json.RawMessage
		if json.Unmarshal(rec["block"], &blk) != nil || duplicateKeys(raw) {
			return
		}
		var number, h, p string
		if json.Unmarshal(blk["number"], &number) != nil || json.Unmarshal(blk["hash"], &h) != nil || json.Unmarshal(blk["parentHash"], &p) != nil {
			t.Fatalf("BlockIdentity read fields encoding/json does not find as strings: %s", rec["block"])
		}
		unhex := func(s string) string {
			d, ok := strings.CutPrefix(s, "0x")
			if !ok {
				t.Fatalf("BlockIdentity accepted %q, which is not 0x-prefixed", s)
			}
			return d
		}
		n, nerr := strconv.ParseUint(unhex(number), 16, 64)
		wh, herr := hex.DecodeString(unhex(h))
		wp, perr := hex.DecodeString(unhex(p))
		if nerr != nil || herr != nil || perr != nil || n != height || !bytes.Equal(wh, hash) || !bytes.Equal(wp, parent) {
			t.Fatalf("BlockIdentity read %d %x %x; encoding/json reads number %q hash %q parentHash %q", height, hash, parent, number, h, p)
		}
	})
}

// duplicateKeys reports whether any object in the JSON value b has a key
// twice.
func duplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func() bool
	walk = func() bool {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		switch t {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return false
				}
				ks, _ := k.(string)
				if seen[ks] {
					return true
				}
				seen[ks] = true
				if walk() {
					return true
				}
			}
			dec.Token()
		case json.Delim('['):
			for dec.More() {
				if walk() {
					return true
				}
			}
			dec.Token()
		}
		return false
	}
	return walk()
}
