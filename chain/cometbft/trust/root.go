package trust

import (
	"bytes"
	"fmt"

	"github.com/cometbft/cometbft/types"
)

// FromGenesis returns the state a chain of trust starts from at a chain's
// genesis: its genesis.json's validators (the set of the first two heights,
// as CometBFT's MakeGenesisState makes it) and consensus parameters. A
// genesis without validators (a chain whose application sets them in
// InitChain, or one restarted from an exported state) is refused with a
// *MissingRootError: such a chain needs a trusted header.
func FromGenesis(genesisJSON []byte) (State, error) {
	doc, err := types.GenesisDocFromJSON(genesisJSON)
	if err != nil {
		return State{}, fmt.Errorf("trust: genesis: %w", err)
	}
	if len(doc.Validators) == 0 {
		return State{}, &MissingRootError{Reason: fmt.Sprintf("the genesis of %s names no validators (its application sets them in InitChain)", doc.ChainID)}
	}
	vals := make([]*types.Validator, len(doc.Validators))
	for i, v := range doc.Validators {
		vals[i] = types.NewValidator(v.PubKey, v.Power)
	}
	set, err := newSet(vals)
	if err != nil {
		return State{}, fmt.Errorf("trust: genesis validators: %w", err)
	}
	return State{
		ChainID: doc.ChainID,
		Root:    Root{Kind: "genesis", Height: doc.InitialHeight},
		Height:  doc.InitialHeight - 1,
		Vals:    set, NextVals: set.Copy(),
		Params: *doc.ConsensusParams,
		// MakeGenesisState: the results of no block.
		LastResultsHash: types.NewResults(nil).Hash(),
	}, nil
}

// FromHeader returns the state a chain of trust starts from at a header the
// user trusts: its height and hash, the validator sets of that height and
// the next (a node's /validators, which must hash to the header's
// validators_hash and next_validators_hash: checked when the header is
// proven) and the consensus parameters of that height.
func FromHeader(chainID string, height int64, hash []byte, vals, next *types.ValidatorSet, params types.ConsensusParams) State {
	return State{
		ChainID: chainID,
		Root:    Root{Kind: "header", Height: height, Hash: append([]byte(nil), hash...)},
		Height:  height - 1,
		Vals:    vals, NextVals: next,
		Params: params,
	}
}

// CheckValidators checks that a validator set a node served for a trusted
// header is the one the header names.
func CheckValidators(h *types.Header, vals *types.ValidatorSet, field string, endpoint string) error {
	want := h.ValidatorsHash
	if field == "header.next_validators_hash" {
		want = h.NextValidatorsHash
	}
	if got := vals.Hash(); !bytes.Equal(got, want) {
		return &MismatchError{Height: h.Height, Field: field, Got: want, Want: got, Endpoint: endpoint,
			Note: "the second value is the hash of the validators the node served (/validators)"}
	}
	return nil
}

// newSet builds a validator set, turning CometBFT's panics on an invalid
// one into an error.
func newSet(vals []*types.Validator) (set *types.ValidatorSet, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: invalid validator set: %v", ErrMalformed, r)
		}
	}()
	set = types.NewValidatorSet(vals)
	if err := set.ValidateBasic(); err != nil {
		return nil, fmt.Errorf("%w: invalid validator set: %v", ErrMalformed, err)
	}
	return set, nil
}
