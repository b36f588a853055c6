package trust

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	cmtjson "github.com/cometbft/cometbft/libs/json"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/cometbft/cometbft/types"

	"github.com/blockhaul/blockhaul/internal/fault"
)

// GenesisSource serves a chain's genesis document (a node's /genesis, a
// node home's genesis.json, the synthetic chain's).
type GenesisSource interface {
	GenesisJSON(ctx context.Context) ([]byte, error)
}

// HeaderRootSource serves what a trust root at a header needs besides the
// header: the validator sets of its height and the next (a node's
// /validators, every page) and the consensus parameters of its height.
type HeaderRootSource interface {
	ValidatorsJSON(ctx context.Context, h uint64) ([][]byte, error)
	ConsensusParamsJSON(ctx context.Context, h uint64) ([]byte, error)
}

// Options say where a chain of trust starts.
type Options struct {
	Mode Mode
	// Root is the --trust-root value: "" or "genesis" (the source's
	// genesis), a path to a genesis.json, or HEIGHT:HASH (a header the user
	// trusts; its validators are asked of the source).
	Root string
	// Checkpoint is the store's (staging.Store.Trust), if it has one: the
	// chain continues from it, or with FromRoot starts again from its root
	// (unless Root names another).
	Checkpoint []byte
	FromRoot   bool
	// ChainID is the chain the job holds.
	ChainID string
}

// ParseRoot checks a --trust-root value.
func ParseRoot(s string) error {
	_, _, isHeader, err := headerRoot(s)
	if isHeader || err != nil {
		return err
	}
	return nil
}

func headerRoot(s string) (height int64, hash []byte, isHeader bool, err error) {
	h, x, ok := strings.Cut(s, ":")
	if !ok {
		return 0, nil, false, nil
	}
	height, perr := strconv.ParseInt(h, 10, 64)
	if perr != nil {
		return 0, nil, false, nil // a path with a colon
	}
	hash, herr := hex.DecodeString(x)
	if height < 1 || herr != nil || len(hash) != 32 {
		return 0, nil, true, fmt.Errorf("trust root %q: want HEIGHT:HASH, a height and the header's 32-byte hash in hex", s)
	}
	return height, hash, true, nil
}

// Open starts the chain of trust of a job: from the store's checkpoint when
// it has one, else from the root o names, read from src (a GenesisSource,
// or for a header a HeaderRootSource).
func Open(ctx context.Context, src any, o Options) (*Chain, error) {
	if len(o.Checkpoint) > 0 && !(o.FromRoot && o.Root != "") {
		c, err := OpenCheckpoint(o.Checkpoint, o.Mode, o.FromRoot)
		if err != nil {
			return nil, err
		}
		if c.st.ChainID != o.ChainID {
			return nil, fault.Mark(fmt.Errorf("trust: the store's chain of trust is of chain %q, the job's is %q", c.st.ChainID, o.ChainID), fault.Data)
		}
		return c, nil
	}
	height, hash, isHeader, err := headerRoot(o.Root)
	if err != nil {
		return nil, fault.Mark(err, fault.Config)
	}
	var st State
	switch {
	case isHeader:
		hs, ok := src.(HeaderRootSource)
		if !ok {
			return nil, &MissingRootError{Reason: fmt.Sprintf("a trust root at a header needs its validators, and this source cannot serve them (give --rpc)")}
		}
		if st, err = fromServedHeader(ctx, hs, o.ChainID, height, hash); err != nil {
			return nil, err
		}
	case o.Root == "" || o.Root == "genesis":
		gs, ok := src.(GenesisSource)
		if !ok {
			return nil, &MissingRootError{Reason: "this source serves no genesis"}
		}
		g, err := gs.GenesisJSON(ctx)
		if err != nil {
			return nil, fmt.Errorf("trust: genesis: %w", err)
		}
		if st, err = FromGenesis(g); err != nil {
			return nil, err
		}
	default:
		g, err := os.ReadFile(o.Root)
		if err != nil {
			return nil, fault.Mark(fmt.Errorf("trust: --trust-root: %w", err), fault.Config)
		}
		if st, err = FromGenesis(g); err != nil {
			return nil, fault.Mark(err, fault.Config)
		}
	}
	if st.ChainID != o.ChainID {
		return nil, fault.Mark(fmt.Errorf("trust: the trust root is of chain %q, the job's is %q", st.ChainID, o.ChainID), fault.Config)
	}
	return New(st, o.Mode), nil
}

// fromServedHeader reads the validators of height and height+1 and the
// consensus parameters of height from a node. They are checked against the
// trusted header's hashes when that header is proven (its hash is the
// root): a node that serves others is refused there.
func fromServedHeader(ctx context.Context, src HeaderRootSource, chainID string, height int64, hash []byte) (State, error) {
	vals, err := servedSet(ctx, src, height)
	if err != nil {
		return State{}, err
	}
	next, err := servedSet(ctx, src, height+1)
	if err != nil {
		return State{}, err
	}
	b, err := src.ConsensusParamsJSON(ctx, uint64(height))
	if err != nil {
		return State{}, fmt.Errorf("trust: consensus parameters of %d: %w", height, err)
	}
	var cp ctypes.ResultConsensusParams
	if err := cmtjson.Unmarshal(b, &cp); err != nil {
		return State{}, fmt.Errorf("%w: /consensus_params %d: %v", ErrMalformed, height, err)
	}
	return FromHeader(chainID, height, hash, vals, next, cp.ConsensusParams), nil
}

func servedSet(ctx context.Context, src HeaderRootSource, h int64) (*types.ValidatorSet, error) {
	pages, err := src.ValidatorsJSON(ctx, uint64(h))
	if err != nil {
		return nil, fmt.Errorf("trust: validators of %d: %w", h, err)
	}
	var vals []*types.Validator
	for _, p := range pages {
		var rv ctypes.ResultValidators
		if err := cmtjson.Unmarshal(p, &rv); err != nil {
			return nil, fmt.Errorf("%w: /validators %d: %v", ErrMalformed, h, err)
		}
		for _, v := range rv.Validators {
			if v == nil || v.PubKey == nil || !bytes.Equal(v.Address, v.PubKey.Address()) {
				return nil, fmt.Errorf("%w: /validators %d: a validator whose address is not its key's", ErrMalformed, h)
			}
			vals = append(vals, types.NewValidator(v.PubKey, v.VotingPower))
		}
	}
	if len(vals) == 0 {
		return nil, fmt.Errorf("%w: /validators %d: no validators", ErrMalformed, h)
	}
	return newSet(vals)
}

// IsMissingRoot reports whether err is a chain of trust that had nothing
// to start from.
func IsMissingRoot(err error) bool {
	var m *MissingRootError
	return errors.As(err, &m)
}
