package cometbft

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft/protodec"
	"github.com/blockhaul/blockhaul/chain/jsonscan"
)

// Decoder turns raw CometBFT records (see MarshalRecord) into rows of the
// blocks, transactions and events tables. It reads the block_results shapes
// of every CometBFT line found on live networks:
//
//   - 0.34: begin_block_events/end_block_events, attribute keys and values
//     base64-encoded;
//   - 0.37: begin_block_events/end_block_events, plain strings;
//   - 0.38 and later: finalize_block_events, plain strings (Sei's fork:
//     base64, as 0.34);
//
// and stores them in one form: plain text attributes (see Tables). Text
// that PostgreSQL cannot hold, NUL bytes and invalid UTF-8, is replaced by
// U+FFFD (see cleanText); the raw record keeps the original.
//
// # Attribute encoding
//
// block_results says nothing about its version, and forks differ (Sei
// writes base64 attributes in 0.38-shaped results), so the encoding of a
// block's attributes is decided from the attributes themselves, per block,
// over every attribute of the block at once (tx, begin, end and finalize
// events), whatever the shape. Each non-empty key is one of: plain (not
// canonical padded standard base64: wrong length, a character outside
// A–Z a–z 0–9 + / =, non-zero padding bits), a name (base64 of an
// identifier-like key: ASCII letters, digits and _ . - / : @), text
// (base64 of other printable UTF-8) or binary (base64 of anything else).
//
//   - Some key is plain: the block is plain text. A base64 block has no
//     such key; the keys chains use ("spender", "fee", "acc_seq", …) almost
//     all are (wrong length, '_').
//   - No key is a name or text (no keys at all, or only plain words that
//     happen to be base64 of binary bytes: "receiver", "proposer", "mode"):
//     plain text.
//   - Some key is a name, none is binary, and every non-empty value is
//     canonical base64: base64 (0.34, Sei).
//   - Anything else (names beside binary keys, text but no name, base64
//     keys with a value that is not base64) cannot be decided: Decode
//     returns an error wrapping ErrEncodingUndecided that names the
//     height, and the operator chooses with DecoderOptions.EventEncoding
//     (--event-encoding).
//
// For a plain block to be read as base64, every one of its keys would have
// to be base64 of a name (length a multiple of four, every decoded byte an
// identifier byte); one plain key anywhere keeps the block plain, so one odd
// key cannot flip a block.
//
// A Decoder holds no state but its options: it is safe for concurrent use.
type Decoder struct{ opts DecoderOptions }

// DecoderOptions configures a Decoder.
type DecoderOptions struct {
	// EventEncoding overrides the per-block decision of how attributes are
	// written; the zero value decides from the data.
	EventEncoding EventEncoding
	// Messages are the message types decoded into messages.decoded; nil
	// is the built-in set (the Cosmos SDK's and ibc-go's messages).
	Messages *protodec.Set
	// Bech32Prefix is the chain's account address prefix (--bech32-prefix),
	// for the signers column; "" learns it from the chain's own addresses.
	Bech32Prefix string
}

// NewDecoder returns a Decoder that decides attribute encodings from the
// data.
func NewDecoder() *Decoder { return &Decoder{} }

// NewDecoderOptions returns a Decoder configured by opts.
func NewDecoderOptions(opts DecoderOptions) *Decoder { return &Decoder{opts: opts} }

// Family returns chain.FamilyCometBFT.
func (*Decoder) Family() chain.Family { return chain.FamilyCometBFT }

// Tables returns the export tables in the order Decode fills them.
func (*Decoder) Tables() []chain.Table { return slices.Clone(tables) }

// ErrMalformedRecord is wrapped by every decoding error: the raw record is
// not a CometBFT block this decoder can read.
var ErrMalformedRecord = errors.New("malformed record")

// DecodeError is a raw record that could not be decoded.
type DecodeError struct {
	Height uint64
	Err    error // wraps ErrMalformedRecord or ErrEncodingUndecided, or is marked fault.Config (--event-encoding base64 on attributes that are not)
}

func (e *DecodeError) Error() string {
	return "cometbft: decode block " + strconv.FormatUint(e.Height, 10) + ": " + e.Err.Error()
}

func (e *DecodeError) Unwrap() error { return e.Err }

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformedRecord}, args...)...)
}

// Decode appends the rows of the block at height, whose raw record is raw,
// to rows. On error rows are left as they were.
func (d *Decoder) Decode(height uint64, raw []byte, rows *chain.Rows) error {
	st := statePool.Get().(*decodeState)
	defer st.release()
	err := st.parse(raw)
	if err == nil {
		err = st.check(height)
	}
	if err != nil {
		return &DecodeError{Height: height, Err: err}
	}
	st.msgs, st.prefix = d.opts.Messages, d.opts.Bech32Prefix
	lens := rows.Lens()
	if err := st.emit(height, rows, d.opts.EventEncoding); err != nil {
		rows.Truncate(lens)
		return &DecodeError{Height: height, Err: err}
	}
	return nil
}

// BlockIdentity reads a raw record's height, block hash and parent hash
// (nil for the chain's first block), for a source to fill chain.Block
// without decoding the rest.
func BlockIdentity(raw []byte) (hash, parentHash []byte, height uint64, err error) {
	st := statePool.Get().(*decodeState)
	defer st.release()
	v := &st.View
	if err := v.parseBlockHalf(raw); err != nil {
		return nil, nil, 0, fmt.Errorf("cometbft: block identity: %w", err)
	}
	x := hexes{v: v}
	hash = x.of(v.hdr.hash, "block_id.hash")
	if p := v.hdr.parent; !p.Null && p.Len() > 0 {
		parentHash = x.of(p, "header.last_block_id.hash")
	}
	if x.err != nil {
		return nil, nil, 0, fmt.Errorf("cometbft: block identity at height %d: %w", v.hdr.height, x.err)
	}
	return hash, parentHash, uint64(v.hdr.height), nil
}

// decodeState is the scratch of one Decode call: the record's View, turned
// into rows by emit. Pooled, so that a warm decoder allocates only what the
// rows keep.
type decodeState struct {
	View
	txHashes          []any // per tx, its hash cell
	sdk               sdkTx
	msgSigners        []string
	msgs              *protodec.Set // the message types; nil: the built-in set
	prefix            string        // the operator's bech32 prefix, or ""
	b64               bool          // the block's attributes are base64
	signerAddrs       [][]byte      // per signer_infos entry of the tx, its key's address or nil
	accSeq            []string      // the tx's tx.acc_seq addresses when one per signer, else empty
	accountPrefix     string        // blockAccountPrefix, once accountPrefixRead
	accountPrefixRead bool
	scratch2, clean   []byte
}

var statePool = sync.Pool{New: func() any { return new(decodeState) }}

// maxPooledScratch keeps one huge record from pinning its scratch forever.
const maxPooledScratch = 1 << 20

func (st *decodeState) release() {
	scratch2, clean := st.scratch2[:0], st.clean[:0]
	hashes := st.txHashes[:cap(st.txHashes)]
	clear(hashes) // they are the caller's rows' memory
	// sdk points into the caller's rows: cleared, not kept.
	sdk := st.sdk
	sdk.release()
	signers := st.msgSigners[:cap(st.msgSigners)]
	clear(signers)
	addrs := st.signerAddrs[:cap(st.signerAddrs)]
	clear(addrs)
	accSeq := st.accSeq[:cap(st.accSeq)]
	clear(accSeq)
	view := st.View
	view.reset()
	*st = decodeState{
		View:        view,
		sdk:         sdk,
		signerAddrs: addrs[:0],
		msgSigners:  signers[:0],
		accSeq:      accSeq[:0],
		txHashes:    hashes[:0],
	}

	// The scratch buffers hold no references into caller memory: reuse them
	// unless a huge record grew them.
	if cap(scratch2) <= maxPooledScratch && cap(clean) <= maxPooledScratch {
		st.scratch2, st.clean = scratch2, clean
	}
	statePool.Put(st)
}

// text returns a string value as a Go string fit for a text column.
func (st *decodeState) text(r jsonscan.Span) string {
	b := st.bytesOf(r)
	if len(b) == 0 {
		return ""
	}
	if s, ok := internTable[string(b)]; ok {
		return s
	}
	c := cleanText(st.clean, b)
	if &c[0] != &b[0] {
		st.clean = c // keep the grown buffer
	}
	return string(c)
}

// textAny is text for a row cell: interned strings come boxed already, so
// that the common event types cost no allocation.
func (st *decodeState) textAny(r jsonscan.Span) any {
	if b := st.bytesOf(r); len(b) > 0 {
		if v, ok := internBoxed[string(b)]; ok {
			return v
		}
	}
	return st.text(r)
}

// boxedInt32 holds small int32 values already in interfaces: event and tx
// indexes would otherwise cost an allocation per row.
var boxedInt32 = func() (t [4096]any) {
	for i := range t {
		t[i] = int32(i)
	}
	return t
}()

func boxInt32(v int32) any {
	if v >= 0 && int(v) < len(boxedInt32) {
		return boxedInt32[v]
	}
	return v
}

// appendAttrText appends an attribute key or value as a JSON string.
func (st *decodeState) appendAttrText(dst []byte, r jsonscan.Span, b64 bool) []byte {
	b := st.bytesOf(r)
	if b64 && len(b) > 0 {
		// attrsAreBase64 has checked that it decodes.
		st.scratch2, _ = base64.StdEncoding.AppendDecode(st.scratch2[:0], b)
		b = st.scratch2
	}
	return jsonscan.AppendQuoted(dst, b)
}

// emit appends the rows of the parsed block.
func (st *decodeState) emit(height uint64, rows *chain.Rows, enc EventEncoding) error {
	h := &st.hdr
	hv := any(int64(height)) // boxed once, shared by every row of the block

	// Byte columns are carved from the rows' own memory (Rows.Bytes), as
	// are the interface values that hold them (Rows.BoxBytes): rows keep
	// them until the batch's rows are reused, and a warm export decodes a
	// block with next to no allocation for the collector to follow. An
	// arena whose estimate falls short grows by append, into memory of its
	// own.
	size := 12 * 32
	for _, t := range st.txs {
		size += t.Len()*3/4 + sha256.Size
	}
	for _, r := range st.results {
		size += r.data.Len() * 3 / 4
	}
	arena := rows.Bytes(size)[:0]
	var err error
	hexCol := func(r jsonscan.Span, field string) any {
		var v []byte
		if err == nil {
			arena, v, err = st.appendHex(arena, r, field)
		}
		return rows.BoxBytes(v)
	}

	numEvents := len(st.begin) + len(st.end) + len(st.finalize)
	for _, r := range st.results {
		numEvents += r.ev1 - r.ev0
	}

	b := rows.Row(tableBlocks)
	b[bHeight] = hv
	b[bHash] = hexCol(h.hash, "block_id.hash")
	if h.parent.Null || h.parent.Len() == 0 {
		b[bParentHash] = nil
	} else {
		b[bParentHash] = hexCol(h.parent, "header.last_block_id.hash")
	}
	t, terr := parseTime(st.bytesOf(h.time))
	if terr != nil {
		return malformed("header.time: %v", terr)
	}
	tv := any(t) // boxed once, shared by the block and every child row
	b[bTime] = tv
	b[bChainID] = st.text(h.chainID)
	b[bProposer] = hexCol(h.proposer, "header.proposer_address")
	b[bNumTxs] = int32(len(st.txs))
	b[bNumEvents] = int32(numEvents)
	b[bAppHash] = hexCol(h.appHash, "header.app_hash")
	b[bLastCommitHash] = hexCol(h.lastCommit, "header.last_commit_hash")
	b[bDataHash] = hexCol(h.dataHash, "header.data_hash")
	b[bValidatorsHash] = hexCol(h.vals, "header.validators_hash")
	b[bNextValidatorsHash] = hexCol(h.nextVals, "header.next_validators_hash")
	b[bConsensusHash] = hexCol(h.consensus, "header.consensus_hash")
	b[bLastResultsHash] = hexCol(h.lastResults, "header.last_results_hash")
	b[bEvidenceHash] = hexCol(h.evidence, "header.evidence_hash")
	if err != nil {
		return err
	}

	// Decided before the txs: their signers' prefix is read from their
	// events.
	b64, err := st.attrsAreBase64(enc)
	if err != nil {
		return err
	}
	st.b64 = b64
	var msgJS []byte // decoded messages' JSON, carved like arena
	if len(st.txs) > 0 {
		msgJS = rows.Bytes(size)[:0]
	}
	for i, txRef := range st.txs {
		start := len(arena)
		arena, err = base64.StdEncoding.AppendDecode(arena, st.bytesOf(txRef))
		if err != nil {
			return malformed("block.data.txs[%d]: %v", i, err)
		}
		tx := arena[start:len(arena):len(arena)]
		sum := sha256.Sum256(tx)
		start = len(arena)
		arena = append(arena, sum[:]...)
		hash := arena[start:len(arena):len(arena)]

		r := &st.results[i]
		start = len(arena)
		arena, err = base64.StdEncoding.AppendDecode(arena, st.bytesOf(r.data))
		if err != nil {
			return malformed("block_results.txs_results[%d].data: %v", i, err)
		}
		data := arena[start:len(arena):len(arena)]

		row := rows.Row(tableTransactions)
		row[tHeight] = hv
		row[tBlockTime] = tv
		row[tIndex] = boxInt32(int32(i))
		row[tHash] = rows.BoxBytes(hash)
		st.txHashes = append(st.txHashes, row[tHash]) // boxed once, shared with the tx's events
		row[tCode] = rows.BoxInt64(r.code)
		row[tCodespace] = st.text(r.codespace)
		row[tGasWanted] = rows.BoxInt64(r.gasWanted)
		row[tGasUsed] = rows.BoxInt64(r.gasUsed)
		row[tLog] = st.text(r.log)
		row[tInfo] = st.text(r.info)
		row[tData] = rows.BoxBytes(data)
		row[tTx] = rows.BoxBytes(tx)
		msgJS = st.emitSDK(rows, row, i, tx, hv, tv, msgJS)
	}

	// `[]` per event; `["","",false],` per attribute.
	jsonSize := 2 * numEvents
	for _, a := range st.attrs {
		jsonSize += a.key.Len() + a.value.Len() + 16
	}
	js := rows.Bytes(jsonSize)[:0]
	idx := int32(0)
	emitEvents := func(evs []eventRef, source, txIndex, txHash any) {
		for _, ev := range evs {
			start := len(js)
			js = append(js, '[')
			for j := ev.a0; j < ev.a1; j++ {
				a := &st.attrs[j]
				if j > ev.a0 {
					js = append(js, ',')
				}
				js = append(js, '[')
				js = st.appendAttrText(js, a.key, b64)
				js = append(js, ',')
				js = st.appendAttrText(js, a.value, b64)
				if a.index {
					js = append(js, ",true]"...)
				} else {
					js = append(js, ",false]"...)
				}
			}
			js = append(js, ']')

			row := rows.Row(tableEvents)
			row[eHeight] = hv
			row[eBlockTime] = tv
			row[eIndex] = boxInt32(idx)
			row[eTxIndex] = txIndex
			row[eTxHash] = txHash
			row[eSource] = source
			row[eType] = st.textAny(ev.typ)
			row[eAttributes] = rows.BoxBytes(js[start:len(js):len(js)])
			idx++
		}
	}
	emitEvents(st.begin, sourceBeginBlock, nil, nil)
	for i, r := range st.results {
		emitEvents(st.txEvents[r.ev0:r.ev1], sourceTx, boxInt32(int32(i)), st.txHashes[i])
	}
	emitEvents(st.end, sourceEndBlock, nil, nil)
	emitEvents(st.finalize, sourceFinalizeBlock, nil, nil)
	return st.emitValidatorRows(rows, hv, tv)
}

// The event sources boxed once: an interface value made from a string that
// is not a constant costs an allocation per row.
var sourceBeginBlock, sourceTx, sourceEndBlock, sourceFinalizeBlock any = SourceBeginBlock, SourceTx, SourceEndBlock, SourceFinalizeBlock

// internTable holds the strings most text cells repeat (event types,
// codespaces), so that decoding them allocates nothing; internBoxed holds
// them in interfaces.
var internTable, internBoxed = func() (map[string]string, map[string]any) {
	m, boxed := map[string]string{}, map[string]any{}
	for _, s := range []string{
		"sdk", "wasm", "ibc", "bank", "staking", "distribution", "gov", "slashing",
		"message", "transfer", "coin_spent", "coin_received", "coinbase", "burn", "tx",
		"mint", "commission", "rewards", "proposer_reward", "liveness", "slash",
		"withdraw_rewards", "withdraw_commission", "delegate", "unbond", "redelegate",
		"complete_unbonding", "complete_redelegation", "create_validator", "edit_validator",
		"proposal_vote", "proposal_deposit", "submit_proposal", "active_proposal", "inactive_proposal",
		"send_packet", "recv_packet", "write_acknowledgement", "acknowledge_packet", "timeout_packet",
		"update_client", "create_client", "ibc_transfer", "fungible_token_packet", "denomination_trace",
		"denomination", "set_withdraw_address", "use_feegrant", "set_feegrant", "revoke_feegrant",
		"execute", "instantiate", "store_code", "wasm", "fee_market", "block_gas", "block_bloom",
		"ethereum_tx", "tx_log",
	} {
		m[s] = s
		boxed[s] = s
	}
	return m, boxed
}()
