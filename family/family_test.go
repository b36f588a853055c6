package family

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/nodefixture"
	"github.com/blockhaul/blockhaul/loader"
)

// TestLookup: a family is found by its name and aliases in any case, and an
// unknown name is an error naming it and every family.
func TestLookup(t *testing.T) {
	for name, want := range map[string]*Family{
		"cometbft": CometBFT, "Tendermint": CometBFT, " evm ": EVM, "ethereum": EVM, "APTOS": Aptos,
	} {
		if f, err := Lookup(name); err != nil || f != want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", name, f, err, want)
		}
	}
	_, err := Lookup("solana")
	if err == nil || !strings.Contains(err.Error(), `"solana"`) || !strings.Contains(err.Error(), "cometbft or evm or aptos") {
		t.Fatalf("Lookup(solana): %v", err)
	}
	if !slices.Equal(Names(), []string{"cometbft", "evm", "aptos"}) {
		t.Fatalf("Names() = %v", Names())
	}
}

// TestFamiliesAreWhole: every family is found by its ID, builds a decoder,
// a verifier that accepts its own synthetic blocks, and the sources every
// family has; a kind it lacks is an error naming both.
func TestFamiliesAreWhole(t *testing.T) {
	ctx := context.Background()
	if Of(chain.FamilyUnknown) != nil {
		t.Fatal("Of(FamilyUnknown) is a family")
	}
	for _, f := range All() {
		if Of(f.ID) != f || f.Title == "" || f.Rates.ExportBlocksPerSec <= 0 || f.MemoryLimitMiB <= 0 {
			t.Fatalf("%s: incomplete: %+v", f, f)
		}
		dec := f.NewDecoder(DecoderOptions{})
		if dec.Family() != f.ID || len(f.Tables()) == 0 {
			t.Fatalf("%s: decoder of family %s, %d tables", f, dec.Family(), len(f.Tables()))
		}
		src, err := f.Source(SourceSynthetic, SourceOptions{Synthetic: SyntheticOptions{Seed: 3}})
		if err != nil || src.Family() != f.ID {
			t.Fatalf("%s: synthetic source: %v", f, err)
		}
		bs, err := src.Fetch(ctx, f.Genesis, f.Genesis+2)
		if err != nil || len(bs) != 3 {
			t.Fatalf("%s: synthetic fetch: %d blocks, %v", f, len(bs), err)
		}
		// A family whose nodes do not speak JSON-RPC (Aptos's REST) has
		// no Node; else a node's two calls make the record: its keys are
		// the calls' fields.
		if f.Node.Info == nil {
			if f.Node.Calls[0].Method != "" || f.Node.Calls[1].Method != "" || f.Node.AbsentIsNull {
				t.Fatalf("%s: a Node without Info: %+v", f, f.Node)
			}
		} else {
			for _, c := range f.Node.Calls {
				if c.Method == "" || c.AppendParams == nil || !strings.Contains(string(bs[0].Raw), `"`+c.Field+`":`) {
					t.Fatalf("%s: node call %+v is not one of the record's (%.60s…)", f, c, bs[0].Raw)
				}
			}
			if _, found, err := f.Node.Info("no_such_method", "1", 1, 2); found || err != nil {
				t.Fatalf("%s: an unknown method found %v, %v", f, found, err)
			}
		}
		if f.SyntheticDensity == "" {
			t.Fatalf("%s: no synthetic density", f)
		}
		if f.Verifier(chain.VerifyLinks) != nil {
			t.Fatalf("%s: links verification recomputes", f)
		}
		for _, v := range []chain.Verification{chain.VerifyFull, chain.VerifyHeader} {
			for _, b := range bs {
				if h, err := f.Verifier(v)(b.Raw); err != nil || string(h) != string(b.Hash) {
					t.Fatalf("%s: verify %s block %d: %x, %v; want %x", f, v, b.Height, h, err, b.Hash)
				}
			}
		}
		reorg, err := f.Source(SourceSynthetic, SourceOptions{Synthetic: SyntheticOptions{Seed: 3, ReorgEvery: 10, ReorgDepth: 2, Tip: func() uint64 { return 25 }}})
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := reorg.(interface{ Reorgs(uint64) uint64 }); !ok || r.Reorgs(25) != 2 {
			t.Fatalf("%s: a reorganising synthetic chain is %T", f, reorg)
		}
		if _, err := f.Source(SourceRPC, SourceOptions{}); err == nil {
			t.Fatalf("%s: an RPC source without a client", f)
		}
		if _, err := f.Source("carrier-pigeon", SourceOptions{}); err == nil || !strings.Contains(err.Error(), f.Name) || !strings.Contains(err.Error(), "carrier-pigeon") {
			t.Fatalf("%s: unknown source kind: %v", f, err)
		}
	}
}

// TestNodeHomeSource: CometBFT's node-home source reads a recorded node's
// home and gives the records its RPC served, which the family verifies; a
// family without the kind, and a missing home, are refused by name.
func TestNodeHomeSource(t *testing.T) {
	if !CometBFT.Has(SourceNodeHome) || EVM.Has(SourceNodeHome) {
		t.Fatalf("node-home source: cometbft %v, evm %v; want true, false", CometBFT.Has(SourceNodeHome), EVM.Has(SourceNodeHome))
	}
	_, err := EVM.Source(SourceNodeHome, SourceOptions{NodeHome: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "evm: no node-home source") || !strings.Contains(err.Error(), "it has archive, rpc, synthetic") {
		t.Fatalf("evm node-home source: %v", err)
	}
	if src, err := CometBFT.Source(SourceNodeHome, SourceOptions{}); err == nil || src != nil {
		t.Fatalf("node-home source without a home: %v, %v", src, err)
	}

	fx := nodefixture.Load(t, "home-0.38")
	src, err := CometBFT.Source(SourceNodeHome, SourceOptions{NodeHome: fx.Unpack(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer src.(interface{ Close() }).Close()
	var _ loader.Source = src
	ctx := context.Background()
	if tip, err := src.Tip(ctx); err != nil || tip < fx.Tip() || src.Family() != CometBFT.ID {
		t.Fatalf("node-home source: family %s, tip %d, %v; want %s, at least %d", src.Family(), tip, err, CometBFT.ID, fx.Tip())
	}
	bs, err := src.Fetch(ctx, 1, 3)
	if err != nil || len(bs) != 3 {
		t.Fatalf("node-home fetch 1-3: %d blocks, %v", len(bs), err)
	}
	for _, b := range bs {
		if string(b.Raw) != string(fx.Records[b.Height-1]) {
			t.Fatalf("block %d: not the record the RPC served", b.Height)
		}
		if h, err := CometBFT.Verifier(chain.VerifyFull)(b.Raw); err != nil || string(h) != string(b.Hash) {
			t.Fatalf("verify block %d: %x, %v; want %x", b.Height, h, err, b.Hash)
		}
	}
}
