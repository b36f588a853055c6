package nodehome

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/internal/nodefixture"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
)

// TestBlockFromProtoLeavesTheDataHashToTheLoader: blockFromProto refuses
// what CometBFT's BlockFromProto refuses but the data_hash, which the
// loader's verification of the record refuses instead.
func TestBlockFromProtoLeavesTheDataHashToTheLoader(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	src := openHome(t, fx.Unpack(t))
	// A height with txs: its data_hash is not the empty root.
	var h int64
	for i := int64(2); i <= int64(fx.Tip()) && h == 0; i++ {
		if len(src.blocks.LoadBlock(i).Txs) > 0 {
			h = i
		}
	}
	if h == 0 {
		t.Fatal("no block with txs in the fixture")
	}
	stored := src.blocks.LoadBlock(h)
	toProto := func() *cmtproto.Block {
		pb, err := stored.ToProto()
		if err != nil {
			t.Fatal(err)
		}
		return pb
	}
	good, err := blockFromProto(toProto(), false)
	if err != nil {
		t.Fatalf("height %d: %v", h, err)
	}
	if !bytes.Equal(good.Hash(), stored.Hash()) {
		t.Fatalf("height %d: hash %X, want %X", h, good.Hash(), stored.Hash())
	}

	for _, tc := range []struct{ field, want string }{
		{"last_commit_hash", "wrong Header.LastCommitHash"},
		{"evidence_hash", "wrong Header.EvidenceHash"},
		{"last_commit signature", "signature is missing"}, // CommitFromProto's ValidateBasic
	} {
		pb := toProto()
		switch tc.field {
		case "last_commit_hash":
			pb.Header.LastCommitHash = bytes.Repeat([]byte{1}, 32)
		case "evidence_hash":
			pb.Header.EvidenceHash = bytes.Repeat([]byte{1}, 32)
		case "last_commit signature":
			pb.LastCommit.Signatures[0].Signature = nil
		}
		if _, err := blockFromProto(pb, false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s changed: %v, want %q", tc.field, err, tc.want)
		}
	}

	// A wrong data_hash passes here; the record written from the block
	// does not verify (the header's hash is recomputed with it too, so the
	// block id is made to match the header, as a consistent lie would).
	pb := toProto()
	pb.Header.DataHash = bytes.Repeat([]byte{1}, 32)
	bad, err := blockFromProto(pb, false)
	if err != nil {
		t.Fatalf("a wrong data_hash refused by the source: %v", err)
	}
	// Where the loader recomputes nothing (--verify-blocks links), the
	// source checks it itself, as CometBFT's BlockFromProto does.
	if _, err := blockFromProto(pb, true); err == nil || !strings.Contains(err.Error(), "wrong Header.DataHash") {
		t.Errorf("a wrong data_hash with the check asked for: %v, want wrong Header.DataHash", err)
	}
	if _, err := blockFromProto(toProto(), true); err != nil {
		t.Errorf("height %d with its data_hash checked: %v", h, err)
	}
	meta := src.blocks.LoadBlockMeta(h)
	meta.BlockID.Hash = bad.Hash()
	b, ok := appendBlockResult(nil, meta.BlockID, bad)
	if !ok {
		t.Fatal("block not written by appendBlockResult")
	}
	res, err := appendResults(nil, mustResults(t, src, uint64(h)), false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cometbft.VerifyBlock(cometbft.MarshalRecord(b, res))
	var hm *chain.HashMismatchError
	if !errors.As(err, &hm) || hm.What != "data_hash" {
		t.Fatalf("record with a wrong data_hash: %v, want a data_hash mismatch", err)
	}
}

func mustResults(t *testing.T, src *Source, h uint64) any {
	t.Helper()
	r, err := src.openReads()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := src.loadResults(r, h)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
