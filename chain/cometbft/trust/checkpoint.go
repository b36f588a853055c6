package trust

import (
	"encoding/json"
	"fmt"

	"github.com/cometbft/cometbft/crypto/encoding"
	cmtcrypto "github.com/cometbft/cometbft/proto/tendermint/crypto"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	"github.com/cometbft/cometbft/types"

	"github.com/blockhaul/blockhaul/internal/fault"
)

// checkpoint is a State as staging keeps it (JSON; keys and parameters as
// their protobuf bytes). Proposer priorities are not kept: they are in no
// hash and no commit check, and the order of a set is its voting power and
// addresses'.
type checkpoint struct {
	Version         int      `json:"version"`
	ChainID         string   `json:"chain_id"`
	RootKind        string   `json:"root_kind"`
	RootHeight      int64    `json:"root_height"`
	RootHash        []byte   `json:"root_hash,omitempty"`
	Height          int64    `json:"height"`
	LastBlockHash   []byte   `json:"last_block_hash,omitempty"`
	Vals            []valKey `json:"vals"`
	NextVals        []valKey `json:"next_vals"`
	Params          []byte   `json:"params"`
	LastResultsHash []byte   `json:"last_results_hash,omitempty"`
}

type valKey struct {
	Key   []byte `json:"key"` // a tendermint.crypto.PublicKey message
	Power int64  `json:"power"`
}

// Marshal encodes the state for a checkpoint.
func (st State) Marshal() ([]byte, error) {
	c := checkpoint{Version: 1, ChainID: st.ChainID, RootKind: st.Root.Kind, RootHeight: st.Root.Height, RootHash: st.Root.Hash,
		Height: st.Height, LastBlockHash: st.LastBlockID.Hash, LastResultsHash: st.LastResultsHash}
	var err error
	if c.Vals, err = keysOf(st.Vals); err != nil {
		return nil, err
	}
	if c.NextVals, err = keysOf(st.NextVals); err != nil {
		return nil, err
	}
	p := st.Params.ToProto()
	if c.Params, err = p.Marshal(); err != nil {
		return nil, fmt.Errorf("trust: checkpoint: %w", err)
	}
	return json.Marshal(c)
}

func keysOf(set *types.ValidatorSet) ([]valKey, error) {
	out := make([]valKey, len(set.Validators))
	for i, v := range set.Validators {
		pk, err := encoding.PubKeyToProto(v.PubKey)
		if err != nil {
			return nil, fmt.Errorf("trust: checkpoint: %w", err)
		}
		if out[i].Key, err = pk.Marshal(); err != nil {
			return nil, fmt.Errorf("trust: checkpoint: %w", err)
		}
		out[i].Power = v.VotingPower
	}
	return out, nil
}

// stored is a chain of trust as staging keeps it: the state after the last
// proven height, the state at the root, and the last height's proof.
type stored struct {
	Version int             `json:"version"`
	State   json.RawMessage `json:"state"`
	Root    json.RawMessage `json:"root"`
	Proof   []byte          `json:"proof,omitempty"`
}

func marshalCheckpoint(c *Chain) ([]byte, error) {
	st, err := c.st.Marshal()
	if err != nil {
		return nil, err
	}
	root, err := c.root.Marshal()
	if err != nil {
		return nil, err
	}
	return json.Marshal(stored{Version: 1, State: st, Root: root, Proof: c.proof})
}

// OpenCheckpoint reads a checkpoint (Chain.Checkpoint): the chain that
// continues from it and, if fromRoot, the chain that starts again from its
// root instead (verify's), with the stored proof of the last height.
func OpenCheckpoint(b []byte, mode Mode, fromRoot bool) (*Chain, error) {
	c, err := openCheckpoint(b, mode, fromRoot)
	if err != nil {
		return nil, fault.Mark(fmt.Errorf("staging's chain-of-trust checkpoint: %w", err), fault.Data)
	}
	return c, nil
}

func openCheckpoint(b []byte, mode Mode, fromRoot bool) (*Chain, error) {
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: checkpoint: %v", ErrMalformed, err)
	}
	if s.Version != 1 {
		return nil, fmt.Errorf("%w: checkpoint version %d (this blockhaul reads 1)", ErrMalformed, s.Version)
	}
	st, err := UnmarshalState(s.State)
	if err != nil {
		return nil, err
	}
	root, err := UnmarshalState(s.Root)
	if err != nil {
		return nil, err
	}
	c := &Chain{Mode: mode, st: st, root: root, proof: s.Proof}
	if fromRoot {
		c.st = root
	}
	return c, nil
}

// ProvenState is the state after the last height a checkpoint proved.
func ProvenState(b []byte) (State, error) {
	c, err := OpenCheckpoint(b, Changes, false)
	if err != nil {
		return State{}, err
	}
	return c.st, nil
}

// StoredProof is the proof of the last height a checkpoint proved.
func StoredProof(b []byte) ([]byte, int64, error) {
	c, err := OpenCheckpoint(b, Changes, false)
	if err != nil {
		return nil, 0, err
	}
	return c.proof, c.st.Height, nil
}

// UnmarshalState decodes a state written by State.Marshal.
func UnmarshalState(b []byte) (State, error) {
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return State{}, fmt.Errorf("%w: checkpoint: %v", ErrMalformed, err)
	}
	if c.Version != 1 {
		return State{}, fmt.Errorf("%w: checkpoint version %d (this blockhaul reads 1)", ErrMalformed, c.Version)
	}
	st := State{ChainID: c.ChainID, Root: Root{Kind: c.RootKind, Height: c.RootHeight, Hash: c.RootHash}, Height: c.Height,
		LastBlockID: types.BlockID{Hash: c.LastBlockHash}, LastResultsHash: c.LastResultsHash}
	var err error
	if st.Vals, err = setOf(c.Vals); err != nil {
		return State{}, err
	}
	if st.NextVals, err = setOf(c.NextVals); err != nil {
		return State{}, err
	}
	var p cmtproto.ConsensusParams
	if err := p.Unmarshal(c.Params); err != nil {
		return State{}, fmt.Errorf("%w: checkpoint params: %v", ErrMalformed, err)
	}
	st.Params = types.ConsensusParamsFromProto(p)
	return st, nil
}

func setOf(keys []valKey) (*types.ValidatorSet, error) {
	vals := make([]*types.Validator, len(keys))
	for i, k := range keys {
		var pk cmtcrypto.PublicKey
		if err := pk.Unmarshal(k.Key); err != nil {
			return nil, fmt.Errorf("%w: checkpoint key: %v", ErrMalformed, err)
		}
		key, err := encoding.PubKeyFromProto(pk)
		if err != nil {
			return nil, fmt.Errorf("%w: checkpoint key: %v", ErrMalformed, err)
		}
		vals[i] = types.NewValidator(key, k.Power)
	}
	return newSet(vals)
}
