package cometbft

import "encoding/binary"

// A minimal protobuf wire reader, enough to read Cosmos SDK transactions
// without the SDK's generated code. It never panics and never allocates:
// every value is a slice of the input. Groups (wire types 3 and 4) and
// field number 0 are errors; nothing in the SDK uses them.

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// pbField is one field as read from the wire: its number and wire type, the
// value of a varint or fixed field, the bytes of a length-delimited one.
type pbField struct {
	num   int
	wire  int
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
	tag, n := binary.Uvarint(r.b)
	if n <= 0 || tag>>3 == 0 || tag>>3 > 1<<29-1 {
		r.bad = true
		return pbField{}, false
	}
	r.b = r.b[n:]
	f := pbField{num: int(tag >> 3), wire: int(tag & 7)}
	switch f.wire {
	case wireVarint:
		v, n := binary.Uvarint(r.b)
		if n <= 0 {
			r.bad = true
			return pbField{}, false
		}
		f.u, r.b = v, r.b[n:]
	case wireFixed64:
		if len(r.b) < 8 {
			r.bad = true
			return pbField{}, false
		}
		f.u, r.b = binary.LittleEndian.Uint64(r.b), r.b[8:]
	case wireFixed32:
		if len(r.b) < 4 {
			r.bad = true
			return pbField{}, false
		}
		f.u, r.b = uint64(binary.LittleEndian.Uint32(r.b)), r.b[4:]
	case wireBytes:
		l, n := binary.Uvarint(r.b)
		if n <= 0 || l > uint64(len(r.b)-n) {
			r.bad = true
			return pbField{}, false
		}
		f.bytes, r.b = r.b[n:n+int(l):n+int(l)], r.b[n+int(l):]
	default:
		r.bad = true
		return pbField{}, false
	}
	return f, true
}
