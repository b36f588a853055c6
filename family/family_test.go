package family

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
)

// TestLookup: a family is found by its name and aliases in any case, and an
// unknown name is an error naming it and every family.
func TestLookup(t *testing.T) {
	for name, want := range map[string]*Family{
		"cometbft": CometBFT, "Tendermint": CometBFT, " evm ": EVM, "ethereum": EVM,
	} {
		if f, err := Lookup(name); err != nil || f != want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", name, f, err, want)
		}
	}
	_, err := Lookup("solana")
	if err == nil || !strings.Contains(err.Error(), `"solana"`) || !strings.Contains(err.Error(), "cometbft or evm") {
		t.Fatalf("Lookup(solana): %v", err)
	}
	if !slices.Equal(Names(), []string{"cometbft", "evm"}) {
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
