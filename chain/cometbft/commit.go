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

// Block ID flags of a commit signature (CometBFT types.BlockIDFlag).
const (
	BlockIDFlagAbsent = 1 // the validator's vote did not make it into the commit
	BlockIDFlagCommit = 2 // voted for the block
	BlockIDFlagNil    = 3 // voted nil
)

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
		signed := any(st.commit.height)
		size := 0
		for _, sg := range st.sigs {
			size += sg.addr.Len() / 2
		}
		arena := rows.Bytes(size)[:0] // as emit's
		for i, sg := range st.sigs {
			flag, err := sg.check(i)
			if err != nil {
				return err
			}
			row := rows.Row(tableCommitSignatures)
			row[csHeight] = hv
			row[csBlockTime] = tv
			row[csSignedHeight] = signed
			row[csIndex] = boxInt32(int32(i))
			row[csFlag] = boxInt32(flag)
			row[csAddress] = nil
			if !sg.addr.Null && sg.addr.Len() > 0 {
				var v []byte
				if arena, v, err = st.appendHex(arena, sg.addr, "block.last_commit.signatures.validator_address"); err != nil {
					return err
				}
				row[csAddress] = rows.BoxBytes(v)
			}
			row[csTimestamp] = nil
			t, err := st.sigTime(sg, i)
			if err != nil {
				return err
			}
			if !t.IsZero() {
				row[csTimestamp] = t
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

	if p := st.ConsensusParamUpdatesJSON(); p != nil {
		row := rows.Row(tableConsensusParamUpdates)
		row[cpHeight] = hv
		row[cpBlockTime] = tv
		row[cpParams] = appendCleanJSON(nil, p, &st.scratch)
	}
	return nil
}
