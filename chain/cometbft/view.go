package cometbft

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/blockhaul/blockhaul/chain/jsonscan"
)

// View is a raw record (see MarshalRecord) read once: where each part of
// it lies, as spans of the record, for every reader of the record — the
// decoder turns them into rows, VerifyBlock recomputes the hashes from
// them, BlockIdentity reads three of them, and a reader outside the
// package (the chain of trust) takes the parts it parses itself
// (HeaderJSON, LastCommitJSON, …) or the values (Header, LastCommit).
//
// Every error of a View wraps ErrMalformedRecord and names the member
// ("block_id.hash: …"); the caller prefixes its operation and height. A
// View aliases its record: it is valid while the record is, and is not
// safe for concurrent use.
type View struct {
	sc      jsonscan.Scanner
	scratch []byte // unescaped strings (bytesOf)

	sawBlock, sawResults   bool
	sawLegacy, sawFinalize bool // begin/end_block_events; finalize_block_events
	hdr                    header
	headerAt, commitAt     span // block.block.header, block.block.last_commit
	txs                    []jsonscan.Span
	resHeight              int64
	sawResHeight           bool
	results                []txResult
	begin, end, finalize   []eventRef
	txEvents               []eventRef
	attrs                  []attrRef
	commit                 commitRef
	sigs                   []sigRef
	valUpdates             []valUpdateRef
	resultsAt, updatesAt   span // block_results.txs_results, .validator_updates
	params                 span // block_results.consensus_param_updates; empty when absent or null
}

// span is a value's place in the record: b[start:end]; empty when the value
// was absent.
type span struct{ start, end int }

func (s span) of(b []byte) []byte {
	if s.end <= s.start {
		return nil
	}
	return b[s.start:s.end:s.end]
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

// commitRef is block.last_commit but its signatures (View.sigs).
type commitRef struct {
	height, round int64
	blockID       blockIDRef
}

// sigRef is one element of last_commit.signatures.
type sigRef struct {
	flag int64
	addr jsonscan.Span // hex; empty for an absent validator
	ts   jsonscan.Span // RFC 3339; 0001-01-01T00:00:00Z for an absent validator
	sig  jsonscan.Span // base64; null for an absent validator
}

// valUpdateRef is one element of block_results.validator_updates.
type valUpdateRef struct {
	keyType string        // ed25519, secp256k1, bls12_381, … as the node names it
	key     jsonscan.Span // base64
	power   int64
}

// ReadView reads a whole raw record into a View of its own, for a reader
// outside the package. It checks what every reader needs (the block's
// height and hash; see View), not the results' agreement with the block,
// which Decode checks.
func ReadView(raw []byte) (*View, error) {
	v := new(View)
	if err := v.parse(raw); err != nil {
		return nil, fmt.Errorf("cometbft: read record: %w", err)
	}
	if err := v.checkBlock(); err != nil {
		return nil, fmt.Errorf("cometbft: read record: %w", err)
	}
	return v, nil
}

// reset empties v for another record, keeping its memory (but a scratch
// that a huge record grew).
func (v *View) reset() {
	scratch := v.scratch[:0]
	if cap(scratch) > maxPooledScratch {
		scratch = nil
	}
	*v = View{
		scratch:    scratch,
		txs:        v.txs[:0],
		results:    v.results[:0],
		begin:      v.begin[:0],
		end:        v.end[:0],
		finalize:   v.finalize[:0],
		txEvents:   v.txEvents[:0],
		attrs:      v.attrs[:0],
		sigs:       v.sigs[:0],
		valUpdates: v.valUpdates[:0],
	}
}

// parse reads the whole of raw into v.
func (v *View) parse(raw []byte) error {
	s := &v.sc
	s.Reset(raw)
	if s.Null() {
		return malformed("record is null")
	}
	for k := range s.Members() {
		switch string(k) {
		case "block":
			v.sawBlock = true
			v.parseBlockResult()
		case "block_results":
			v.sawResults = true
			v.parseResults()
		default:
			s.Skip()
		}
	}
	s.End()
	return v.scanErr()
}

// parseBlockHalf reads only the block of raw (its "block" member) into v,
// and checks it (checkBlock): what identifying and verifying a block need.
func (v *View) parseBlockHalf(raw []byte) error {
	s := &v.sc
	s.Reset(raw)
	if s.Null() {
		return malformed("record is null")
	}
	for k := range s.Members() {
		if string(k) == "block" {
			v.sawBlock = true
			v.parseBlockResult()
			break
		}
		s.Skip()
	}
	if err := v.scanErr(); err != nil {
		return err
	}
	return v.checkBlock()
}

// scanErr is the scanner's error, marked as the View's errors are.
func (v *View) scanErr() error {
	if err := v.sc.Err(); err != nil {
		return malformed("%v", err)
	}
	return nil
}

// parseBlockResult reads the result of /block.
func (v *View) parseBlockResult() {
	s := &v.sc
	for k := range s.Members() {
		switch string(k) {
		case "block_id":
			v.hdr.hash = v.blockID().hash
		case "block":
			v.parseBlock()
		default:
			s.Skip()
		}
	}
}

func (v *View) parseBlock() {
	s := &v.sc
	for k := range s.Members() {
		start := s.Pos()
		switch string(k) {
		case "header":
			v.parseHeader()
			v.headerAt = span{start, s.Pos()}
		case "data":
			v.parseData()
		case "last_commit":
			v.parseLastCommit()
			v.commitAt = span{start, s.Pos()}
		default: // evidence
			s.Skip()
		}
	}
}

func (v *View) parseHeader() {
	s := &v.sc
	h := &v.hdr
	for k := range s.Members() {
		switch string(k) {
		case "height":
			h.height = s.Integer()
			h.sawHeight = true
		case "last_block_id":
			id := v.blockID()
			h.parent, h.parentPartsTotal, h.parentParts = id.hash, id.total, id.parts
		case "version":
			h.verBlock, h.verApp = v.version()
		default:
			if p := h.member(k); p != nil {
				*p = s.Str()
			} else {
				s.Skip()
			}
		}
	}
	h.sawHeader = s.Err() == nil
}

// member is the span of the header's string member k; nil for another.
func (h *header) member(k []byte) *jsonscan.Span {
	switch string(k) {
	case "chain_id":
		return &h.chainID
	case "time":
		return &h.time
	case "proposer_address":
		return &h.proposer
	case "app_hash":
		return &h.appHash
	case "last_commit_hash":
		return &h.lastCommit
	case "data_hash":
		return &h.dataHash
	case "validators_hash":
		return &h.vals
	case "next_validators_hash":
		return &h.nextVals
	case "consensus_hash":
		return &h.consensus
	case "last_results_hash":
		return &h.lastResults
	case "evidence_hash":
		return &h.evidence
	}
	return nil
}

// blockIDRef is a BlockID object: its hash and its part set header.
type blockIDRef struct {
	hash, parts jsonscan.Span
	total       int64
}

// blockID reads a BlockID object; nested, it reads its part set header
// ({"total":…, "hash":…}) the same way, into total and hash.
func (v *View) blockID() (id blockIDRef) {
	s := &v.sc
	for k := range s.Members() {
		switch string(k) {
		case "hash":
			id.hash = s.Str()
		case "total":
			id.total = s.Integer()
		case "parts", "part_set_header":
			p := v.blockID()
			id.total, id.parts = p.total, p.hash
		default:
			s.Skip()
		}
	}
	return id
}

// version reads a header's version object (consensus block and app
// versions; 0.34 prints no app).
func (v *View) version() (block, app int64) {
	s := &v.sc
	for k := range s.Members() {
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

func (v *View) parseData() {
	s := &v.sc
	for k := range s.Members() {
		if string(k) != "txs" {
			s.Skip()
			continue
		}
		v.txs = v.txs[:0]
		for range s.Elems() {
			v.txs = append(v.txs, s.Str())
		}
	}
}

// parseLastCommit reads block.last_commit: its height, round, block ID and
// signatures.
func (v *View) parseLastCommit() {
	s := &v.sc
	c := &v.commit
	for k := range s.Members() {
		switch string(k) {
		case "height":
			c.height = s.Integer()
		case "round":
			c.round = s.Integer()
		case "block_id":
			c.blockID = v.blockID()
		case "signatures":
			v.sigs = v.sigs[:0]
			for range s.Elems() {
				v.sigs = append(v.sigs, v.commitSig())
			}
		default:
			s.Skip()
		}
	}
}

func (v *View) commitSig() (sg sigRef) {
	s := &v.sc
	for k := range s.Members() {
		switch string(k) {
		case "block_id_flag":
			sg.flag = s.Integer()
		case "validator_address":
			sg.addr = s.Str()
		case "timestamp":
			sg.ts = s.Str()
		case "signature":
			sg.sig = s.Str()
		default:
			s.Skip()
		}
	}
	return sg
}

// parseResults reads the result of /block_results.
func (v *View) parseResults() {
	s := &v.sc
	for k := range s.Members() {
		start := s.Pos()
		switch string(k) {
		case "height":
			v.resHeight = s.Integer()
			v.sawResHeight = true
		case "txs_results":
			v.results = v.results[:0]
			for range s.Elems() {
				v.parseTxResult()
			}
			v.resultsAt = span{start, s.Pos()}
		case "begin_block_events":
			v.sawLegacy = true
			v.begin = v.parseEvents(v.begin[:0])
		case "end_block_events":
			v.sawLegacy = true
			v.end = v.parseEvents(v.end[:0])
		case "finalize_block_events":
			v.sawFinalize = true
			v.finalize = v.parseEvents(v.finalize[:0])
		case "validator_updates":
			v.parseValidatorUpdates()
			v.updatesAt = span{start, s.Pos()}
		case "consensus_param_updates":
			if !s.Null() {
				s.Skip()
				v.params = span{start, s.Pos()}
			}
		default: // app_hash
			s.Skip()
		}
	}
}

func (v *View) parseTxResult() {
	s := &v.sc
	r := txResult{ev0: len(v.txEvents), ev1: len(v.txEvents)}
	for k := range s.Members() {
		switch string(k) {
		case "code":
			r.code = s.Integer()
		case "gas_wanted", "gasWanted": // camelCase up to Tendermint 0.33
			r.gasWanted = s.Integer()
		case "gas_used", "gasUsed":
			r.gasUsed = s.Integer()
		case "events":
			r.ev0 = len(v.txEvents)
			v.txEvents = v.parseEvents(v.txEvents)
			r.ev1 = len(v.txEvents)
		default:
			if p := r.member(k); p != nil {
				*p = s.Str()
			} else {
				s.Skip()
			}
		}
	}
	v.results = append(v.results, r)
}

// member is the span of the tx result's string member k; nil for another.
func (r *txResult) member(k []byte) *jsonscan.Span {
	switch string(k) {
	case "data":
		return &r.data
	case "log":
		return &r.log
	case "info":
		return &r.info
	case "codespace":
		return &r.codespace
	}
	return nil
}

// parseEvents appends the events of a JSON array of events to dst.
func (v *View) parseEvents(dst []eventRef) []eventRef {
	s := &v.sc
	for range s.Elems() {
		ev := eventRef{a0: len(v.attrs), a1: len(v.attrs)}
		for k := range s.Members() {
			switch string(k) {
			case "type":
				ev.typ = s.Str()
			case "attributes":
				ev.a0 = len(v.attrs)
				v.parseAttributes()
				ev.a1 = len(v.attrs)
			default:
				s.Skip()
			}
		}
		dst = append(dst, ev)
	}
	return dst
}

func (v *View) parseAttributes() {
	s := &v.sc
	for range s.Elems() {
		if a, ok := v.compactAttr(); ok {
			v.attrs = append(v.attrs, a)
			continue
		}
		var a attrRef
		for k := range s.Members() {
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
		v.attrs = append(v.attrs, a)
	}
}

// compactAttr reads an attribute written exactly as CometBFT writes it,
// {"key":"…","value":"…","index":true}, without the generic object walk:
// most of a record is attributes. Anything else (white space, other member
// order, null values) reports false with the scanner unmoved, for the
// generic path to read.
func (v *View) compactAttr() (attrRef, bool) {
	s := &v.sc
	start := s.Pos()
	var a attrRef
	if !s.Literal(`{"key":"`) {
		return a, false
	}
	s.Seek(s.Pos() - 1) // at the opening quote
	a.key = s.String()
	if s.Err() != nil || !s.Literal(`,"value":"`) {
		return v.compactMiss(start)
	}
	s.Seek(s.Pos() - 1)
	a.value = s.String()
	switch {
	case s.Err() != nil:
		return v.compactMiss(start)
	case s.Literal(`,"index":true}`):
		a.index = true
	case s.Literal(`,"index":false}`), s.Literal(`}`):
	default:
		return v.compactMiss(start)
	}
	return a, true
}

func (v *View) compactMiss(start int) (attrRef, bool) {
	v.sc.Seek(start)
	v.sc.ClearErr() // the generic path meets the same error again
	return attrRef{}, false
}

// parseValidatorUpdates reads block_results.validator_updates in every form
// a node prints it:
//
//	{"pub_key":{"Sum":{"type":"tendermint.crypto.PublicKey_Ed25519","value":{"ed25519":"…"}}},"power":"10"}  (0.34–0.38)
//	{"pub_key":{"type":"tendermint/PubKeyEd25519","value":"…"},"power":"10"}                               (amino JSON)
//	{"pub_key_type":"ed25519","pub_key_bytes":"…","power":"10"}                                           (1.0)
func (v *View) parseValidatorUpdates() {
	s := &v.sc
	v.valUpdates = v.valUpdates[:0]
	for range s.Elems() {
		var u valUpdateRef
		for k := range s.Members() {
			switch string(k) {
			case "power":
				u.power = s.Integer()
			case "pub_key":
				v.parsePubKey(&u, 0)
			case "pub_key_type":
				u.keyType = string(cleanText(nil, v.bytesOf(s.Str())))
			case "pub_key_bytes":
				u.key = s.Str()
			default:
				s.Skip()
			}
		}
		v.valUpdates = append(v.valUpdates, u)
	}
}

// parsePubKey reads a public key object (see parseValidatorUpdates) into u.
func (v *View) parsePubKey(u *valUpdateRef, depth int) {
	s := &v.sc
	for k := range s.Members() {
		switch {
		case string(k) == "Sum" && depth == 0:
			v.parsePubKey(u, 1)
		case string(k) == "type" && s.Peek() == '"':
			if t := aminoKeyType(v.bytesOf(s.Str())); t != "" {
				u.keyType = t
			}
		case string(k) == "value" && s.Peek() == '"': // amino: the key itself
			u.key = s.Str()
		case string(k) == "value" && s.Peek() == '{': // protobuf oneof: {"ed25519":"…"}
			for k := range s.Members() {
				if s.Peek() != '"' {
					s.Skip()
					continue
				}
				u.keyType = keyTypeName(k)
				u.key = s.Str()
			}
		default:
			s.Skip()
		}
	}
}

// checkBlock checks what the /block half must have.
func (v *View) checkBlock() error {
	switch h := &v.hdr; {
	case !v.sawBlock:
		return malformed("no block in record")
	case !h.sawHeight:
		return malformed("block header has no height")
	case h.hash.Null || h.hash.Len() == 0:
		return malformed("block_id.hash is empty")
	case h.height <= 0:
		return malformed("block header height %d is not positive", h.height)
	}
	return nil
}

// check checks the parsed record against the height it was staged under.
func (v *View) check(height uint64) error {
	if err := v.checkBlock(); err != nil {
		return err
	}
	switch {
	case uint64(v.hdr.height) != height:
		return malformed("block header height is %d", v.hdr.height)
	case !v.sawResults:
		return malformed("no block_results in record")
	case !v.sawResHeight:
		return malformed("block_results has no height")
	case v.resHeight != v.hdr.height:
		return malformed("block_results height is %d", v.resHeight)
	case len(v.txs) != len(v.results):
		return malformed("block has %d txs but block_results has %d txs_results", len(v.txs), len(v.results))
	}
	return nil
}

// bytesOf returns the bytes of a string value, unescaped (in scratch) when
// needed; null is empty.
func (v *View) bytesOf(r jsonscan.Span) []byte {
	if r.Null {
		return nil
	}
	return v.sc.Text(r, &v.scratch)
}

// appendHex appends the bytes of a hex string value to arena and returns
// the grown arena and the value as a capacity-capped slice of it: never nil,
// so that an empty hash is an empty bytea, not NULL.
func (v *View) appendHex(arena []byte, r jsonscan.Span, field string) (grown, val []byte, err error) {
	start := len(arena)
	arena, err = hex.AppendDecode(arena, v.bytesOf(r))
	if err != nil {
		return arena, nil, malformed("%s: %v", field, err)
	}
	if arena == nil {
		arena = []byte{}
	}
	return arena, arena[start:len(arena):len(arena)], nil
}

// hexes decodes hex members into one arena, keeping the first error.
type hexes struct {
	v     *View
	arena []byte
	err   error
}

func (x *hexes) of(r jsonscan.Span, field string) []byte {
	var b []byte
	if x.err == nil {
		x.arena, b, x.err = x.v.appendHex(x.arena, r, field)
	}
	return b
}

// Height is the block's height (header.height).
func (v *View) Height() int64 { return v.hdr.height }

// Hash is the block's hash as the record claims it (block_id.hash).
func (v *View) Hash() ([]byte, error) {
	_, h, err := v.appendHex(nil, v.hdr.hash, "block_id.hash")
	return h, err
}

// Header returns the block's header in the types CometBFT hashes
// (HeaderFields.Hash recomputes the block's hash from it).
func (v *View) Header() (HeaderFields, error) {
	var f HeaderFields
	h := &v.hdr
	if !h.sawHeader {
		return f, malformed("no header")
	}
	x := hexes{v: v, arena: make([]byte, 0, 512)}
	f.LastHash = x.of(h.parent, "header.last_block_id.hash")
	f.LastPartsHash = x.of(h.parentParts, "header.last_block_id.parts.hash")
	f.LastCommit = x.of(h.lastCommit, "header.last_commit_hash")
	f.Data = x.of(h.dataHash, "header.data_hash")
	f.Vals = x.of(h.vals, "header.validators_hash")
	f.NextVals = x.of(h.nextVals, "header.next_validators_hash")
	f.Consensus = x.of(h.consensus, "header.consensus_hash")
	f.App = x.of(h.appHash, "header.app_hash")
	f.LastResults = x.of(h.lastResults, "header.last_results_hash")
	f.Evid = x.of(h.evidence, "header.evidence_hash")
	f.Proposer = x.of(h.proposer, "header.proposer_address")
	if x.err != nil {
		return f, x.err
	}
	f.ChainID = append([]byte(nil), v.bytesOf(h.chainID)...)
	f.Height = h.height
	if h.verBlock < 0 || h.verApp < 0 || h.parentPartsTotal < 0 || h.parentPartsTotal > 1<<32-1 {
		return f, malformed("negative version or part count")
	}
	f.VerBlock, f.VerApp, f.LastPartsTotal = uint64(h.verBlock), uint64(h.verApp), uint32(h.parentPartsTotal)
	t, err := time.Parse(time.RFC3339Nano, string(v.bytesOf(h.time)))
	if err != nil {
		return f, malformed("header.time: %v", err)
	}
	f.Sec, f.Nsec = t.Unix(), int32(t.Nanosecond())
	return f, nil
}

// HeaderJSON is block.block.header as written in the record; nil when the
// record has none.
func (v *View) HeaderJSON() []byte { return v.headerAt.of(v.sc.Bytes()) }

// LastCommitJSON is block.block.last_commit as written (the commit of the
// height before); nil when the record has none.
func (v *View) LastCommitJSON() []byte { return v.commitAt.of(v.sc.Bytes()) }

// TxResultsJSON is block_results.txs_results as written; nil when absent.
func (v *View) TxResultsJSON() []byte { return v.resultsAt.of(v.sc.Bytes()) }

// ValidatorUpdatesJSON is block_results.validator_updates as written; nil
// when absent.
func (v *View) ValidatorUpdatesJSON() []byte { return v.updatesAt.of(v.sc.Bytes()) }

// ConsensusParamUpdatesJSON is block_results.consensus_param_updates as
// written; nil when absent or null.
func (v *View) ConsensusParamUpdatesJSON() []byte { return v.params.of(v.sc.Bytes()) }

// Commit is a block's last_commit: the votes that committed the block
// before it.
type Commit struct {
	Height     int64
	Round      int32
	BlockID    BlockID
	Signatures []CommitSig
}

// BlockID is a block's hash and its part set header.
type BlockID struct {
	Hash       []byte
	PartsTotal uint32
	PartsHash  []byte
}

// CommitSig is one validator's entry in a commit. Signature is nil for an
// absent validator, Timestamp zero.
type CommitSig struct {
	Flag             int32 // BlockIDFlagAbsent, BlockIDFlagCommit or BlockIDFlagNil
	ValidatorAddress []byte
	Timestamp        time.Time
	Signature        []byte
}

// LastCommit returns the block's last_commit as values; the zero Commit
// when the record has none.
func (v *View) LastCommit() (Commit, error) {
	c, id := &v.commit, &v.commit.blockID
	if c.round < 0 || c.round > 1<<31-1 || id.total < 0 || id.total > 1<<32-1 {
		return Commit{}, malformed("block.last_commit: round %d or part count %d out of range", c.round, id.total)
	}
	x := hexes{v: v}
	out := Commit{Height: c.height, Round: int32(c.round), Signatures: make([]CommitSig, len(v.sigs))}
	out.BlockID = BlockID{Hash: x.of(id.hash, "block.last_commit.block_id.hash"), PartsTotal: uint32(id.total),
		PartsHash: x.of(id.parts, "block.last_commit.block_id.parts.hash")}
	for i, sg := range v.sigs {
		cs := &out.Signatures[i]
		f, err := sg.check(i)
		if err != nil {
			return Commit{}, err
		}
		cs.Flag = f
		if !sg.addr.Null && sg.addr.Len() > 0 {
			cs.ValidatorAddress = x.of(sg.addr, "block.last_commit.signatures.validator_address")
		}
		if cs.Timestamp, err = v.sigTime(sg, i); err != nil {
			return Commit{}, err
		}
		if b := v.bytesOf(sg.sig); len(b) > 0 {
			if cs.Signature, err = base64.StdEncoding.AppendDecode(nil, b); err != nil {
				return Commit{}, malformed("block.last_commit.signatures[%d].signature: %v", i, err)
			}
		}
	}
	if x.err != nil {
		return Commit{}, x.err
	}
	return out, nil
}

// check returns the signature's block ID flag, checked to fit its type.
func (sg *sigRef) check(i int) (int32, error) {
	if sg.flag < 0 || sg.flag > 1<<31-1 {
		return 0, malformed("block.last_commit.signatures[%d].block_id_flag %d", i, sg.flag)
	}
	return int32(sg.flag), nil
}

// sigTime is the signature's timestamp; zero for an absent validator's.
func (v *View) sigTime(sg sigRef, i int) (time.Time, error) {
	if sg.ts.Null || sg.ts.Len() == 0 {
		return time.Time{}, nil
	}
	t, err := parseTime(v.bytesOf(sg.ts))
	if err != nil {
		return time.Time{}, malformed("block.last_commit.signatures[%d].timestamp: %v", i, err)
	}
	return t, nil
}
