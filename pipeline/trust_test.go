package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
)

// editingSource serves its synthetic chain with the records of some
// heights changed by edit (their block hashes unchanged: what changes is
// in the results, which no block hash covers, or in the commit).
type editingSource struct {
	*cometbftsynth.Synthetic
	edit func(h uint64, rec map[string]any) bool
}

func (s *editingSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	bs, err := s.Synthetic.Fetch(ctx, from, to)
	for i := range bs {
		var rec map[string]any
		if json.Unmarshal(bs[i].Raw, &rec) != nil {
			continue
		}
		if s.edit(bs[i].Height, rec) {
			bs[i].Raw, _ = json.Marshal(rec)
		}
	}
	return bs, err
}

func resultsOf(rec map[string]any) map[string]any { return rec["block_results"].(map[string]any) }

func trustFetch(t *testing.T, src loader.Source, stg string, to uint64, root string) error {
	t.Helper()
	cfg := synthConfig(CmdFetch, "cometbft", "", stg, 1, to)
	cfg.Source, cfg.TrustRoot = src, root
	_, err := Run(context.Background(), cfg, &bytes.Buffer{}, quiet)
	return err
}

func highestStaged(t *testing.T, stg string) uint64 {
	t.Helper()
	store, err := staging.Open(stg, staging.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, hi, _, err := store.Bounds()
	if err != nil {
		t.Fatal(err)
	}
	return hi
}

func wantRefused(t *testing.T, err error, height, field string) {
	t.Helper()
	if err == nil || fault.ExitStatus(err) != fault.ExitData || !strings.Contains(err.Error(), "block "+height+":") || !strings.Contains(err.Error(), field) {
		t.Fatalf("want exit 4 naming block %s and %s, got %v", height, field, err)
	}
	t.Log(err)
}

// The negative controls through fetch: each lie is refused with exit 4
// naming its height, and nothing of that height or above is staged.
func TestTrustRefusesLies(t *testing.T) {
	t.Run("a validator update removed from a results record", func(t *testing.T) {
		stg := filepath.Join(t.TempDir(), "s")
		src := &editingSource{Synthetic: cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 1, Tip: func() uint64 { return 400 }}),
			edit: func(h uint64, rec map[string]any) bool {
				if h != 200 {
					return false
				}
				resultsOf(rec)["validator_updates"] = nil
				return true
			}}
		wantRefused(t, trustFetch(t, src, stg, 300, ""), "201", "header.next_validators_hash")
		if hi := highestStaged(t, stg); hi >= 201 {
			t.Fatalf("staged up to %d, past the refused height", hi)
		}
	})
	t.Run("a consensus-parameter update changed", func(t *testing.T) {
		stg := filepath.Join(t.TempDir(), "s")
		src := &editingSource{Synthetic: cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 1, Tip: func() uint64 { return 400 }}),
			edit: func(h uint64, rec map[string]any) bool {
				if h != 120 {
					return false
				}
				resultsOf(rec)["consensus_param_updates"].(map[string]any)["block"].(map[string]any)["max_bytes"] = "123456"
				return true
			}}
		wantRefused(t, trustFetch(t, src, stg, 300, ""), "121", "header.consensus_hash")
	})
	t.Run("a results record changed in a deterministic field", func(t *testing.T) {
		stg := filepath.Join(t.TempDir(), "s")
		src := &editingSource{Synthetic: cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 1, Tip: func() uint64 { return 400 }}),
			edit: func(h uint64, rec map[string]any) bool {
				txs, _ := resultsOf(rec)["txs_results"].([]any)
				if h < 50 || len(txs) == 0 {
					return false
				}
				txs[0].(map[string]any)["gas_used"] = "1"
				return true
			}}
		err := trustFetch(t, src, stg, 300, "")
		if err == nil || !strings.Contains(err.Error(), "header.last_results_hash") {
			t.Fatalf("want last_results_hash refused, got %v", err)
		}
	})
	t.Run("a history rewritten and signed by keys outside the set", func(t *testing.T) {
		// Another chain under the same name, every hash its own, signed by
		// its own validators: the genesis of the real one refuses it.
		real := cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 1})
		genesis := filepath.Join(t.TempDir(), "genesis.json")
		if err := os.WriteFile(genesis, real.Genesis(), 0o644); err != nil {
			t.Fatal(err)
		}
		fake := cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 2, ChainID: "blockhaul-synthetic-1", Tip: func() uint64 { return 400 }})
		stg := filepath.Join(t.TempDir(), "s")
		wantRefused(t, trustFetch(t, fake, stg, 300, genesis), "1", "header.validators_hash")
		// The real chain passes from that root.
		if err := trustFetch(t, cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 1, Tip: func() uint64 { return 400 }}), filepath.Join(t.TempDir(), "s"), 300, genesis); err != nil {
			t.Fatal(err)
		}
	})
}

// A store proven by fetch, then a record flipped in it (rewritten with
// staging's own checksum): verify proves the store again from its root and
// finds it.
func TestVerifyFindsFlippedRecord(t *testing.T) {
	stg := filepath.Join(t.TempDir(), "s")
	src := cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 1, Tip: func() uint64 { return 400 }})
	if err := trustFetch(t, src, stg, 300, ""); err != nil {
		t.Fatal(err)
	}
	verify := func() (string, error) {
		cfg := DefaultConfig()
		cfg.Command, cfg.Staging = CmdVerify, stg
		var out bytes.Buffer
		_, err := Run(context.Background(), cfg, &out, quiet)
		return out.String(), err
	}
	out, err := verify()
	if err != nil || !strings.Contains(out, "trust: proven from genesis to height 300") {
		t.Fatalf("verify of the proven store: %v\n%s", err, out)
	}
	store, err := staging.Open(stg, staging.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.Get(150)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b.Raw, &rec); err != nil {
		t.Fatal(err)
	}
	txs := resultsOf(rec)["txs_results"].([]any)
	txs[0].(map[string]any)["code"] = 7
	b.Raw, _ = json.Marshal(rec)
	if err := store.Delete(150, 150); err != nil {
		t.Fatal(err)
	}
	batch := store.NewBatch()
	if err := batch.Put(b); err != nil {
		t.Fatal(err)
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	batch.Close()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	out, err = verify()
	if fault.ExitStatus(err) != fault.ExitData || !strings.Contains(out, "block 151: header.last_results_hash") {
		t.Fatalf("verify of the flipped store: want exit 4 naming block 151, got %v\n%s", err, out)
	}
	t.Log(out)
}
