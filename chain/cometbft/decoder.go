package cometbft

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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
	Err    error // wraps ErrMalformedRecord or ErrEncodingUndecided
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
	if err := st.parse(raw); err != nil {
		return &DecodeError{Height: height, Err: fmt.Errorf("%w: %w", ErrMalformedRecord, err)}
	}
	if err := st.check(height); err != nil {
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
	if err := st.parseRecordBlock(raw); err != nil {
		return nil, nil, 0, fmt.Errorf("cometbft: block identity: %w", err)
	}
	if _, hash, err = st.appendHex(nil, st.hdr.hash, "block_id.hash"); err != nil {
		return nil, nil, 0, fmt.Errorf("cometbft: block identity at height %d: %w", st.hdr.height, err)
	}
	if p := st.hdr.parent; !p.Null && p.Len() > 0 {
		if _, parentHash, err = st.appendHex(nil, p, "header.last_block_id.hash"); err != nil {
			return nil, nil, 0, fmt.Errorf("cometbft: block identity at height %d: %w", st.hdr.height, err)
		}
	}
	return hash, parentHash, uint64(st.hdr.height), nil
}

// parseRecordBlock reads the block of a raw record (its "block" member)
// into st and checks it: an error wraps ErrMalformedRecord when the record
// is null or cannot be read, else it is checkBlock's. The caller prefixes
// its operation.
func (st *decodeState) parseRecordBlock(raw []byte) error {
	s := &st.sc
	s.Reset(raw)
	if !s.OpenObject() && s.Err() == nil {
		return fmt.Errorf("%w: record is null", ErrMalformedRecord)
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		if string(k) == "block" {
			st.sawBlock = true
			st.parseBlockResult()
			break
		}
		s.Skip()
	}
	if s.Err() != nil {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, s.Err())
	}
	return st.checkBlock()
}

// decodeState is the scratch of one Decode call: spans into the raw record
// collected by parse, turned into rows by emit. Pooled, so that a warm
// decoder allocates only what the rows keep.
type decodeState struct {
	sc jsonscan.Scanner

	sawBlock, sawResults     bool
	sawLegacy, sawFinalize   bool // begin/end_block_events; finalize_block_events
	hdr                      header
	txs                      []jsonscan.Span
	resHeight                int64
	sawResHeight             bool
	results                  []txResult
	begin, end, finalize     []eventRef
	txEvents                 []eventRef
	attrs                    []attrRef
	txHashes                 []any // per tx, its hash cell
	commitHeight             int64 // block.last_commit.height: the height its signatures sign
	sigs                     []sigRef
	valUpdates               []valUpdateRef
	paramsStart, paramsEnd   int  // block_results.consensus_param_updates, as a span of the record
	paramsOK                 bool // consensus_param_updates is present and not null
	sdk                      sdkTx
	msgSigners               []string
	msgs                     *protodec.Set // the message types; nil: the built-in set
	prefix                   string        // the operator's bech32 prefix, or ""
	b64                      bool          // the block's attributes are base64
	signerAddrs              [][]byte      // per signer_infos entry of the tx, its key's address or nil
	accSeq                   []string      // the tx's tx.acc_seq addresses when one per signer, else empty
	accountPrefix            string        // blockAccountPrefix, once accountPrefixRead
	accountPrefixRead        bool
	scratch, scratch2, clean []byte
}

type header struct {
	height    int64
	sawHeight bool
	hash      jsonscan.Span // block_id.hash
	parent    jsonscan.Span // header.last_block_id.hash
	// header.last_block_id.parts and header.version, for HeaderHash.
	parentParts      jsonscan.Span
	parentPartsTotal int64
	verBlock, verApp int64
	sawHeader        bool
	time             jsonscan.Span
	chainID          jsonscan.Span
	proposer         jsonscan.Span
	// Other header hashes, in blocks column order from app_hash on.
	appHash, lastCommit, dataHash, vals, nextVals, consensus, lastResults, evidence jsonscan.Span
}

type txResult struct {
	code, gasWanted, gasUsed   int64
	codespace, log, info, data jsonscan.Span
	ev0, ev1                   int // its events: txEvents[ev0:ev1]
}

type eventRef struct {
	typ    jsonscan.Span
	a0, a1 int // its attributes: attrs[a0:a1]
}

type attrRef struct {
	key, value jsonscan.Span
	index      bool
}

var statePool = sync.Pool{New: func() any { return new(decodeState) }}

// maxPooledScratch keeps one huge record from pinning its scratch forever.
const maxPooledScratch = 1 << 20

func (st *decodeState) release() {
	scratch, scratch2, clean := st.scratch[:0], st.scratch2[:0], st.clean[:0]
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
	*st = decodeState{
		sdk:         sdk,
		signerAddrs: addrs[:0],
		msgSigners:  signers[:0],
		accSeq:      accSeq[:0],
		txHashes:    hashes[:0],
		txs:         st.txs[:0],
		results:     st.results[:0],
		begin:       st.begin[:0],
		end:         st.end[:0],
		finalize:    st.finalize[:0],
		txEvents:    st.txEvents[:0],
		attrs:       st.attrs[:0],
		sigs:        st.sigs[:0],
		valUpdates:  st.valUpdates[:0],
	}

	// The scratch buffers hold no references into caller memory: reuse them
	// unless a huge record grew them.
	if cap(scratch) <= maxPooledScratch && cap(scratch2) <= maxPooledScratch && cap(clean) <= maxPooledScratch {
		st.scratch, st.scratch2, st.clean = scratch, scratch2, clean
	}
	statePool.Put(st)
}

func (st *decodeState) parse(raw []byte) error {
	s := &st.sc
	s.Reset(raw)
	if !s.OpenObject() {
		if s.Err() == nil {
			return errors.New("record is null")
		}
		return s.Err()
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "block":
			st.sawBlock = true
			st.parseBlockResult()
		case "block_results":
			st.sawResults = true
			st.parseResults()
		default:
			s.Skip()
		}
	}
	s.End()
	return s.Err()
}

// parseBlockResult reads the result of /block.
func (st *decodeState) parseBlockResult() {
	s := &st.sc
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "block_id":
			st.hdr.hash = st.blockIDHash()
		case "block":
			st.parseBlock()
		default:
			s.Skip()
		}
	}
}

// blockIDHash reads a BlockID object and returns its hash.
func (st *decodeState) blockIDHash() jsonscan.Span {
	s := &st.sc
	var h jsonscan.Span
	if !s.OpenObject() {
		return h
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		if string(k) == "hash" {
			h = s.Str()
		} else {
			s.Skip()
		}
	}
	return h
}

func (st *decodeState) parseBlock() {
	s := &st.sc
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "header":
			st.parseHeader()
		case "data":
			st.parseData()
		case "last_commit":
			st.parseLastCommit()
		default: // evidence
			s.Skip()
		}
	}
}

func (st *decodeState) parseHeader() {
	s := &st.sc
	h := &st.hdr
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "height":
			h.height = s.Integer()
			h.sawHeight = true
		case "chain_id":
			h.chainID = s.Str()
		case "time":
			h.time = s.Str()
		case "last_block_id":
			h.parent, h.parentPartsTotal, h.parentParts = st.blockID()
		case "version":
			h.verBlock, h.verApp = st.version()
		case "proposer_address":
			h.proposer = s.Str()
		case "app_hash":
			h.appHash = s.Str()
		case "last_commit_hash":
			h.lastCommit = s.Str()
		case "data_hash":
			h.dataHash = s.Str()
		case "validators_hash":
			h.vals = s.Str()
		case "next_validators_hash":
			h.nextVals = s.Str()
		case "consensus_hash":
			h.consensus = s.Str()
		case "last_results_hash":
			h.lastResults = s.Str()
		case "evidence_hash":
			h.evidence = s.Str()
		default:
			s.Skip()
		}
	}
	h.sawHeader = s.Err() == nil
}

// blockID reads a BlockID object: its hash and its part set header.
func (st *decodeState) blockID() (hash jsonscan.Span, total int64, parts jsonscan.Span) {
	s := &st.sc
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "hash":
			hash = s.Str()
		case "parts", "part_set_header":
			if !s.OpenObject() {
				continue
			}
			m := 0
			for k, ok := s.NextKey(&m); ok; k, ok = s.NextKey(&m) {
				switch string(k) {
				case "total":
					total = s.Integer()
				case "hash":
					parts = s.Str()
				default:
					s.Skip()
				}
			}
		default:
			s.Skip()
		}
	}
	return
}

// version reads a header's version object (consensus block and app
// versions; 0.34 prints no app).
func (st *decodeState) version() (block, app int64) {
	s := &st.sc
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "block":
			block = s.Integer()
		case "app":
			app = s.Integer()
		default:
			s.Skip()
		}
	}
	return
}

func (st *decodeState) parseData() {
	s := &st.sc
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		if string(k) != "txs" {
			s.Skip()
			continue
		}
		st.txs = st.txs[:0]
		if !s.OpenArray() {
			continue
		}
		m := 0
		for s.NextElem(&m) {
			st.txs = append(st.txs, s.Str())
		}
	}
}

// parseResults reads the result of /block_results.
func (st *decodeState) parseResults() {
	s := &st.sc
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "height":
			st.resHeight = s.Integer()
			st.sawResHeight = true
		case "txs_results":
			st.results = st.results[:0]
			if !s.OpenArray() {
				continue
			}
			m := 0
			for s.NextElem(&m) {
				st.parseTxResult()
			}
		case "begin_block_events":
			st.sawLegacy = true
			st.begin = st.parseEvents(st.begin[:0])
		case "end_block_events":
			st.sawLegacy = true
			st.end = st.parseEvents(st.end[:0])
		case "finalize_block_events":
			st.sawFinalize = true
			st.finalize = st.parseEvents(st.finalize[:0])
		case "validator_updates":
			st.parseValidatorUpdates()
		case "consensus_param_updates":
			st.paramsStart, st.paramsEnd, st.paramsOK = captureValue(s)
		default: // app_hash
			s.Skip()
		}
	}
}

func (st *decodeState) parseTxResult() {
	s := &st.sc
	r := txResult{ev0: len(st.txEvents), ev1: len(st.txEvents)}
	if s.OpenObject() {
		n := 0
		for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
			switch string(k) {
			case "code":
				r.code = s.Integer()
			case "data":
				r.data = s.Str()
			case "log":
				r.log = s.Str()
			case "info":
				r.info = s.Str()
			case "gas_wanted", "gasWanted": // camelCase up to Tendermint 0.33
				r.gasWanted = s.Integer()
			case "gas_used", "gasUsed":
				r.gasUsed = s.Integer()
			case "events":
				r.ev0 = len(st.txEvents)
				st.txEvents = st.parseEvents(st.txEvents)
				r.ev1 = len(st.txEvents)
			case "codespace":
				r.codespace = s.Str()
			default:
				s.Skip()
			}
		}
	}
	st.results = append(st.results, r)
}

// parseEvents appends the events of a JSON array of events to dst.
func (st *decodeState) parseEvents(dst []eventRef) []eventRef {
	s := &st.sc
	if !s.OpenArray() {
		return dst
	}
	m := 0
	for s.NextElem(&m) {
		ev := eventRef{a0: len(st.attrs), a1: len(st.attrs)}
		if s.OpenObject() {
			n := 0
			for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
				switch string(k) {
				case "type":
					ev.typ = s.Str()
				case "attributes":
					ev.a0 = len(st.attrs)
					st.parseAttributes()
					ev.a1 = len(st.attrs)
				default:
					s.Skip()
				}
			}
		}
		dst = append(dst, ev)
	}
	return dst
}

func (st *decodeState) parseAttributes() {
	s := &st.sc
	if !s.OpenArray() {
		return
	}
	m := 0
	for s.NextElem(&m) {
		if a, ok := st.compactAttr(); ok {
			st.attrs = append(st.attrs, a)
			continue
		}
		var a attrRef
		if s.OpenObject() {
			n := 0
			for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
				switch string(k) {
				case "key":
					a.key = s.Str()
				case "value":
					a.value = s.Str()
				case "index":
					a.index = s.Boolean()
				default:
					s.Skip()
				}
			}
		}
		st.attrs = append(st.attrs, a)
	}
}

// compactAttr reads an attribute written exactly as CometBFT writes it,
// {"key":"…","value":"…","index":true}, without the generic object walk:
// most of a record is attributes. Anything else (white space, other member
// order, null values) reports false with the scanner unmoved, for the
// generic path to read.
func (st *decodeState) compactAttr() (attrRef, bool) {
	s := &st.sc
	start := s.Pos()
	var a attrRef
	if !s.Literal(`{"key":"`) {
		return a, false
	}
	s.Seek(s.Pos() - 1) // at the opening quote
	a.key = s.String()
	if s.Err() != nil || !s.Literal(`,"value":"`) {
		return st.compactMiss(start)
	}
	s.Seek(s.Pos() - 1)
	a.value = s.String()
	switch {
	case s.Err() != nil:
		return st.compactMiss(start)
	case s.Literal(`,"index":true}`):
		a.index = true
	case s.Literal(`,"index":false}`), s.Literal(`}`):
	default:
		return st.compactMiss(start)
	}
	return a, true
}

func (st *decodeState) compactMiss(start int) (attrRef, bool) {
	st.sc.Seek(start)
	st.sc.ClearErr() // the generic path meets the same error again
	return attrRef{}, false
}

// checkBlock checks what the /block half must have.
func (st *decodeState) checkBlock() error {
	if !st.sawBlock {
		return malformed("no block in record")
	}
	if !st.hdr.sawHeight {
		return malformed("block header has no height")
	}
	if st.hdr.hash.Null || st.hdr.hash.Len() == 0 {
		return malformed("block_id.hash is empty")
	}
	if st.hdr.height <= 0 {
		return malformed("block header height %d is not positive", st.hdr.height)
	}
	return nil
}

// check checks the parsed record against the height it was staged under.
func (st *decodeState) check(height uint64) error {
	if err := st.checkBlock(); err != nil {
		return err
	}
	if uint64(st.hdr.height) != height {
		return malformed("block header height is %d", st.hdr.height)
	}
	if !st.sawResults {
		return malformed("no block_results in record")
	}
	if !st.sawResHeight {
		return malformed("block_results has no height")
	}
	if st.resHeight != st.hdr.height {
		return malformed("block_results height is %d", st.resHeight)
	}
	if len(st.txs) != len(st.results) {
		return malformed("block has %d txs but block_results has %d txs_results", len(st.txs), len(st.results))
	}
	return nil
}

// bytesOf returns the bytes of a string value, unescaped (in scratch) when
// needed; null is empty.
func (st *decodeState) bytesOf(r jsonscan.Span) []byte {
	if r.Null {
		return nil
	}
	return st.sc.Text(r, &st.scratch)
}

// appendHex appends the bytes of a hex string value to arena and returns
// the grown arena and the value as a capacity-capped slice of it: never nil,
// so that an empty hash is an empty bytea, not NULL.
func (st *decodeState) appendHex(arena []byte, r jsonscan.Span, field string) (grown, val []byte, err error) {
	start := len(arena)
	arena, err = hex.AppendDecode(arena, st.bytesOf(r))
	if err != nil {
		return arena, nil, malformed("%s: %v", field, err)
	}
	if arena == nil {
		arena = []byte{}
	}
	return arena, arena[start:len(arena):len(arena)], nil
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
