package evmsynth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/chaintest"
	"github.com/blockhaul/blockhaul/chain/evm"
)

// Compile-time check that Synthetic has the shape loader.Source needs,
// without importing loader.
var _ interface {
	Family() chain.Family
	ChainID(context.Context) (string, error)
	Tip(context.Context) (uint64, error)
	Fetch(context.Context, uint64, uint64) ([]chain.Block, error)
} = (*Synthetic)(nil)

func TestSyntheticDeterministic(t *testing.T) {
	a := NewSynthetic(SyntheticConfig{Seed: 42})
	b := NewSynthetic(SyntheticConfig{Seed: 42})
	other := NewSynthetic(SyntheticConfig{Seed: 43})
	// Heights far up cost the blocks below them (each hash names its
	// parent's), so this stays low.
	for _, h := range []uint64{0, 1, 2, 60, 41} {
		ra, rb := a.Record(h), b.Record(h)
		if !bytes.Equal(ra, rb) {
			t.Fatalf("height %d: same seed gave different records", h)
		}
		// Generating other heights in between (pooled scratch state) must
		// not change a record.
		a.Record(h + 7)
		if again := a.Record(h); !bytes.Equal(ra, again) {
			t.Fatalf("height %d: record changed after generating another height", h)
		}
		if bytes.Equal(ra, other.Record(h)) {
			t.Fatalf("height %d: different seeds gave the same record", h)
		}
	}
}

func TestSyntheticConcurrentFetchMatchesSequential(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 5, TxPerBlock: 20, LogsPerBlock: 50})
	ctx := context.Background()
	want, err := s.Fetch(ctx, 1, 40)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([][]chain.Block, 4)
	errs := make([]error, 4)
	for w := range got {
		wg.Go(func() { got[w], errs[w] = s.Fetch(ctx, 1, 40) })
	}
	wg.Wait()
	for w := range got {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
		for i := range want {
			if !bytes.Equal(got[w][i].Raw, want[i].Raw) {
				t.Fatalf("worker %d height %d: concurrent fetch differs", w, want[i].Height)
			}
		}
	}
}

func TestSyntheticHashChain(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 9, TxPerBlock: 10, LogsPerBlock: 20})
	blocks, err := s.Fetch(context.Background(), 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 51 {
		t.Fatalf("got %d blocks, want 51", len(blocks))
	}
	if !bytes.Equal(blocks[0].ParentHash, make([]byte, 32)) {
		t.Fatalf("genesis parent hash = %x, want zero", blocks[0].ParentHash)
	}
	for i, b := range blocks {
		if b.Height != uint64(i) {
			t.Fatalf("block %d has height %d", i, b.Height)
		}
		if i > 0 && !bytes.Equal(b.ParentHash, blocks[i-1].Hash) {
			t.Fatalf("block %d: parent hash %x is not hash of block %d (%x)", i, b.ParentHash, i-1, blocks[i-1].Hash)
		}
		// The identity in the record is the identity of the Block.
		hash, parent, height, err := evm.BlockIdentity(b.Raw)
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if height != b.Height || !bytes.Equal(hash, b.Hash) || !bytes.Equal(parent, b.ParentHash) {
			t.Fatalf("block %d: record identity (%d %x %x) differs from Block (%d %x %x)",
				i, height, hash, parent, b.Height, b.Hash, b.ParentHash)
		}
		// The hash is keccak256 of the RLP header, as geth computes it.
		if got, err := evm.VerifyBlock(b.Raw); err != nil || !bytes.Equal(got, b.Hash) {
			t.Fatalf("block %d: VerifyBlock = %x, %v; hash %x", i, got, err, b.Hash)
		}
	}
	// A fresh chain, asked for a block far from genesis first, walks to it
	// and agrees.
	if far := NewSynthetic(SyntheticConfig{Seed: 9, TxPerBlock: 10, LogsPerBlock: 20}).Block(44); !bytes.Equal(far.Raw, blocks[44].Raw) {
		t.Fatal("block 44 of a fresh chain differs")
	}
	// Random access: a block alone names the same parent.
	if alone := s.Block(37); !bytes.Equal(alone.ParentHash, blocks[36].Hash) {
		t.Fatal("block 37 generated alone names another parent")
	}
}

func TestSyntheticSourceMethods(t *testing.T) {
	ctx := context.Background()
	tip := uint64(10)
	s := NewSynthetic(SyntheticConfig{Seed: 1, ChainID: 1, Tip: func() uint64 { return tip }})
	if s.Family() != chain.FamilyEVM {
		t.Fatalf("family %v", s.Family())
	}
	if id, err := s.ChainID(ctx); err != nil || id != "1" {
		t.Fatalf("chain id %q, %v", id, err)
	}
	if got, _ := s.Tip(ctx); got != 10 {
		t.Fatalf("tip %d, want 10", got)
	}
	if _, err := s.Fetch(ctx, 5, 11); err == nil || !strings.Contains(err.Error(), "beyond tip 10") {
		t.Fatalf("fetch past tip: %v", err)
	}
	tip = 11
	if _, err := s.Fetch(ctx, 5, 11); err != nil {
		t.Fatalf("fetch after tip moved: %v", err)
	}
	if _, err := s.Fetch(ctx, 6, 5); err == nil {
		t.Fatal("fetch of an empty range succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Fetch(cctx, 1, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("fetch with cancelled context: %v", err)
	}
	def := NewSynthetic(SyntheticConfig{})
	if id, _ := def.ChainID(ctx); id != "31337" {
		t.Fatalf("default chain id %q", id)
	}
	if got, _ := def.Tip(ctx); got != DefaultSyntheticTip {
		t.Fatalf("default tip %d", got)
	}
}

func TestSyntheticConfigValidate(t *testing.T) {
	if err := (SyntheticConfig{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	err := SyntheticConfig{TxPerBlock: -1, LogsPerBlock: 1e9}.Validate()
	if err == nil || !strings.Contains(err.Error(), "TxPerBlock") || !strings.Contains(err.Error(), "LogsPerBlock") {
		t.Fatalf("want both fields reported, got %v", err)
	}
}

func TestSyntheticGethShapes(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 3})
	types := map[string]int{}
	var creations, failed, bigValues, maxTopics int
	for h := uint64(1); h <= 12; h++ {
		block, txs, receipts := chaintest.ParseGethRecord(t, s.Record(h))
		for _, k := range []string{"number", "hash", "parentHash", "nonce", "sha3Uncles", "logsBloom",
			"transactionsRoot", "stateRoot", "receiptsRoot", "miner", "difficulty", "extraData", "size",
			"gasLimit", "gasUsed", "timestamp", "baseFeePerGas", "withdrawalsRoot", "blobGasUsed",
			"excessBlobGas", "parentBeaconBlockRoot", "uncles", "withdrawals"} {
			if _, ok := block[k]; !ok {
				t.Fatalf("block %d lacks %s", h, k)
			}
		}
		wantTxs, wantLogs := s.ExpectedCounts(h)
		if len(txs) != wantTxs || len(receipts) != wantTxs {
			t.Fatalf("block %d: %d txs, %d receipts, want %d", h, len(txs), len(receipts), wantTxs)
		}
		logs := 0
		for i, tx := range txs {
			var typ string
			_ = json.Unmarshal(tx["type"], &typ)
			types[typ]++
			has := func(k string) bool { _, ok := tx[k]; return ok }
			want := map[string]bool{
				"maxFeePerGas": typ != "0x0" && typ != "0x1", "maxPriorityFeePerGas": typ != "0x0" && typ != "0x1",
				"maxFeePerBlobGas": typ == "0x3", "blobVersionedHashes": typ == "0x3",
				"authorizationList": typ == "0x4", "accessList": typ != "0x0", "yParity": typ != "0x0",
				"gasPrice": true, "v": true, "r": true, "s": true, "input": true, "hash": true,
			}
			for k, w := range want {
				if has(k) != w {
					t.Fatalf("block %d tx %d type %s: has %s = %v, want %v", h, i, typ, k, has(k), w)
				}
			}
			rc := receipts[i]
			if !bytes.Equal(rc["transactionHash"], tx["hash"]) {
				t.Fatalf("block %d: receipt %d is not for tx %d", h, i, i)
			}
			if _, ok := rc["blobGasUsed"]; ok != (typ == "0x3") {
				t.Fatalf("block %d tx %d type %s: receipt blobGasUsed present = %v", h, i, typ, ok)
			}
			if string(tx["to"]) == "null" {
				creations++
				if string(rc["contractAddress"]) == "null" {
					t.Fatalf("block %d tx %d: creation without contractAddress", h, i)
				}
			} else if string(rc["contractAddress"]) != "null" {
				t.Fatalf("block %d tx %d: call with contractAddress", h, i)
			}
			if string(rc["status"]) == `"0x0"` {
				failed++
			}
			var value string
			_ = json.Unmarshal(tx["value"], &value)
			if len(value) > 2+16 || (len(value) == 18 && value[2] >= '8') {
				bigValues++
			}
			var rlogs []struct{ Topics []string }
			_ = json.Unmarshal(rc["logs"], &rlogs)
			logs += len(rlogs)
			for _, l := range rlogs {
				if len(l.Topics) < 1 || len(l.Topics) > 4 {
					t.Fatalf("block %d: log with %d topics", h, len(l.Topics))
				}
				maxTopics = max(maxTopics, len(l.Topics))
			}
		}
		if logs != wantLogs {
			t.Fatalf("block %d: %d logs, want %d", h, logs, wantLogs)
		}
	}
	for _, typ := range []string{"0x0", "0x1", "0x2", "0x3", "0x4"} {
		if types[typ] == 0 {
			t.Errorf("no transaction of type %s in 12 blocks: %v", typ, types)
		}
	}
	if types["0x2"] < types["0x0"]+types["0x1"]+types["0x3"]+types["0x4"] {
		t.Errorf("type 2 should dominate: %v", types)
	}
	if creations == 0 || failed == 0 || bigValues == 0 || maxTopics != 4 {
		t.Errorf("creations %d, failed %d, values > int64 %d, max topics %d: want all present",
			creations, failed, bigValues, maxTopics)
	}
}

func TestSyntheticDensity(t *testing.T) {
	for _, cfg := range []SyntheticConfig{{Seed: 1}, {Seed: 2, TxPerBlock: 10, LogsPerBlock: 3}} {
		s := NewSynthetic(cfg)
		var txs, logs int
		const n = 2000
		for h := uint64(1); h <= n; h++ {
			a, b := s.ExpectedCounts(h)
			txs += a
			logs += b
		}
		meanTx, meanLogs := float64(txs)/n, float64(logs)/n
		if meanTx < 0.9*s.cfg.TxPerBlock || meanTx > 1.1*s.cfg.TxPerBlock ||
			meanLogs < 0.9*s.cfg.LogsPerBlock || meanLogs > 1.1*s.cfg.LogsPerBlock {
			t.Errorf("%+v: mean %.1f txs, %.1f logs per block", cfg, meanTx, meanLogs)
		}
	}
}

func TestMarshalRecord(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 11, TxPerBlock: 5, LogsPerBlock: 9})
	raw := s.Record(4)
	var parts struct {
		Block    json.RawMessage
		Receipts json.RawMessage
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		t.Fatal(err)
	}
	if got := evm.MarshalRecord(parts.Block, parts.Receipts); !bytes.Equal(got, raw) {
		t.Fatal("MarshalRecord of the record's own parts differs from the record")
	}
	var each []json.RawMessage
	if err := json.Unmarshal(parts.Receipts, &each); err != nil {
		t.Fatal(err)
	}
	if got := evm.MarshalRecordReceipts(parts.Block, each); !bytes.Equal(got, raw) {
		t.Fatal("MarshalRecordReceipts of the record's own parts differs from the record")
	}
	if got := string(evm.MarshalRecord(json.RawMessage(`{}`), nil)); got != `{"block":{},"receipts":[]}` {
		t.Fatalf("nil receipts: %s", got)
	}
}
