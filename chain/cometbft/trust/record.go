package trust

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/crypto/secp256k1"
	cmtjson "github.com/cometbft/cometbft/libs/json"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	"github.com/cometbft/cometbft/types"

	"github.com/blockhaul/blockhaul/chain/jsonscan"
)

// ErrMalformed is wrapped by the error for a record or answer the chain of
// trust cannot read.
var ErrMalformed = errors.New("trust: malformed record")

// ErrKeyType is wrapped by the error for a validator key of a type this
// verification does not check (it names the type).
var ErrKeyType = errors.New("trust: validator key type not supported")

// Record is what the chain of trust reads of one staged CometBFT record:
// the header, the commit of the previous height it carries, and the
// deterministic part of its results. Its byte slices alias nothing of the
// raw record.
type Record struct {
	Header types.Header
	// lastCommit is block.last_commit as written, parsed on demand: most
	// commits are authenticated by hash links and never read.
	lastCommit []byte
	// TxResults are the deterministic fields of each tx result (what
	// last_results_hash covers in 0.34, 0.37 and 0.38 alike: code, data,
	// gas_wanted, gas_used).
	TxResults []*abci.ExecTxResult
	// ValUpdates are block_results.validator_updates.
	ValUpdates []*types.Validator
	// ParamUpdates are block_results.consensus_param_updates; nil: none.
	ParamUpdates *cmtproto.ConsensusParams
	// paramsRaw is the update as written (to reuse the last parse).
	paramsRaw []byte
	// valUpdateErr is a validator update whose key cannot be checked:
	// reported only if the record is used.
	valUpdateErr error
}

// ParseRecord reads a raw record ({"block": …, "block_results": …}) for
// the chain of trust.
func ParseRecord(raw []byte) (*Record, error) {
	var r Record
	var s jsonscan.Scanner
	s.Reset(raw)
	if !s.OpenObject() {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, s.Err())
	}
	sawHeader := false
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "block":
			// /block result: {"block_id":…, "block":{"header":…, "last_commit":…}}
			if !s.OpenObject() {
				continue
			}
			m := 0
			for k, ok := s.NextKey(&m); ok; k, ok = s.NextKey(&m) {
				if string(k) != "block" {
					s.Skip()
					continue
				}
				if !s.OpenObject() {
					continue
				}
				o := 0
				for k, ok := s.NextKey(&o); ok; k, ok = s.NextKey(&o) {
					switch string(k) {
					case "header":
						sawHeader = true
						parseHeader(&s, &r.Header)
					case "last_commit":
						start := s.Pos()
						s.Skip()
						r.lastCommit = append([]byte(nil), raw[start:s.Pos()]...)
					default:
						s.Skip()
					}
				}
			}
		case "block_results":
			if !s.OpenObject() {
				continue
			}
			m := 0
			for k, ok := s.NextKey(&m); ok; k, ok = s.NextKey(&m) {
				switch string(k) {
				case "txs_results":
					r.TxResults = parseTxResults(&s, r.TxResults)
				case "validator_updates":
					r.ValUpdates, r.valUpdateErr = parseValidatorUpdates(&s)
				case "consensus_param_updates":
					if s.Peek() == 'n' && s.Literal("null") {
						continue
					}
					start := s.Pos()
					s.Skip()
					r.paramsRaw = append([]byte(nil), raw[start:s.Pos()]...)
				default:
					s.Skip()
				}
			}
		default:
			s.Skip()
		}
	}
	if s.Err() != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, s.Err())
	}
	if !sawHeader {
		return nil, fmt.Errorf("%w: no block.block.header", ErrMalformed)
	}
	return &r, nil
}

// parseParams reads consensus_param_updates (CometBFT's JSON of a
// ConsensusParams message), reusing prev when the bytes are the same.
func (r *Record) parseParams(prevRaw []byte, prev *cmtproto.ConsensusParams) error {
	if r.paramsRaw == nil {
		return nil
	}
	if prev != nil && string(prevRaw) == string(r.paramsRaw) {
		r.ParamUpdates = prev
		return nil
	}
	var p cmtproto.ConsensusParams
	if err := cmtjson.Unmarshal(r.paramsRaw, &p); err != nil {
		return fmt.Errorf("%w: block_results.consensus_param_updates: %v", ErrMalformed, err)
	}
	r.ParamUpdates = &p
	return nil
}

// Commit parses the commit this record carries (block.last_commit: the
// commit of the previous height).
func (r *Record) Commit() (*types.Commit, error) {
	if r.lastCommit == nil {
		return nil, fmt.Errorf("%w: no block.block.last_commit", ErrMalformed)
	}
	return ParseCommit(r.lastCommit)
}

// ParseCommit reads a commit as CometBFT prints it (block.last_commit, or
// /commit's signed_header.commit).
func ParseCommit(b []byte) (*types.Commit, error) {
	var s jsonscan.Scanner
	s.Reset(b)
	var c types.Commit
	if !s.OpenObject() {
		return nil, fmt.Errorf("%w: commit: %v", ErrMalformed, s.Err())
	}
	var err error
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "height":
			c.Height = s.Integer()
		case "round":
			c.Round = int32(s.Integer())
		case "block_id":
			parseBlockID(&s, &c.BlockID, &err)
		case "signatures":
			if !s.OpenArray() {
				continue
			}
			m := 0
			for s.NextElem(&m) {
				var sg types.CommitSig
				if !s.OpenObject() {
					continue
				}
				o := 0
				for k, ok := s.NextKey(&o); ok; k, ok = s.NextKey(&o) {
					switch string(k) {
					case "block_id_flag":
						sg.BlockIDFlag = types.BlockIDFlag(s.Integer())
					case "validator_address":
						sg.ValidatorAddress = hexOf(&s, &err, "validator_address")
					case "timestamp":
						sg.Timestamp = timeOf(&s, &err, "timestamp")
					case "signature":
						sg.Signature = base64Of(&s, &err, "signature")
					default:
						s.Skip()
					}
				}
				c.Signatures = append(c.Signatures, sg)
			}
		default:
			s.Skip()
		}
	}
	if s.Err() != nil {
		return nil, fmt.Errorf("%w: commit: %v", ErrMalformed, s.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: commit: %v", ErrMalformed, err)
	}
	return &c, nil
}

// ParseSignedHeader reads the result of /commit: the header and commit of
// one height.
func ParseSignedHeader(b []byte) (*types.Header, *types.Commit, error) {
	var s jsonscan.Scanner
	s.Reset(b)
	var h types.Header
	var commit []byte
	sawHeader := false
	if !s.OpenObject() {
		return nil, nil, fmt.Errorf("%w: /commit: %v", ErrMalformed, s.Err())
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		if string(k) != "signed_header" {
			s.Skip()
			continue
		}
		if !s.OpenObject() {
			continue
		}
		m := 0
		for k, ok := s.NextKey(&m); ok; k, ok = s.NextKey(&m) {
			switch string(k) {
			case "header":
				sawHeader = true
				parseHeader(&s, &h)
			case "commit":
				start := s.Pos()
				s.Skip()
				commit = b[start:s.Pos()]
			default:
				s.Skip()
			}
		}
	}
	if s.Err() != nil {
		return nil, nil, fmt.Errorf("%w: /commit: %v", ErrMalformed, s.Err())
	}
	if !sawHeader || commit == nil {
		return nil, nil, fmt.Errorf("%w: /commit: no signed_header.header and commit", ErrMalformed)
	}
	c, err := ParseCommit(commit)
	if err != nil {
		return nil, nil, err
	}
	return &h, c, nil
}

// parseHeader reads a header object into h; errors stick in s.
func parseHeader(s *jsonscan.Scanner, h *types.Header) {
	if !s.OpenObject() {
		return
	}
	var err error
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "version":
			if !s.OpenObject() {
				continue
			}
			m := 0
			for k, ok := s.NextKey(&m); ok; k, ok = s.NextKey(&m) {
				switch string(k) {
				case "block":
					h.Version.Block = uint64(s.Integer())
				case "app":
					h.Version.App = uint64(s.Integer())
				default:
					s.Skip()
				}
			}
		case "chain_id":
			var scratch []byte
			h.ChainID = string(s.Text(s.Str(), &scratch))
		case "height":
			h.Height = s.Integer()
		case "time":
			h.Time = timeOf(s, &err, "header.time")
		case "last_block_id":
			parseBlockID(s, &h.LastBlockID, &err)
		case "last_commit_hash":
			h.LastCommitHash = hexOf(s, &err, "header.last_commit_hash")
		case "data_hash":
			h.DataHash = hexOf(s, &err, "header.data_hash")
		case "validators_hash":
			h.ValidatorsHash = hexOf(s, &err, "header.validators_hash")
		case "next_validators_hash":
			h.NextValidatorsHash = hexOf(s, &err, "header.next_validators_hash")
		case "consensus_hash":
			h.ConsensusHash = hexOf(s, &err, "header.consensus_hash")
		case "app_hash":
			h.AppHash = hexOf(s, &err, "header.app_hash")
		case "last_results_hash":
			h.LastResultsHash = hexOf(s, &err, "header.last_results_hash")
		case "evidence_hash":
			h.EvidenceHash = hexOf(s, &err, "header.evidence_hash")
		case "proposer_address":
			h.ProposerAddress = hexOf(s, &err, "header.proposer_address")
		default:
			s.Skip()
		}
	}
	if err != nil && s.Err() == nil {
		s.Fail(err.Error())
	}
}

func parseBlockID(s *jsonscan.Scanner, id *types.BlockID, err *error) {
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch string(k) {
		case "hash":
			id.Hash = hexOf(s, err, "block_id.hash")
		case "parts":
			if !s.OpenObject() {
				continue
			}
			m := 0
			for k, ok := s.NextKey(&m); ok; k, ok = s.NextKey(&m) {
				switch string(k) {
				case "total":
					id.PartSetHeader.Total = uint32(s.Integer())
				case "hash":
					id.PartSetHeader.Hash = hexOf(s, err, "block_id.parts.hash")
				default:
					s.Skip()
				}
			}
		default:
			s.Skip()
		}
	}
}

func hexOf(s *jsonscan.Scanner, err *error, field string) []byte {
	r := s.Str()
	if r.Null || s.Err() != nil {
		return nil
	}
	b := s.Bytes()[r.Start:r.End]
	if len(b) == 0 {
		return nil
	}
	v, e := hex.DecodeString(string(b))
	if e != nil && *err == nil {
		*err = fmt.Errorf("%s: %v", field, e)
	}
	return v
}

func base64Of(s *jsonscan.Scanner, err *error, field string) []byte {
	r := s.Str()
	if r.Null || s.Err() != nil {
		return nil
	}
	b := s.Bytes()[r.Start:r.End]
	if len(b) == 0 {
		return nil
	}
	v, e := base64.StdEncoding.AppendDecode(nil, b)
	if e != nil && *err == nil {
		*err = fmt.Errorf("%s: %v", field, e)
	}
	return v
}

func timeOf(s *jsonscan.Scanner, err *error, field string) time.Time {
	r := s.Str()
	if r.Null || s.Err() != nil {
		return time.Time{}
	}
	t, e := time.Parse(time.RFC3339Nano, string(s.Bytes()[r.Start:r.End]))
	if e != nil && *err == nil {
		*err = fmt.Errorf("%s: %v", field, e)
	}
	return t
}

// parseTxResults reads the deterministic fields of txs_results.
func parseTxResults(s *jsonscan.Scanner, dst []*abci.ExecTxResult) []*abci.ExecTxResult {
	dst = dst[:0]
	if s.Peek() == 'n' && s.Literal("null") {
		return dst
	}
	if !s.OpenArray() {
		return dst
	}
	var err error
	m := 0
	for s.NextElem(&m) {
		var t abci.ExecTxResult
		if s.OpenObject() {
			n := 0
			for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
				switch string(k) {
				case "code":
					t.Code = uint32(s.Integer())
				case "data":
					t.Data = base64Of(s, &err, "txs_results.data")
				case "gas_wanted":
					t.GasWanted = s.Integer()
				case "gas_used":
					t.GasUsed = s.Integer()
				default:
					s.Skip()
				}
			}
		}
		dst = append(dst, &t)
	}
	if err != nil && s.Err() == nil {
		s.Fail(err.Error())
	}
	return dst
}

// parseValidatorUpdates reads block_results.validator_updates in every form
// a node prints it:
//
//	{"pub_key":{"Sum":{"type":"tendermint.crypto.PublicKey_Ed25519","value":{"ed25519":"…"}}},"power":"10"}  (0.37–0.38)
//	{"pub_key":{"type":"tendermint/PubKeyEd25519","value":"…"},"power":"10"}                               (amino JSON)
//	{"pub_key":{"ed25519":"…"},"power":"10"}                                                               (0.34)
//	{"pub_key_type":"ed25519","pub_key_bytes":"…","power":"10"}                                           (1.0)
//
// A key of a type the verification does not check is returned as an
// error naming it beside the updates it could read.
func parseValidatorUpdates(s *jsonscan.Scanner) ([]*types.Validator, error) {
	if s.Peek() == 'n' && s.Literal("null") {
		return nil, nil
	}
	if !s.OpenArray() {
		return nil, nil
	}
	var out []*types.Validator
	var bad error
	m := 0
	for s.NextElem(&m) {
		var keyType string
		var key []byte
		var power int64
		var err error
		if s.OpenObject() {
			n := 0
			for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
				switch string(k) {
				case "power":
					power = s.Integer()
				case "pub_key":
					parsePubKey(s, &keyType, &key, &err, 0)
				case "pub_key_type":
					var scratch []byte
					keyType = keyName(s.Text(s.Str(), &scratch))
				case "pub_key_bytes":
					key = base64Of(s, &err, "pub_key_bytes")
				default:
					s.Skip()
				}
			}
		}
		if err != nil && s.Err() == nil {
			s.Fail(err.Error())
		}
		pk, kerr := PubKey(keyType, key)
		if kerr != nil {
			if bad == nil {
				bad = fmt.Errorf("validator_updates[%d]: %w", m-1, kerr)
			}
			continue
		}
		out = append(out, &types.Validator{Address: pk.Address(), PubKey: pk, VotingPower: power})
	}
	return out, bad
}

func parsePubKey(s *jsonscan.Scanner, keyType *string, key *[]byte, err *error, depth int) {
	if !s.OpenObject() {
		return
	}
	n := 0
	for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
		switch {
		case string(k) == "Sum" && depth == 0:
			parsePubKey(s, keyType, key, err, 1)
		case string(k) == "type" && s.Peek() == '"':
			var scratch []byte
			if t := keyName(s.Text(s.Str(), &scratch)); t != "" {
				*keyType = t
			}
		case string(k) == "value" && s.Peek() == '"': // amino: the key itself
			*key = base64Of(s, err, "pub_key.value")
		case string(k) == "value" && s.Peek() == '{': // protobuf oneof: {"ed25519":"…"}
			parsePubKey(s, keyType, key, err, 2)
		case s.Peek() == '"' && keyName(k) != "": // {"ed25519":"…"}
			*keyType = keyName(k)
			*key = base64Of(s, err, "pub_key."+string(k))
		default:
			s.Skip()
		}
	}
}

// keyName maps the names nodes print for a key type to one name per type;
// "" for a name it does not know.
func keyName(t []byte) string {
	switch string(t) {
	case "tendermint/PubKeyEd25519", "tendermint.crypto.PublicKey_Ed25519", "ed25519":
		return "ed25519"
	case "tendermint/PubKeySecp256k1", "tendermint.crypto.PublicKey_Secp256K1", "secp256k1":
		return "secp256k1"
	case "cometbft/PubKeyBls12_381", "tendermint.crypto.PublicKey_Bls12381", "bls12381", "bls12_381":
		return "bls12_381"
	}
	return ""
}

// PubKey returns the CometBFT public key of keyType ("ed25519",
// "secp256k1"); any other type is refused by name (ErrKeyType).
func PubKey(keyType string, key []byte) (crypto.PubKey, error) {
	switch keyType {
	case "ed25519":
		if len(key) != ed25519.PubKeySize {
			return nil, fmt.Errorf("%w: ed25519 key of %d bytes", ErrMalformed, len(key))
		}
		return ed25519.PubKey(key), nil
	case "secp256k1":
		if len(key) != secp256k1.PubKeySize {
			return nil, fmt.Errorf("%w: secp256k1 key of %d bytes", ErrMalformed, len(key))
		}
		return secp256k1.PubKey(key), nil
	case "":
		return nil, fmt.Errorf("%w: a validator key of no type this blockhaul reads", ErrKeyType)
	}
	return nil, fmt.Errorf("%w: %s (blockhaul checks ed25519 and secp256k1 signatures)", ErrKeyType, keyType)
}
