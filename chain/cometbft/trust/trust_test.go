package trust_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cometbft/cometbft/crypto"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"

	"github.com/blockhaul/blockhaul/chain/cometbft/trust"
	"github.com/blockhaul/blockhaul/chain/cometbft/trust/trusttest"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// changing is a chain whose validator set and parameters change: a
// validator joins at 5 (so signs from 7), one changes power at 10, one
// leaves at 15, the block size changes at 12.
func changing(o trusttest.Options) trusttest.Options {
	o.Updates = func(h int64) map[int]int64 {
		switch h {
		case 5:
			return map[int]int64{4: 25}
		case 10:
			return map[int]int64{1: 40}
		case 15:
			return map[int]int64{2: 0}
		}
		return nil
	}
	o.Params = func(h int64) *cmtproto.ConsensusParams {
		if h == 12 {
			return &cmtproto.ConsensusParams{Block: &cmtproto.BlockParams{MaxBytes: 1 << 20, MaxGas: 5_000_000}}
		}
		return nil
	}
	o.Txs = 3
	return o
}

func build(t *testing.T, n int, o trusttest.Options) *trusttest.Chain {
	t.Helper()
	c, err := trusttest.Build(n, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func genesisChain(t *testing.T, c *trusttest.Chain, mode trust.Mode) *trust.Chain {
	t.Helper()
	st, err := trust.FromGenesis(c.Genesis)
	if err != nil {
		t.Fatal(err)
	}
	return trust.New(st, mode)
}

// proveAll proves c's records in batches of size, each batch's last commit
// from the next record (or the /commit answer for the last).
func proveAll(tc *trust.Chain, c *trusttest.Chain, from, size int) error {
	for i := from; i < len(c.Records); i += size {
		end := min(i+size, len(c.Records))
		succ := c.LastCommit
		if end < len(c.Records) {
			succ = c.Records[end]
		}
		if err := tc.Prove(c.Records[i:end], succ); err != nil {
			return err
		}
	}
	return nil
}

func TestProveFromGenesis(t *testing.T) {
	for _, secp := range []bool{false, true} {
		c := build(t, 30, changing(trusttest.Options{Secp256k1: secp}))
		for _, mode := range []trust.Mode{trust.Every, trust.Changes} {
			for _, size := range []int{1, 7, 30} {
				tc := genesisChain(t, c, mode)
				if err := proveAll(tc, c, 0, size); err != nil {
					t.Fatalf("secp256k1 %v, mode %s, batches of %d: %v", secp, mode, size, err)
				}
				if h, root := tc.Proven(); h != 30 || root.Kind != "genesis" {
					t.Fatalf("proven to %d from %s, want 30 from genesis", h, root)
				}
				batches := int64((30 + size - 1) / size)
				switch mode {
				case trust.Every:
					if tc.Commits != 30 {
						t.Errorf("every: %d commits checked, want 30", tc.Commits)
					}
				case trust.Changes:
					// The set changes at 6 (the next set of 6 has the
					// joiner), 11 and 16, and every batch's last height.
					if tc.Commits > batches+3 || tc.Commits < batches {
						t.Errorf("changes, batches of %d: %d commits checked, want %d to %d", size, tc.Commits, batches, batches+3)
					}
				}
			}
		}
	}
}

func TestCheckpointContinues(t *testing.T) {
	c := build(t, 30, changing(trusttest.Options{}))
	tc := genesisChain(t, c, trust.Changes)
	if err := tc.Prove(c.Records[:13], c.Records[13]); err != nil {
		t.Fatal(err)
	}
	b, err := tc.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	st, err := trust.ProvenState(b)
	if err != nil {
		t.Fatal(err)
	}
	// From the checkpoint's root, the chain proves 1..13 again with the
	// stored proof of 13.
	fromRoot, err := trust.OpenCheckpoint(b, trust.Every, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := fromRoot.Prove(c.Records[:13], fromRoot.Proof()); err != nil {
		t.Fatal(err)
	}
	if st.Height != 13 || st.Vals.Hash() == nil || string(st.Vals.Hash()) != string(tc.State().Vals.Hash()) {
		t.Fatalf("checkpoint at %d, vals %X; want 13, %X", st.Height, st.Vals.Hash(), tc.State().Vals.Hash())
	}
	again := trust.New(st, trust.Every)
	if err := proveAll(again, c, 13, 5); err != nil {
		t.Fatal(err)
	}
	if h, _ := again.Proven(); h != 30 {
		t.Fatalf("proven to %d, want 30", h)
	}
}

func TestProveFromHeader(t *testing.T) {
	c := build(t, 30, changing(trusttest.Options{}))
	// Block 10's hash, as a user would give it.
	full := genesisChain(t, c, trust.Every)
	if err := full.Prove(c.Records[:10], c.Records[10]); err != nil {
		t.Fatal(err)
	}
	hash := full.State().LastBlockID.Hash
	st := trust.FromHeader("trusttest-1", 10, hash, c.Sets[10], c.Sets[11], c.Params[10])
	tc := trust.New(st, trust.Changes)
	if err := proveAll(tc, c, 9, 8); err != nil {
		t.Fatal(err)
	}
	if h, root := tc.Proven(); h != 30 || root.Kind != "header" || root.Height != 10 {
		t.Fatalf("proven to %d from %s", h, root)
	}

	// A wrong hash is refused at the root's height.
	bad := append([]byte(nil), hash...)
	bad[0] ^= 1
	tc = trust.New(trust.FromHeader("trusttest-1", 10, bad, c.Sets[10], c.Sets[11], c.Params[10]), trust.Changes)
	expectMismatch(t, tc.Prove(c.Records[9:12], c.Records[12]), 10, "trust root")

	// Validators that a node served and that are not the header's.
	tc = trust.New(trust.FromHeader("trusttest-1", 10, hash, c.Sets[3], c.Sets[11], c.Params[10]), trust.Changes)
	expectMismatch(t, tc.Prove(c.Records[9:12], c.Records[12]), 10, "header.validators_hash")
}

func expectMismatch(t *testing.T, err error, height int64, field string) {
	t.Helper()
	var me *trust.MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("want a mismatch at %d in %s, got %v", height, field, err)
	}
	if me.Height != height || !strings.Contains(me.Field, field) {
		t.Fatalf("want a mismatch at %d in %s, got %v", height, field, err)
	}
	if fault.Of(err) != fault.Data {
		t.Fatalf("class %s, want data", fault.Of(err))
	}
	t.Log(err)
}

// The negative controls: each lie is refused at its height.
func TestRefused(t *testing.T) {
	c := build(t, 20, changing(trusttest.Options{}))

	t.Run("rewritten history signed by keys outside the set", func(t *testing.T) {
		outsiders := []crypto.PrivKey{trusttest.Key(100, false), trusttest.Key(101, false), trusttest.Key(102, false), trusttest.Key(103, false), trusttest.Key(104, false)}
		o := changing(trusttest.Options{})
		o.Signers = func(h int64) []crypto.PrivKey {
			if h >= 8 {
				return outsiders
			}
			return nil
		}
		o.Txs = 5 // other content: every hash recomputed
		fake := build(t, 20, o)
		for _, mode := range []trust.Mode{trust.Every, trust.Changes} {
			tc := genesisChain(t, c, mode)
			err := proveAll(tc, fake, 0, 20)
			// Every mode finds the first forged commit, changes mode the
			// first it checks (the set change at 11).
			want := int64(8)
			if mode == trust.Changes {
				want = 11
			}
			expectMismatch(t, err, want, "commit signatures")
			if h, _ := tc.Proven(); h != 0 {
				t.Fatalf("%s: a failed batch moved the chain to %d", mode, h)
			}
		}
		// A whole other chain: its validators are not genesis's.
		other := build(t, 5, trusttest.Options{ChainID: "trusttest-1", Validators: 5})
		tc := genesisChain(t, c, trust.Changes)
		expectMismatch(t, proveAll(tc, other, 0, 5), 1, "header.validators_hash")
	})

	t.Run("commit under 2/3 of the power", func(t *testing.T) {
		o := changing(trusttest.Options{})
		o.Absent = func(h int64) []int {
			if h == 3 {
				return []int{0, 1}
			}
			return nil
		}
		weak := build(t, 20, o)
		tc := genesisChain(t, weak, trust.Every)
		expectMismatch(t, proveAll(tc, weak, 0, 20), 3, "commit signatures")
		// Changes mode checks it where a batch ends on it.
		tc = genesisChain(t, weak, trust.Changes)
		expectMismatch(t, tc.Prove(weak.Records[:3], weak.Records[3]), 3, "commit signatures")
	})

	t.Run("validator update removed", func(t *testing.T) {
		recs := clone(c.Records)
		recs[4] = trusttest.Edit(recs[4], func(r map[string]any) { res(r)["validator_updates"] = nil })
		tc := genesisChain(t, c, trust.Changes)
		expectMismatch(t, tc.Prove(recs, c.LastCommit), 6, "header.next_validators_hash")
	})

	t.Run("consensus parameter update changed", func(t *testing.T) {
		recs := clone(c.Records)
		recs[11] = trusttest.Edit(recs[11], func(r map[string]any) {
			res(r)["consensus_param_updates"].(map[string]any)["block"].(map[string]any)["max_gas"] = "6000000"
		})
		tc := genesisChain(t, c, trust.Changes)
		expectMismatch(t, tc.Prove(recs, c.LastCommit), 13, "header.consensus_hash")
	})

	t.Run("results changed in a deterministic field", func(t *testing.T) {
		recs := clone(c.Records)
		recs[7] = trusttest.Edit(recs[7], func(r map[string]any) {
			res(r)["txs_results"].([]any)[1].(map[string]any)["gas_used"] = "1"
		})
		tc := genesisChain(t, c, trust.Changes)
		expectMismatch(t, tc.Prove(recs, c.LastCommit), 9, "header.last_results_hash")

		// A field CometBFT does not hash (the log) is not refused.
		recs = clone(c.Records)
		recs[7] = trusttest.Edit(recs[7], func(r map[string]any) {
			res(r)["txs_results"].([]any)[1].(map[string]any)["log"] = "another log"
		})
		tc = genesisChain(t, c, trust.Changes)
		if err := tc.Prove(recs, c.LastCommit); err != nil {
			t.Fatalf("a change to a field no hash covers: %v", err)
		}
	})

	t.Run("a commit changed where no signature is checked", func(t *testing.T) {
		recs := clone(c.Records)
		recs[3] = trusttest.Edit(recs[3], func(r map[string]any) {
			sigs := r["block"].(map[string]any)["block"].(map[string]any)["last_commit"].(map[string]any)["signatures"].([]any)
			sigs[0].(map[string]any)["timestamp"] = "2024-01-02T03:05:00Z"
		})
		tc := genesisChain(t, c, trust.Changes)
		expectMismatch(t, tc.Prove(recs, c.LastCommit), 4, "header.last_commit_hash")
	})

	t.Run("no commit for the last height", func(t *testing.T) {
		tc := genesisChain(t, c, trust.Changes)
		var mc *trust.MissingCommitError
		if err := tc.Prove(c.Records[:5], nil); !errors.As(err, &mc) || mc.Height != 5 {
			t.Fatalf("want a missing commit at 5, got %v", err)
		}
	})
}

func TestUnsupportedKeyRefusedByName(t *testing.T) {
	c := build(t, 3, trusttest.Options{})
	recs := clone(c.Records)
	recs[1] = trusttest.Edit(recs[1], func(r map[string]any) {
		res(r)["validator_updates"] = []any{map[string]any{"pub_key_type": "bls12_381", "pub_key_bytes": "AAAA", "power": "5"}}
	})
	tc := genesisChain(t, c, trust.Changes)
	err := tc.Prove(recs, c.LastCommit)
	if !errors.Is(err, trust.ErrKeyType) || !strings.Contains(err.Error(), "bls12_381") || !strings.Contains(err.Error(), "block 2") {
		t.Fatalf("want bls12_381 refused by name at block 2, got %v", err)
	}
}

func TestGenesisWithoutValidators(t *testing.T) {
	_, err := trust.FromGenesis([]byte(`{"chain_id":"x","genesis_time":"2024-01-01T00:00:00Z","initial_height":"1"}`))
	var mr *trust.MissingRootError
	if !errors.As(err, &mr) || fault.Of(err) != fault.Config {
		t.Fatalf("want a missing root (configuration), got %v", err)
	}
}

func clone(recs [][]byte) [][]byte { return append([][]byte(nil), recs...) }

func res(r map[string]any) map[string]any { return r["block_results"].(map[string]any) }
