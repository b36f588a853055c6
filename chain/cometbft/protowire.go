package cometbft

import "google.golang.org/protobuf/encoding/protowire"

// Protobuf wire reading for Cosmos SDK transactions without the SDK's
// generated code, on google.golang.org/protobuf/encoding/protowire. It never
// panics and never allocates: every value is a slice of the input. Groups
// (wire types 3 and 4) and field numbers outside 1..2^29-1 are malformed;
// nothing in the SDK uses them.

// pbField is one field as read from the wire: its number and wire type, the
// value of a varint or fixed field, the bytes of a length-delimited one.
type pbField struct {
	num   protowire.Number
	wire  protowire.Type
	u     uint64
	bytes []byte
}

// pbReader walks the fields of one message.
type pbReader struct {
	b   []byte
	bad bool // the input is not a well-formed message
}

// next returns the next field, or false at the end of the message or on
// malformed input (then bad is set).
func (r *pbReader) next() (pbField, bool) {
	if len(r.b) == 0 || r.bad {
		return pbField{}, false
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 || !num.IsValid() {
		r.bad = true
		return pbField{}, false
	}
	f := pbField{num: num, wire: typ}
	var m int
	switch typ {
	case protowire.VarintType:
		f.u, m = protowire.ConsumeVarint(r.b[n:])
	case protowire.Fixed64Type:
		f.u, m = protowire.ConsumeFixed64(r.b[n:])
	case protowire.Fixed32Type:
		var v uint32
		v, m = protowire.ConsumeFixed32(r.b[n:])
		f.u = uint64(v)
	case protowire.BytesType:
		f.bytes, m = protowire.ConsumeBytes(r.b[n:])
		f.bytes = f.bytes[:len(f.bytes):len(f.bytes)]
	default:
		m = -1
	}
	if m < 0 {
		r.bad = true
		return pbField{}, false
	}
	r.b = r.b[n+m:]
	return f, true
}
