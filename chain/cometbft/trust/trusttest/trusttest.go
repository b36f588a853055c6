// Package trusttest builds small CometBFT chains for the chain of trust's
// tests with CometBFT's own types: blocks made by types.MakeBlock, commits
// whose votes are signed by ed25519 (or secp256k1) keys over
// types.VoteSignBytes, validator sets changed with UpdateWithChangeSet,
// and records printed with CometBFT's libs/json as a node's /block and
// /block_results print them. Tests change what a Chain builds (a update
// dropped, a signer swapped) to play a node that lies.
package trusttest

import (
	"encoding/json"
	"fmt"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/crypto/secp256k1"
	cmtjson "github.com/cometbft/cometbft/libs/json"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	cmtversion "github.com/cometbft/cometbft/proto/tendermint/version"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/cometbft/cometbft/types"
	"github.com/cometbft/cometbft/version"

	"github.com/blockhaul/blockhaul/chain/cometbft"
)

// Options shape a Chain.
type Options struct {
	ChainID    string
	Validators int  // genesis validators; default 4
	Secp256k1  bool // keys are secp256k1, not ed25519
	// Updates returns the validator updates block h's results carry
	// (keys by index into Keys; power 0 removes). Nil: none.
	Updates func(h int64) map[int]int64
	// Params returns the consensus-parameter update of block h's results;
	// nil: none.
	Params func(h int64) *cmtproto.ConsensusParams
	// Txs is the number of transactions in each block.
	Txs int
	// Absent returns the validators (by index in the signing set) whose
	// votes are absent from the commit of height h.
	Absent func(h int64) []int
	// Signers, if set, replaces the keys that sign the commit of height h
	// (an attacker's keys): returns nil to keep the real ones.
	Signers func(h int64) []crypto.PrivKey
}

// Chain is a built chain: its genesis, records and the /commit answer of
// its last height.
type Chain struct {
	Genesis []byte
	Records [][]byte
	// LastCommit is the /commit answer of the last height.
	LastCommit []byte
	Keys       []crypto.PrivKey
	// Sets[h] is the validator set of height h (h up to the last + 2).
	Sets map[int64]*types.ValidatorSet
	// Params[h] are the consensus parameters of height h.
	Params map[int64]types.ConsensusParams
}

// Key returns the deterministic key of validator i.
func Key(i int, secp bool) crypto.PrivKey {
	secret := []byte(fmt.Sprintf("blockhaul trusttest validator %d", i))
	if secp {
		return secp256k1.GenPrivKeySecp256k1(secret)
	}
	return ed25519.GenPrivKeyFromSecret(secret)
}

// Build makes a chain of n heights.
func Build(n int, o Options) (*Chain, error) {
	if o.ChainID == "" {
		o.ChainID = "trusttest-1"
	}
	if o.Validators == 0 {
		o.Validators = 4
	}
	keyType := "ed25519"
	if o.Secp256k1 {
		keyType = "secp256k1"
	}
	c := &Chain{Sets: map[int64]*types.ValidatorSet{}, Params: map[int64]types.ConsensusParams{}}
	keyOf := func(i int) crypto.PrivKey {
		for len(c.Keys) <= i {
			c.Keys = append(c.Keys, Key(len(c.Keys), o.Secp256k1))
		}
		return c.Keys[i]
	}
	byAddr := map[string]crypto.PrivKey{}
	genesisTime := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	doc := types.GenesisDoc{ChainID: o.ChainID, GenesisTime: genesisTime, InitialHeight: 1, ConsensusParams: types.DefaultConsensusParams()}
	doc.ConsensusParams.Validator.PubKeyTypes = []string{keyType}
	var gvals []*types.Validator
	for i := 0; i < o.Validators; i++ {
		k := keyOf(i)
		byAddr[string(k.PubKey().Address())] = k
		doc.Validators = append(doc.Validators, types.GenesisValidator{Address: k.PubKey().Address(), PubKey: k.PubKey(), Power: 10, Name: fmt.Sprintf("v%d", i)})
		gvals = append(gvals, types.NewValidator(k.PubKey(), 10))
	}
	if err := doc.ValidateAndComplete(); err != nil {
		return nil, err
	}
	g, err := cmtjson.MarshalIndent(&doc, "", "  ")
	if err != nil {
		return nil, err
	}
	c.Genesis = g

	vals := types.NewValidatorSet(gvals)
	next := vals.Copy()
	params := *doc.ConsensusParams
	lastResults := types.NewResults(nil).Hash()
	var lastID types.BlockID
	var lastCommit *types.Commit = &types.Commit{}
	var prevVals *types.ValidatorSet
	appHash := []byte{}
	sign := func(h int64, id types.BlockID, set *types.ValidatorSet, t time.Time) (*types.Commit, error) {
		commit := &types.Commit{Height: h, Round: 0, BlockID: id}
		absent := map[int]bool{}
		if o.Absent != nil {
			for _, i := range o.Absent(h) {
				absent[i] = true
			}
		}
		var fake []crypto.PrivKey
		if o.Signers != nil {
			fake = o.Signers(h)
		}
		for i, v := range set.Validators {
			if absent[i] {
				commit.Signatures = append(commit.Signatures, types.NewCommitSigAbsent())
				continue
			}
			k := byAddr[string(v.Address)]
			addr := v.Address
			if fake != nil {
				k = fake[i%len(fake)]
				addr = k.PubKey().Address()
			}
			ts := t.Add(time.Duration(i) * time.Millisecond)
			vote := &types.Vote{Type: cmtproto.PrecommitType, Height: h, Round: 0, BlockID: id, Timestamp: ts,
				ValidatorAddress: addr, ValidatorIndex: int32(i)}
			sig, err := k.Sign(types.VoteSignBytes(o.ChainID, vote.ToProto()))
			if err != nil {
				return nil, err
			}
			commit.Signatures = append(commit.Signatures, types.CommitSig{BlockIDFlag: types.BlockIDFlagCommit,
				ValidatorAddress: addr, Timestamp: ts, Signature: sig})
		}
		return commit, nil
	}
	var pending []struct {
		block *types.Block
		id    types.BlockID
		res   []byte
	}
	for h := int64(1); h <= int64(n); h++ {
		txs := make([]types.Tx, o.Txs)
		results := make([]*abci.ExecTxResult, o.Txs)
		for i := range txs {
			txs[i] = types.Tx(fmt.Sprintf("tx-%d-%d", h, i))
			results[i] = &abci.ExecTxResult{Code: uint32(i % 2), Data: []byte{byte(h), byte(i)}, Log: "log", GasWanted: int64(100 + i), GasUsed: int64(50 + i),
				Events: []abci.Event{{Type: "transfer", Attributes: []abci.EventAttribute{{Key: "amount", Value: fmt.Sprint(h), Index: true}}}}}
		}
		block := types.MakeBlock(h, txs, lastCommit, nil)
		block.Header.Populate(cmtversion.Consensus{Block: version.BlockProtocol, App: 1}, o.ChainID,
			genesisTime.Add(time.Duration(h)*time.Second), lastID, vals.Hash(), next.Hash(), params.Hash(), appHash, lastResults,
			vals.Validators[0].Address)
		ps, err := block.MakePartSet(types.BlockPartSizeBytes)
		if err != nil {
			return nil, err
		}
		id := types.BlockID{Hash: block.Hash(), PartSetHeader: ps.Header()}
		c.Sets[h], c.Sets[h+1], c.Params[h] = vals.Copy(), next.Copy(), params

		// Results, as a node prints them.
		var updates []abci.ValidatorUpdate
		if o.Updates != nil {
			for i, p := range o.Updates(h) {
				k := keyOf(i)
				byAddr[string(k.PubKey().Address())] = k
				updates = append(updates, abci.UpdateValidator(k.PubKey().Bytes(), p, keyType))
			}
		}
		var pu *cmtproto.ConsensusParams
		if o.Params != nil {
			pu = o.Params(h)
		}
		appHash = []byte(fmt.Sprintf("app-hash-%026d", h))
		res, err := cmtjson.Marshal(&ctypes.ResultBlockResults{Height: h, TxsResults: results, ValidatorUpdates: updates,
			ConsensusParamUpdates: pu, AppHash: appHash, FinalizeBlockEvents: []abci.Event{{Type: "mint"}}})
		if err != nil {
			return nil, err
		}
		pending = append(pending, struct {
			block *types.Block
			id    types.BlockID
			res   []byte
		}{block, id, res})

		// The state of the next height, as updateState makes it.
		nn := next.Copy()
		if len(updates) > 0 {
			tv, err := types.PB2TM.ValidatorUpdates(updates)
			if err != nil {
				return nil, err
			}
			if err := nn.UpdateWithChangeSet(tv); err != nil {
				return nil, fmt.Errorf("height %d: %w", h, err)
			}
		}
		if pu != nil {
			params = params.Update(pu)
		}
		prevVals = vals
		vals, next = next, nn
		lastResults = types.NewResults(results).Hash()
		lastID = id
		if lastCommit, err = sign(h, id, prevVals, block.Time.Add(time.Second)); err != nil {
			return nil, err
		}
	}
	for i, p := range pending {
		b, err := cmtjson.Marshal(&ctypes.ResultBlock{BlockID: p.id, Block: p.block})
		if err != nil {
			return nil, err
		}
		c.Records = append(c.Records, cometbft.MarshalRecord(b, p.res))
		if i == len(pending)-1 {
			rc := ctypes.NewResultCommit(&p.block.Header, lastCommit, true)
			if c.LastCommit, err = cmtjson.Marshal(rc); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// Edit decodes a record, lets f change it, and encodes it again (the hashes
// it holds are not recomputed).
func Edit(raw []byte, f func(rec map[string]any)) []byte {
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		panic(err)
	}
	f(rec)
	b, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	return b
}
