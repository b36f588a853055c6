package cometbft

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
)

// TestVerifyBlockRecordedNodes recomputes the hash of every block a real
// CometBFT node answered (testdata/node-*) and finds the hash the node sent.
func TestVerifyBlockRecordedNodes(t *testing.T) {
	recs := recordedNodeRecords(t)
	if len(recs) < 40 {
		t.Fatalf("only %d recorded blocks", len(recs))
	}
	withTxs := 0
	for _, r := range recs {
		got, err := VerifyBlock(r.raw)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if want := strings.ToUpper(r.expect.Hash); hexUpperString(got) != want {
			t.Fatalf("%s: hash %X, recorded %s", r.name, got, want)
		}
		if r.expect.NumTxs > 0 {
			withTxs++
		}
	}
	if withTxs == 0 {
		t.Fatal("no recorded block has txs: data_hash was never checked on a real one")
	}
}

// TestVerifyBlockDetectsTampering changes one header field, the claimed
// hash or one tx of a real block at a time and expects a mismatch naming
// the value that no longer matches.
func TestVerifyBlockDetectsTampering(t *testing.T) {
	var rec recordedRecord
	for _, r := range recordedNodeRecords(t) {
		if r.expect.NumTxs > 1 && r.expect.Height > 1 {
			rec = r
			break
		}
	}
	if rec.raw == nil {
		t.Fatal("no recorded block with txs")
	}
	hash := strings.ToUpper(rec.expect.Hash)
	cases := []struct {
		name, old, new, what string
	}{
		{"claimed hash", `"block_id":{"hash":"` + hash, `"block_id":{"hash":"` + flipHex(hash), "block hash"},
		{"chain id", `"chain_id":"`, `"chain_id":"x`, "block hash"},
		{"height", `"height":"`, `"height":"1`, "block hash"},
		{"time", `.`, `.1`, "block hash"},
		{"version", `"block":"11"`, `"block":"12"`, "block hash"},
		{"app hash", `"app_hash":"`, `"app_hash":"00`, "block hash"},
		{"proposer", `"proposer_address":"`, `"proposer_address":"00`, "block hash"},
		{"last block parts", `"parts":{"total":1`, `"parts":{"total":2`, "block hash"},
		{"tx", `"txs":["`, `"txs":["AAAA`, "data_hash"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := replaceAfter(rec.raw, c.old, c.new, c.name == "last block parts" || c.name == "time")
			if bytes.Equal(raw, rec.raw) {
				t.Fatalf("%q not found", c.old)
			}
			_, err := VerifyBlock(raw)
			var hm *chain.HashMismatchError
			if !errors.As(err, &hm) {
				t.Fatalf("err = %v, want a hash mismatch", err)
			}
			if hm.What != c.what || hm.Height == 0 || bytes.Equal(hm.Claimed, hm.Computed) {
				t.Fatalf("mismatch %+v, want %s", hm, c.what)
			}
		})
	}
}

// replaceAfter replaces the first occurrence of old inside the header (or,
// with inHeader unset, anywhere).
func replaceAfter(raw []byte, old, new string, inHeader bool) []byte {
	start := 0
	if inHeader {
		start = bytes.Index(raw, []byte(`"header":`))
	}
	i := bytes.Index(raw[start:], []byte(old))
	if i < 0 {
		return raw
	}
	i += start
	out := append([]byte(nil), raw[:i]...)
	out = append(out, new...)
	return append(out, raw[i+len(old):]...)
}

func flipHex(h string) string {
	b, _ := hex.DecodeString(h)
	b[0] ^= 1
	return strings.ToUpper(hex.EncodeToString(b))
}

// TestMerkleRootKnownValues checks the tree shape against CometBFT's own
// test vectors (crypto/merkle/tree_test.go's RFC 6962 values).
func TestMerkleRootKnownValues(t *testing.T) {
	var scratch []byte
	if got := MerkleRootOfLeaves(nil, nil, &scratch); hex.EncodeToString(got[:]) != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("empty root %x", got)
	}
	one := [][32]byte{LeafHash(&scratch, []byte{})}
	if hex.EncodeToString(one[0][:]) != "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d" {
		t.Fatalf("leaf of empty %x", one[0])
	}
}

// hexUpperString is the uppercase hex CometBFT prints for hashes.
func hexUpperString(b []byte) string {
	const digits = "0123456789ABCDEF"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}
