package cometbft

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// FuzzBlockAnswer feeds arbitrary /block and /block_results answers to the
// checks a source runs before a block may be staged. It must never panic;
// a block it accepts is, read independently with encoding/json, the block
// asked for: its header height and block_results height are h, its hash is
// block_id.hash, and VerifyBlock, when it can recompute the hash, agrees.
func FuzzBlockAnswer(f *testing.F) {
	s := NewSynthetic(SyntheticConfig{Seed: 1, Validators: 2, TxPerBlock: 2})
	for _, h := range []uint64{1, 2, 3} {
		var rec struct{ Block, BlockResults json.RawMessage }
		raw := s.AppendRecord(nil, h)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			f.Fatal(err)
		}
		rec.Block, rec.BlockResults = m["block"], m["block_results"]
		f.Add(h, []byte(rec.Block), []byte(rec.BlockResults))
		f.Add(h+1, []byte(rec.Block), []byte(rec.BlockResults))
	}
	f.Add(uint64(5), []byte(`{"block_id":{"hash":"AA"},"block":{"header":{"height":"5"}}}`), []byte(`{"height":"5"}`))
	f.Add(uint64(5), []byte(`null`), []byte(`{"height":"5"}`))
	src := &RPCSource{via: "fuzz"}
	f.Fuzz(func(t *testing.T, h uint64, blockRes, resultsRes []byte) {
		b, err := src.block(h, blockRes, resultsRes)
		if vh, verr := VerifyBlock(MarshalRecord(blockRes, resultsRes)); verr == nil && err == nil && !bytes.Equal(vh, b.Hash) {
			t.Fatalf("VerifyBlock recomputed %X, the answer check took %X", vh, b.Hash)
		}
		if err != nil {
			if !strings.Contains(err.Error(), strconv.FormatUint(h, 10)) {
				t.Fatalf("error does not name height %d: %v", h, err)
			}
			return
		}
		var blk struct {
			BlockID struct {
				Hash string `json:"hash"`
			} `json:"block_id"`
			Block struct {
				Header struct {
					Height string `json:"height"`
				} `json:"header"`
			} `json:"block"`
		}
		// The checks read only the fields they need; the JSON-RPC layer
		// has validated the whole body before (splitBatch). Compare where
		// the answers are valid JSON.
		if !json.Valid(blockRes) || !json.Valid(resultsRes) {
			return
		}
		if err := json.Unmarshal(blockRes, &blk); err != nil {
			t.Fatalf("accepted a block answer encoding/json refuses: %v", err)
		}
		if blk.Block.Header.Height != strconv.FormatUint(h, 10) || b.Height != h {
			t.Fatalf("accepted header height %q (block %d) for %d", blk.Block.Header.Height, b.Height, h)
		}
		want, err := hex.DecodeString(blk.BlockID.Hash)
		if err != nil || !bytes.Equal(want, b.Hash) || len(b.Hash) != 32 {
			t.Fatalf("accepted hash %X, block_id.hash is %q", b.Hash, blk.BlockID.Hash)
		}
		var res struct {
			Height json.RawMessage `json:"height"`
		}
		if err := json.Unmarshal(resultsRes, &res); err != nil || strings.Trim(string(res.Height), `"`) != strconv.FormatUint(h, 10) {
			t.Fatalf("accepted block_results height %s for %d (%v)", res.Height, h, err)
		}
		if !bytes.Equal(b.Raw, MarshalRecord(blockRes, resultsRes)) {
			t.Fatal("the staged record is not the node's two answers")
		}
	})
}
