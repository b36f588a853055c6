package cometbft

import (
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// Decoded JSON of the common Cosmos SDK messages, from hand-written
// descriptions of their protobuf fields (below) instead of the SDK's
// generated code. The JSON is the SDK's protobuf JSON with the proto field
// names (snake_case, as the SDK's REST API and amino JSON print them):
//
//   - every scalar field is present, with its default when the wire has
//     none ("" for strings, "0" for 64-bit integers);
//   - 64-bit integers are strings, enums their value names (an unknown
//     value as its number);
//   - a sub-message absent from the wire is omitted; a repeated field is
//     always an array.
//
// A message of a type not described here, or whose bytes do not read as
// its description (wrong wire type, malformed), has no decoded JSON; its
// raw bytes are kept either way.

type pbKind uint8

const (
	kString pbKind = iota
	kUint64
	kInt64
	kEnum
	kMessage
)

type pbFieldDesc struct {
	num      protowire.Number
	name     string
	kind     pbKind
	repeated bool
	msg      *pbMsgDesc // kMessage
	enum     []string   // kEnum: names by value
}

type pbMsgDesc struct {
	fields []pbFieldDesc
	// signer is the field holding the address that signs the message
	// (cosmos.msg.v1.signer), or 0; signerIn, when set, is the repeated
	// message field whose first element holds it in field signer.
	signer, signerIn protowire.Number
}

var (
	descCoin   = &pbMsgDesc{fields: []pbFieldDesc{{1, "denom", kString, false, nil, nil}, {2, "amount", kString, false, nil, nil}}}
	descHeight = &pbMsgDesc{fields: []pbFieldDesc{{1, "revision_number", kUint64, false, nil, nil}, {2, "revision_height", kUint64, false, nil, nil}}}
	descIO     = &pbMsgDesc{fields: []pbFieldDesc{{1, "address", kString, false, nil, nil}, {2, "coins", kMessage, true, descCoin, nil}}}

	voteOptions = []string{"VOTE_OPTION_UNSPECIFIED", "VOTE_OPTION_YES", "VOTE_OPTION_ABSTAIN", "VOTE_OPTION_NO", "VOTE_OPTION_NO_WITH_VETO"}

	descDelegate = &pbMsgDesc{signer: 1, fields: []pbFieldDesc{
		{1, "delegator_address", kString, false, nil, nil}, {2, "validator_address", kString, false, nil, nil},
		{3, "amount", kMessage, false, descCoin, nil}}}
	descDeposit = &pbMsgDesc{signer: 2, fields: []pbFieldDesc{
		{1, "proposal_id", kUint64, false, nil, nil}, {2, "depositor", kString, false, nil, nil},
		{3, "amount", kMessage, true, descCoin, nil}}}
)

// msgDescs are the message types decoded to JSON, by type URL.
var msgDescs = map[string]*pbMsgDesc{
	"/cosmos.bank.v1beta1.MsgSend": {signer: 1, fields: []pbFieldDesc{
		{1, "from_address", kString, false, nil, nil}, {2, "to_address", kString, false, nil, nil},
		{3, "amount", kMessage, true, descCoin, nil}}},
	"/cosmos.bank.v1beta1.MsgMultiSend": {signerIn: 1, signer: 1, fields: []pbFieldDesc{
		{1, "inputs", kMessage, true, descIO, nil}, {2, "outputs", kMessage, true, descIO, nil}}},

	"/cosmos.staking.v1beta1.MsgDelegate":   descDelegate,
	"/cosmos.staking.v1beta1.MsgUndelegate": descDelegate,
	"/cosmos.staking.v1beta1.MsgBeginRedelegate": {signer: 1, fields: []pbFieldDesc{
		{1, "delegator_address", kString, false, nil, nil}, {2, "validator_src_address", kString, false, nil, nil},
		{3, "validator_dst_address", kString, false, nil, nil}, {4, "amount", kMessage, false, descCoin, nil}}},
	"/cosmos.staking.v1beta1.MsgCancelUnbondingDelegation": {signer: 1, fields: []pbFieldDesc{
		{1, "delegator_address", kString, false, nil, nil}, {2, "validator_address", kString, false, nil, nil},
		{3, "amount", kMessage, false, descCoin, nil}, {4, "creation_height", kInt64, false, nil, nil}}},

	"/cosmos.distribution.v1beta1.MsgWithdrawDelegatorReward": {signer: 1, fields: []pbFieldDesc{
		{1, "delegator_address", kString, false, nil, nil}, {2, "validator_address", kString, false, nil, nil}}},
	"/cosmos.distribution.v1beta1.MsgWithdrawValidatorCommission": {signer: 1, fields: []pbFieldDesc{
		{1, "validator_address", kString, false, nil, nil}}},
	"/cosmos.distribution.v1beta1.MsgSetWithdrawAddress": {signer: 1, fields: []pbFieldDesc{
		{1, "delegator_address", kString, false, nil, nil}, {2, "withdraw_address", kString, false, nil, nil}}},

	"/cosmos.gov.v1beta1.MsgVote": {signer: 2, fields: []pbFieldDesc{
		{1, "proposal_id", kUint64, false, nil, nil}, {2, "voter", kString, false, nil, nil},
		{3, "option", kEnum, false, nil, voteOptions}}},
	"/cosmos.gov.v1.MsgVote": {signer: 2, fields: []pbFieldDesc{
		{1, "proposal_id", kUint64, false, nil, nil}, {2, "voter", kString, false, nil, nil},
		{3, "option", kEnum, false, nil, voteOptions}, {4, "metadata", kString, false, nil, nil}}},
	"/cosmos.gov.v1beta1.MsgDeposit": descDeposit,
	"/cosmos.gov.v1.MsgDeposit":      descDeposit,

	"/ibc.applications.transfer.v1.MsgTransfer": {signer: 4, fields: []pbFieldDesc{
		{1, "source_port", kString, false, nil, nil}, {2, "source_channel", kString, false, nil, nil},
		{3, "token", kMessage, false, descCoin, nil}, {4, "sender", kString, false, nil, nil},
		{5, "receiver", kString, false, nil, nil}, {6, "timeout_height", kMessage, false, descHeight, nil},
		{7, "timeout_timestamp", kUint64, false, nil, nil}, {8, "memo", kString, false, nil, nil}}},
}

// maxMsgDepth bounds the nesting of described messages (they nest two
// deep at most; the bound is for safety).
const maxMsgDepth = 8

// appendMsgJSON appends the JSON of the message b described by d to dst.
// On a malformed message it returns dst unchanged and false.
func appendMsgJSON(dst []byte, d *pbMsgDesc, b []byte) ([]byte, bool) {
	return appendMsgJSONDepth(dst, d, b, 0)
}

func appendMsgJSONDepth(dst []byte, d *pbMsgDesc, b []byte, depth int) ([]byte, bool) {
	if depth > maxMsgDepth {
		return dst, false
	}
	start := len(dst)
	dst = append(dst, '{')
	first := true
	for i := range d.fields {
		fd := &d.fields[i]
		var last pbField
		seen := false
		openedArray := false
		r := pbReader{b: b}
		for f, ok := r.next(); ok; f, ok = r.next() {
			if f.num != fd.num {
				continue
			}
			if f.wire != wireOf(fd.kind) {
				return dst[:start], false
			}
			if !fd.repeated {
				last, seen = f, true // proto3: the last one wins
				continue
			}
			if !openedArray {
				dst = appendKey(dst, fd.name, &first)
				dst = append(dst, '[')
				openedArray = true
			} else {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendValue(dst, fd, f, depth); !ok {
				return dst[:start], false
			}
		}
		if r.bad {
			return dst[:start], false
		}
		switch {
		case fd.repeated && openedArray:
			dst = append(dst, ']')
		case fd.repeated:
			dst = appendKey(dst, fd.name, &first)
			dst = append(dst, "[]"...)
		case seen:
			dst = appendKey(dst, fd.name, &first)
			var ok bool
			if dst, ok = appendValue(dst, fd, last, depth); !ok {
				return dst[:start], false
			}
		case fd.kind != kMessage: // the default, for a scalar absent from the wire
			dst = appendKey(dst, fd.name, &first)
			dst, _ = appendValue(dst, fd, pbField{}, depth)
		}
	}
	return append(dst, '}'), true
}

func wireOf(k pbKind) protowire.Type {
	switch k {
	case kString, kMessage:
		return protowire.BytesType
	}
	return protowire.VarintType
}

func appendKey(dst []byte, name string, first *bool) []byte {
	if !*first {
		dst = append(dst, ',')
	}
	*first = false
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

func appendValue(dst []byte, fd *pbFieldDesc, f pbField, depth int) ([]byte, bool) {
	switch fd.kind {
	case kString:
		return AppendJSONString(dst, f.bytes), true
	case kUint64:
		dst = append(dst, '"')
		dst = strconv.AppendUint(dst, f.u, 10)
		return append(dst, '"'), true
	case kInt64:
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, int64(f.u), 10)
		return append(dst, '"'), true
	case kEnum:
		v := int32(f.u)
		if v >= 0 && int(v) < len(fd.enum) {
			dst = append(dst, '"')
			dst = append(dst, fd.enum[v]...)
			return append(dst, '"'), true
		}
		return strconv.AppendInt(dst, int64(v), 10), true
	default: // kMessage
		return appendMsgJSONDepth(dst, fd.msg, f.bytes, depth+1)
	}
}

// msgSigner returns the signer address a described message names, or nil.
func msgSigner(d *pbMsgDesc, b []byte) []byte {
	if d.signer == 0 {
		return nil
	}
	if d.signerIn != 0 {
		r := pbReader{b: b}
		for f, ok := r.next(); ok; f, ok = r.next() {
			if f.num == d.signerIn && f.wire == protowire.BytesType {
				b = f.bytes
				break
			}
		}
	}
	var out []byte
	r := pbReader{b: b}
	for f, ok := r.next(); ok; f, ok = r.next() {
		if f.num == d.signer && f.wire == protowire.BytesType {
			out = f.bytes
		}
	}
	return out
}
