package evm

import (
	"bytes"
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

// FuzzBlockIdentity: never panics, and agrees with itself on a prefix of
// valid records.
func FuzzBlockIdentity(f *testing.F) {
	s := NewSynthetic(SyntheticConfig{Seed: 1, TxPerBlock: 2, LogsPerBlock: 3})
	f.Add(s.Record(2))
	f.Add([]byte(`{"block":{"hash":"0x","number":"0x1"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		hash, parent, _, err := BlockIdentity(raw)
		if err == nil && (len(hash) != 32 || len(parent) != 32) {
			t.Fatalf("hash %x parent %x", hash, parent)
		}
	})
}
