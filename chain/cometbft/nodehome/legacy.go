package nodehome

import (
	"encoding/base64"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtstate "github.com/cometbft/cometbft/proto/tendermint/state"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
)

// resultBlockResults037 is CometBFT 0.37's /block_results result
// (rpc/core/types ResultBlockResults of v0.37): the fields and JSON names of
// that version, over 0.38's types of the same wire and JSON form
// (ExecTxResult is 0.37's ResponseDeliverTx renamed, with the same fields).
type resultBlockResults037 struct {
	Height                int64                     `json:"height"`
	TxsResults            []*abci.ExecTxResult      `json:"txs_results"`
	BeginBlockEvents      []abci.Event              `json:"begin_block_events"`
	EndBlockEvents        []abci.Event              `json:"end_block_events"`
	ValidatorUpdates      []abci.ValidatorUpdate    `json:"validator_updates"`
	ConsensusParamUpdates *cmtproto.ConsensusParams `json:"consensus_param_updates"`
}

// legacyResults builds what a 0.37 node's rpc/core BlockResults answers
// from its stored ABCIResponses.
func legacyResults(height int64, r *cmtstate.LegacyABCIResponses) *resultBlockResults037 {
	out := &resultBlockResults037{Height: height, TxsResults: r.DeliverTxs}
	if r.BeginBlock != nil {
		out.BeginBlockEvents = r.BeginBlock.Events
	}
	if r.EndBlock != nil {
		out.EndBlockEvents = r.EndBlock.Events
		out.ValidatorUpdates = r.EndBlock.ValidatorUpdates
		out.ConsensusParamUpdates = r.EndBlock.ConsensusParamUpdates
	}
	return out
}

// base64Attributes turns the event attributes of r into the text a 0.34
// node's RPC wrote for them, base64 of their bytes, for libs/json to write
// as strings. An empty one stays "" where that node wrote null (a bytes
// field that proto3 did not store); only the heights libs/json writes
// (with validator or consensus parameter updates) take this path.
func base64Attributes(r *resultBlockResults037) {
	enc := func(events []abci.Event) {
		for i := range events {
			for j := range events[i].Attributes {
				a := &events[i].Attributes[j]
				a.Key = base64.StdEncoding.EncodeToString([]byte(a.Key))
				a.Value = base64.StdEncoding.EncodeToString([]byte(a.Value))
			}
		}
	}
	for _, tx := range r.TxsResults {
		if tx != nil {
			enc(tx.Events)
		}
	}
	enc(r.BeginBlockEvents)
	enc(r.EndBlockEvents)
}
