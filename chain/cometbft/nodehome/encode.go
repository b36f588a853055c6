package nodehome

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtbytes "github.com/cometbft/cometbft/libs/bytes"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/cometbft/cometbft/types"
)

// The encoders below write the results of /block and /block_results
// exactly as the node's RPC writes them — libs/json's reflection over the
// rpc/core result types, with gogoproto's jsonpb (EmitDefaults,
// EnumsAsInts, original field names) for the abci types that define
// MarshalJSON (ExecTxResult, EventAttribute), compacted and HTML-escaped by
// encoding/json — without reflection. They are here because that encoding
// was most of the source's time (docs/sources.md, Speed). Each returns
// ok=false, having written nothing it keeps, for a value it does not write
// itself (evidence, validator updates, consensus parameter updates, a time
// outside years 0-9999); the caller then encodes the value with libs/json.
// encode_test.go holds them to libs/json over every height of the recorded
// homes and over generated values.

// appendBlockResult appends the result of /block (ctypes.ResultBlock).
func appendBlockResult(b []byte, id types.BlockID, blk *types.Block) ([]byte, bool) {
	b = append(b, `{"block_id":`...)
	b = appendBlockID(b, id)
	b = append(b, `,"block":`...)
	if blk == nil {
		return append(b, `null}`...), true
	}
	b, ok := appendHeader(append(b, `{"header":`...), &blk.Header)
	if !ok {
		return b, false
	}
	b = append(b, `,"data":{"txs":`...)
	if blk.Data.Txs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, tx := range blk.Data.Txs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendBase64(b, tx)
		}
		b = append(b, ']')
	}
	b = append(b, `},"evidence":{"evidence":`...)
	switch {
	case blk.Evidence.Evidence == nil:
		b = append(b, "null"...)
	case len(blk.Evidence.Evidence) == 0:
		b = append(b, "[]"...)
	default:
		return b, false // an interface list with type envelopes: libs/json's
	}
	b = append(b, `},"last_commit":`...)
	if blk.LastCommit == nil {
		b = append(b, "null"...)
	} else if b, ok = appendCommit(b, blk.LastCommit); !ok {
		return b, false
	}
	return append(b, "}}"...), true
}

func appendHeader(b []byte, h *types.Header) ([]byte, bool) {
	// Version's fields are omitempty (gogoproto's json tags).
	b = append(b, `{"version":{`...)
	if h.Version.Block != 0 {
		b = appendUint64Field(b, `"block":`, h.Version.Block)
	}
	if h.Version.App != 0 {
		if h.Version.Block != 0 {
			b = append(b, ',')
		}
		b = appendUint64Field(b, `"app":`, h.Version.App)
	}
	b = append(b, `},"chain_id":`...)
	b = appendString(b, h.ChainID)
	b = appendInt64Field(b, `,"height":`, h.Height)
	b = append(b, `,"time":`...)
	b, ok := appendTime(b, h.Time)
	if !ok {
		return b, false
	}
	b = append(b, `,"last_block_id":`...)
	b = appendBlockID(b, h.LastBlockID)
	b = appendHexField(b, `,"last_commit_hash":`, h.LastCommitHash)
	b = appendHexField(b, `,"data_hash":`, h.DataHash)
	b = appendHexField(b, `,"validators_hash":`, h.ValidatorsHash)
	b = appendHexField(b, `,"next_validators_hash":`, h.NextValidatorsHash)
	b = appendHexField(b, `,"consensus_hash":`, h.ConsensusHash)
	b = appendHexField(b, `,"app_hash":`, h.AppHash)
	b = appendHexField(b, `,"last_results_hash":`, h.LastResultsHash)
	b = appendHexField(b, `,"evidence_hash":`, h.EvidenceHash)
	b = appendHexField(b, `,"proposer_address":`, h.ProposerAddress)
	return append(b, '}'), true
}

func appendBlockID(b []byte, id types.BlockID) []byte {
	b = appendHexField(b, `{"hash":`, id.Hash)
	b = append(b, `,"parts":{"total":`...)
	b = strconv.AppendUint(b, uint64(id.PartSetHeader.Total), 10)
	b = appendHexField(b, `,"hash":`, id.PartSetHeader.Hash)
	return append(b, "}}"...)
}

func appendCommit(b []byte, c *types.Commit) ([]byte, bool) {
	b = appendInt64Field(b, `{"height":`, c.Height)
	b = append(b, `,"round":`...)
	b = strconv.AppendInt(b, int64(c.Round), 10)
	b = append(b, `,"block_id":`...)
	b = appendBlockID(b, c.BlockID)
	b = append(b, `,"signatures":`...)
	if c.Signatures == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range c.Signatures {
			if i > 0 {
				b = append(b, ',')
			}
			sig := &c.Signatures[i]
			b = append(b, `{"block_id_flag":`...)
			b = strconv.AppendUint(b, uint64(sig.BlockIDFlag), 10)
			b = appendHexField(b, `,"validator_address":`, sig.ValidatorAddress)
			b = append(b, `,"timestamp":`...)
			var ok bool
			if b, ok = appendTime(b, sig.Timestamp); !ok {
				return b, false
			}
			b = append(b, `,"signature":`...)
			b = appendBase64(b, sig.Signature)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

// appendBlockResults appends the result of /block_results of a 0.38 node
// (ctypes.ResultBlockResults).
func appendBlockResults(b []byte, r *ctypes.ResultBlockResults) ([]byte, bool) {
	if !plainUpdates(r.ValidatorUpdates, r.ConsensusParamUpdates == nil) {
		return b, false
	}
	b = appendInt64Field(b, `{"height":`, r.Height)
	b = appendTxResults(append(b, `,"txs_results":`...), r.TxsResults)
	b = appendEvents(append(b, `,"finalize_block_events":`...), r.FinalizeBlockEvents)
	b = appendNoUpdates(b, r.ValidatorUpdates)
	b = append(b, `,"app_hash":`...)
	b = appendBase64(b, r.AppHash)
	return append(b, '}'), true
}

// appendLegacyResults appends the result of /block_results of a 0.37
// node (resultBlockResults037), or of a 0.34 node when bytesAttrs: its
// event attributes are bytes, written in base64 (bytesAttr).
func appendLegacyResults(b []byte, r *resultBlockResults037, bytesAttrs bool) ([]byte, bool) {
	if !plainUpdates(r.ValidatorUpdates, r.ConsensusParamUpdates == nil) {
		return b, false
	}
	b = appendInt64Field(b, `{"height":`, r.Height)
	b = appendTxResultsAs(append(b, `,"txs_results":`...), r.TxsResults, bytesAttrs)
	b = appendEventsAs(append(b, `,"begin_block_events":`...), r.BeginBlockEvents, bytesAttrs)
	b = appendEventsAs(append(b, `,"end_block_events":`...), r.EndBlockEvents, bytesAttrs)
	b = appendNoUpdates(b, r.ValidatorUpdates)
	return append(b, '}'), true
}

// plainUpdates reports whether a height's results carry no validator and
// no consensus parameter updates, the only ones these encoders write.
func plainUpdates(vals []abci.ValidatorUpdate, noParams bool) bool {
	return len(vals) == 0 && noParams
}

// appendNoUpdates writes the validator and consensus parameter updates of
// results that carry none (plainUpdates).
func appendNoUpdates(b []byte, vals []abci.ValidatorUpdate) []byte {
	if vals == nil {
		return append(b, `,"validator_updates":null,"consensus_param_updates":null`...)
	}
	return append(b, `,"validator_updates":[],"consensus_param_updates":null`...)
}

// appendTxResults writes a list of *ExecTxResult as libs/json does: each
// through its MarshalJSON (jsonpb).
func appendTxResults(b []byte, txs []*abci.ExecTxResult) []byte {
	return appendTxResultsAs(b, txs, false)
}

func appendTxResultsAs(b []byte, txs []*abci.ExecTxResult, bytesAttrs bool) []byte {
	if txs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, tx := range txs {
		if i > 0 {
			b = append(b, ',')
		}
		if tx == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, `{"code":`...)
		b = strconv.AppendUint(b, uint64(tx.Code), 10)
		b = append(b, `,"data":`...)
		b = appendBase64(b, tx.Data)
		b = append(b, `,"log":`...)
		b = appendString(b, tx.Log)
		b = append(b, `,"info":`...)
		b = appendString(b, tx.Info)
		b = appendInt64Field(b, `,"gas_wanted":`, tx.GasWanted)
		b = appendInt64Field(b, `,"gas_used":`, tx.GasUsed)
		b = append(b, `,"events":[`...)
		for j := range tx.Events {
			if j > 0 {
				b = append(b, ',')
			}
			// jsonpb, EmitDefaults: every field, a nil list as [].
			b = append(b, `{"type":`...)
			b = appendString(b, tx.Events[j].Type)
			b = appendAttributes(append(b, `,"attributes":`...), tx.Events[j].Attributes, true, bytesAttrs)
			b = append(b, '}')
		}
		b = append(b, `],"codespace":`...)
		b = appendString(b, tx.Codespace)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendEvents writes a list of abci.Event as libs/json does: by
// reflection, so its omitempty tags hold (an empty type and a nil
// attribute list are left out), each attribute through its MarshalJSON.
func appendEvents(b []byte, events []abci.Event) []byte {
	return appendEventsAs(b, events, false)
}

func appendEventsAs(b []byte, events []abci.Event, bytesAttrs bool) []byte {
	if events == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range events {
		if i > 0 {
			b = append(b, ',')
		}
		ev := &events[i]
		b = append(b, '{')
		if ev.Type != "" {
			b = append(b, `"type":`...)
			b = appendString(b, ev.Type)
		}
		if ev.Attributes != nil {
			if ev.Type != "" {
				b = append(b, ',')
			}
			b = appendAttributes(append(b, `"attributes":`...), ev.Attributes, false, bytesAttrs)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendAttributes writes attributes in jsonpb's form; a nil list is []
// when nilAsEmpty (jsonpb's own lists), else null. With bytesAttrs, key
// and value are written as the bytes they are in 0.34 (bytesAttr).
func appendAttributes(b []byte, attrs []abci.EventAttribute, nilAsEmpty, bytesAttrs bool) []byte {
	if attrs == nil && !nilAsEmpty {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range attrs {
		if i > 0 {
			b = append(b, ',')
		}
		a := &attrs[i]
		b = append(b, `{"key":`...)
		if bytesAttrs {
			b = appendBytesAttr(b, a.Key)
			b = appendBytesAttr(append(b, `,"value":`...), a.Value)
		} else {
			b = appendString(b, a.Key)
			b = appendString(append(b, `,"value":`...), a.Value)
		}
		if a.Index {
			b = append(b, `,"index":true}`...)
		} else {
			b = append(b, `,"index":false}`...)
		}
	}
	return append(b, ']')
}

// appendString writes s as encoding/json does with HTML escaping (its
// Encoder's default, and json.Marshal's): the common case of printable
// ASCII with nothing to escape is copied; anything else is left to
// encoding/json (control characters, quotes, <>&, U+2028/9, invalid UTF-8).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendBytesAttr writes an event attribute's key or value as a 0.34
// node's RPC wrote it: a bytes field (0.34's EventAttribute), through
// jsonpb, so base64 in quotes — and null when empty, because proto3 does
// not store an empty bytes field and it decodes as nil. (0.37 made them
// strings of the same wire form, which is how 0.38's types read them.)
func appendBytesAttr(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, []byte(s))
	return append(b, '"')
}

// appendBase64 writes a []byte as encoding/json does: null when nil, else
// standard base64 in quotes.
func appendBase64(b, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

const upperHex = "0123456789ABCDEF"

// appendHexField writes name then a HexBytes as its MarshalJSON does:
// upper-case hex in quotes, "" when nil.
func appendHexField(b []byte, name string, v cmtbytes.HexBytes) []byte {
	b = append(b, name...)
	b = append(b, '"')
	for _, c := range v {
		b = append(b, upperHex[c>>4], upperHex[c&0x0f])
	}
	return append(b, '"')
}

// appendInt64Field writes name then a 64-bit integer in quotes, as
// libs/json and jsonpb both write one.
func appendInt64Field(b []byte, name string, v int64) []byte {
	b = append(b, name...)
	b = append(b, '"')
	b = strconv.AppendInt(b, v, 10)
	return append(b, '"')
}

func appendUint64Field(b []byte, name string, v uint64) []byte {
	b = append(b, name...)
	b = append(b, '"')
	b = strconv.AppendUint(b, v, 10)
	return append(b, '"')
}

// appendTime writes t as libs/json does: rounded (monotonic reading
// dropped), in UTC, through time.Time's MarshalJSON (RFC 3339 with
// nanoseconds, trailing zeros trimmed), which fails outside years 0-9999:
// ok=false then.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	t = t.Round(0).UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}
