package cometbft

import (
	"crypto/sha256"
	"encoding/base64"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/jsonscan"
	"golang.org/x/crypto/ripemd160" //nolint:staticcheck // Cosmos SDK secp256k1 addresses are RIPEMD-160 of SHA-256; no other package has it
)

// The commit signatures, validator updates and consensus parameter updates
// of a block: what /block's last_commit and /block_results'
// validator_updates and consensus_param_updates say. The raw record holds
// them already (it is the two answers as sent), so they are decoded from
// any staged record, old ones included.

// sigRef is one element of last_commit.signatures.
type sigRef struct {
	flag int64
	addr jsonscan.Span // hex; empty for an absent validator
	ts   jsonscan.Span // RFC 3339; 0001-01-01T00:00:00Z for an absent validator
}

// valUpdateRef is one element of block_results.validator_updates.
type valUpdateRef struct {
	keyType string        // ed25519, secp256k1, bls12_381, … as the node names it
	key     jsonscan.Span // base64
	power   int64
}

// Block ID flags of a commit signature (CometBFT types.BlockIDFlag).
const (
	BlockIDFlagAbsent = 1 // the validator's vote did not make it into the commit
	BlockIDFlagCommit = 2 // voted for the block
	BlockIDFlagNil    = 3 // voted nil
)

// parseLastCommit reads block.last_commit: its height and signatures.
func (st *decodeState) parseLastCommit() {
	s := &st.sc
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "height":
			st.commitHeight = s.Integer()
		case "signatures":
			st.sigs = st.sigs[:0]
			if !s.OpenArray() {
				continue
			}
			m := 0
			for s.NextElem(&m) {
				var sg sigRef
				if s.OpenObject() {
					o := 0
					for k, ok := s.NextKey(&o); ok; k, ok = s.NextKey(&o) {
						switch string(k) {
						case "block_id_flag":
							sg.flag = s.Integer()
						case "validator_address":
							sg.addr = s.Str()
						case "timestamp":
							sg.ts = s.Str()
						default: // signature
							s.Skip()
						}
					}
				}
				st.sigs = append(st.sigs, sg)
			}
		default: // round, block_id
			s.Skip()
		}
	}
}

// parseValidatorUpdates reads block_results.validator_updates in every form
// a node prints it:
//
//	{"pub_key":{"Sum":{"type":"tendermint.crypto.PublicKey_Ed25519","value":{"ed25519":"…"}}},"power":"10"}  (0.34–0.38)
//	{"pub_key":{"type":"tendermint/PubKeyEd25519","value":"…"},"power":"10"}                               (amino JSON)
//	{"pub_key_type":"ed25519","pub_key_bytes":"…","power":"10"}                                           (1.0)
func (st *decodeState) parseValidatorUpdates() {
	s := &st.sc
	st.valUpdates = st.valUpdates[:0]
	if !s.OpenArray() {
		return
	}
	m := 0
	for s.NextElem(&m) {
		var u valUpdateRef
		if s.OpenObject() {
			n := 0
			for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
				switch string(k) {
				case "power":
					u.power = s.Integer()
				case "pub_key":
					st.parsePubKey(&u, 0)
				case "pub_key_type":
					u.keyType = st.text(s.Str())
				case "pub_key_bytes":
					u.key = s.Str()
				default:
					s.Skip()
				}
			}
		}
		st.valUpdates = append(st.valUpdates, u)
	}
}

// parsePubKey reads a public key object (see parseValidatorUpdates) into u.
func (st *decodeState) parsePubKey(u *valUpdateRef, depth int) {
	s := &st.sc
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch {
		case string(k) == "Sum" && depth == 0:
			st.parsePubKey(u, 1)
		case string(k) == "type" && s.Peek() == '"':
			if t := aminoKeyType(st.bytesOf(s.Str())); t != "" {
				u.keyType = t
			}
		case string(k) == "value" && s.Peek() == '"': // amino: the key itself
			u.key = s.Str()
		case string(k) == "value" && s.Peek() == '{': // protobuf oneof: {"ed25519":"…"}
			if !s.OpenObject() {
				continue
			}
			o := 0
			for k, ok := s.NextKey(&o); ok; k, ok = s.NextKey(&o) {
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

// aminoKeyType maps the type names nodes print for public keys to one name
// per key type; unknown names map to "".
func aminoKeyType(t []byte) string {
	switch string(t) {
	case "tendermint/PubKeyEd25519", "tendermint.crypto.PublicKey_Ed25519", "ed25519":
		return "ed25519"
	case "tendermint/PubKeySecp256k1", "tendermint.crypto.PublicKey_Secp256K1", "secp256k1":
		return "secp256k1"
	case "cometbft/PubKeyBls12_381", "tendermint.crypto.PublicKey_Bls12381", "bls12_381":
		return "bls12_381"
	}
	return ""
}

// keyTypeName names the key of a protobuf PublicKey oneof member.
func keyTypeName(k []byte) string {
	switch string(k) {
	case "ed25519":
		return "ed25519"
	case "secp256k1":
		return "secp256k1"
	case "bls12381", "bls12_381":
		return "bls12_381"
	}
	return string(k)
}

// ValidatorAddress is CometBFT's address of a validator key: the first 20
// bytes of SHA-256 of the key (ed25519, BLS12-381), RIPEMD-160 of SHA-256
// of the compressed key (secp256k1); nil for another type.
func ValidatorAddress(keyType string, key []byte) []byte {
	switch keyType {
	case "ed25519", "bls12_381":
		sum := sha256.Sum256(key)
		return sum[:20]
	case "secp256k1":
		sum := sha256.Sum256(key)
		h := ripemd160.New()
		h.Write(sum[:])
		return h.Sum(nil)
	}
	return nil
}

// captureValue consumes one JSON value and returns its span, or ok false
// for null.
func captureValue(s *jsonscan.Scanner) (start, end int, ok bool) {
	if s.Peek() == 'n' && s.Literal("null") {
		return 0, 0, false
	}
	start = s.Pos()
	s.Skip()
	return start, s.Pos(), s.Err() == nil
}

// appendCleanJSON appends the JSON value at b[start:end] (already
// validated by the scanner) with every string re-encoded by
// jsonscan.AppendQuoted, so that it is fit for jsonb: no \u0000, no invalid
// UTF-8.
func appendCleanJSON(dst []byte, b []byte, scratch *[]byte) []byte {
	var sc jsonscan.Scanner
	sc.Reset(b)
	return appendValue(&sc, dst, scratch, 0)
}

func appendValue(s *jsonscan.Scanner, dst []byte, scratch *[]byte, depth int) []byte {
	if s.Err() != nil || depth > jsonscan.CursorDepth {
		return dst
	}
	switch c := s.Peek(); c {
	case '"':
		r := s.String()
		if s.Err() != nil {
			return dst
		}
		return jsonscan.AppendQuoted(dst, s.Text(r, scratch))
	case '{':
		s.OpenObject()
		dst = append(dst, '{')
		n := 0
		for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
			if n > 1 {
				dst = append(dst, ',')
			}
			dst = jsonscan.AppendQuoted(dst, k) // NextKey has unescaped it
			dst = append(dst, ':')
			dst = appendValue(s, dst, scratch, depth+1)
		}
		return append(dst, '}')
	case '[':
		s.OpenArray()
		dst = append(dst, '[')
		n := 0
		for s.NextElem(&n) {
			if n > 1 {
				dst = append(dst, ',')
			}
			dst = appendValue(s, dst, scratch, depth+1)
		}
		return append(dst, ']')
	default:
		start := s.Pos()
		s.Skip()
		return append(dst, s.Bytes()[start:s.Pos()]...)
	}
}

// emitValidatorRows appends the commit_signatures, validator_updates and
// consensus_param_updates rows of the parsed block.
func (st *decodeState) emitValidatorRows(rows *chain.Rows, hv, tv any) error {
	if len(st.sigs) > 0 {
		signed := any(st.commitHeight)
		size := 0
		for _, sg := range st.sigs {
			size += sg.addr.Len() / 2
		}
		arena := rows.Bytes(size)[:0] // as emit's
		for i, sg := range st.sigs {
			row := rows.Row(tableCommitSignatures)
			row[csHeight] = hv
			row[csBlockTime] = tv
			row[csSignedHeight] = signed
			row[csIndex] = boxInt32(int32(i))
			if sg.flag < 0 || sg.flag > 1<<31-1 {
				return malformed("block.last_commit.signatures[%d].block_id_flag %d", i, sg.flag)
			}
			row[csFlag] = boxInt32(int32(sg.flag))
			row[csAddress] = nil
			if !sg.addr.Null && sg.addr.Len() > 0 {
				var v []byte
				var err error
				if arena, v, err = st.appendHex(arena, sg.addr, "block.last_commit.signatures.validator_address"); err != nil {
					return err
				}
				row[csAddress] = rows.BoxBytes(v)
			}
			row[csTimestamp] = nil
			if !sg.ts.Null && sg.ts.Len() > 0 {
				t, err := parseTime(st.bytesOf(sg.ts))
				if err != nil {
					return malformed("block.last_commit.signatures[%d].timestamp: %v", i, err)
				}
				if !t.IsZero() {
					row[csTimestamp] = t
				}
			}
		}
	}

	for i, u := range st.valUpdates {
		key, err := base64.StdEncoding.AppendDecode(nil, st.bytesOf(u.key))
		if err != nil {
			return malformed("block_results.validator_updates[%d].pub_key: %v", i, err)
		}
		if key == nil {
			key = []byte{}
		}
		row := rows.Row(tableValidatorUpdates)
		row[vuHeight] = hv
		row[vuBlockTime] = tv
		row[vuIndex] = boxInt32(int32(i))
		row[vuKeyType] = u.keyType
		row[vuKey] = key
		if a := ValidatorAddress(u.keyType, key); a != nil {
			row[vuAddress] = a
		} else {
			row[vuAddress] = nil
		}
		row[vuPower] = u.power
	}

	if st.paramsOK {
		row := rows.Row(tableConsensusParamUpdates)
		row[cpHeight] = hv
		row[cpBlockTime] = tv
		row[cpParams] = appendCleanJSON(nil, st.sc.Bytes()[st.paramsStart:st.paramsEnd], &st.scratch)
	}
	return nil
}
