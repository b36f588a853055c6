package protodec

import (
	"bytes"
	"encoding/base64"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/blockhaul/blockhaul/chain/jsonscan"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The JSON of a message is written here straight from its wire bytes when
// its type allows, rather than by unmarshaling it into a dynamic message
// and marshaling that with protojson: that round trip allocates every field
// and value anew and was most of what decoding a Cosmos message cost. The
// direct writer handles proto3 messages of scalars, strings, bytes, enums,
// nested and repeated messages, Any and Timestamp: what Cosmos messages
// are made of. Anything else, and anything unusual on the wire (a field
// twice, a wrong wire type, invalid UTF-8, a type it cannot resolve),
// makes it give up, and AppendJSON takes the protojson path, which decides
// what such a message gives, so both paths give the same JSON value
// (TestWireJSONMatchesProtojson) wherever the direct one answers.

// wireMsg is how the direct writer writes one message type.
type wireMsg struct {
	ok        bool // the type and every type within it can be written directly
	any       bool // google.protobuf.Any
	timestamp bool // google.protobuf.Timestamp
	fields    []wireField
	byNum     map[protowire.Number]int // field index by number
	signer    int                      // index of the cosmos.msg.v1.signer field, or -1
}

// wireField is one field of a wireMsg.
type wireField struct {
	key      []byte // `"name":`
	kind     protoreflect.Kind
	list     bool
	presence bool // written only when on the wire
	oneof    int  // index of its oneof, or -1
	enum     protoreflect.EnumDescriptor
	msg      *wireMsg
}

// maxWireFields and maxWireOneofs bound the fields and oneofs of a type the
// direct writer takes: what it has seen of a message is a bitmap on the
// stack.
const (
	maxWireFields = 128
	maxWireOneofs = 64
	maxWireDepth  = 64
)

// wirePlans builds wireMsg values, once per type and set.
type wirePlans struct {
	mu    sync.Mutex
	plans map[protoreflect.FullName]*wireMsg
}

// plan returns the wireMsg of md, building it and those of the types within
// it on first use.
func (w *wirePlans) plan(md protoreflect.MessageDescriptor) *wireMsg {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.plans == nil {
		w.plans = map[protoreflect.FullName]*wireMsg{}
	}
	return w.build(md)
}

func (w *wirePlans) build(md protoreflect.MessageDescriptor) *wireMsg {
	if p := w.plans[md.FullName()]; p != nil {
		return p
	}
	p := &wireMsg{signer: -1}
	w.plans[md.FullName()] = p
	switch md.FullName() {
	case "google.protobuf.Any":
		p.ok, p.any = true, true
		return p
	case "google.protobuf.Timestamp":
		p.ok, p.timestamp = true, true
		return p
	}
	if md.ParentFile().Package() == "google.protobuf" || md.ParentFile().Syntax() != protoreflect.Proto3 ||
		md.ExtensionRanges().Len() > 0 || md.Fields().Len() > maxWireFields || md.Oneofs().Len() > maxWireOneofs {
		return p
	}
	p.ok = true
	fields := md.Fields()
	p.fields = make([]wireField, fields.Len())
	p.byNum = make(map[protowire.Number]int, fields.Len())
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		f := wireField{
			key:      append(strconv.AppendQuote(nil, string(fd.Name())), ':'),
			kind:     fd.Kind(),
			list:     fd.IsList(),
			presence: fd.HasPresence(),
			oneof:    -1,
		}
		if od := fd.ContainingOneof(); od != nil {
			f.oneof = od.Index()
		}
		switch {
		case fd.IsMap(), fd.Kind() == protoreflect.FloatKind, fd.Kind() == protoreflect.DoubleKind,
			fd.Kind() == protoreflect.GroupKind:
			p.ok = false
		case fd.Kind() == protoreflect.EnumKind:
			f.enum = fd.Enum()
			if f.enum.FullName() == "google.protobuf.NullValue" {
				p.ok = false
			}
		case fd.Kind() == protoreflect.MessageKind:
			f.msg = w.build(fd.Message())
		}
		p.fields[i] = f
		p.byNum[fd.Number()] = i
	}
	if sf := signerField(md); sf != nil {
		p.signer = sf.Index()
	}
	return p
}

// wireWriter writes the JSON of one message; signer is what the
// message's signer field holds, once written.
type wireWriter struct {
	s      *Set
	signer string
}

// message appends the JSON object of the message b of type p, and finds its
// signer if signerDepth is not negative. ok false: the direct writer does
// not answer for b (the protojson path decides).
func (w *wireWriter) message(dst, b []byte, p *wireMsg, depth, signerDepth int) ([]byte, bool) {
	if !p.ok || depth > maxWireDepth {
		return dst, false
	}
	switch {
	case p.any:
		return w.any(dst, b, depth)
	case p.timestamp:
		return appendTimestamp(dst, b)
	}
	dst = append(dst, '{')
	dst, ok := w.fields(dst, b, p, depth, signerDepth)
	return append(dst, '}'), ok
}

// fields appends the members of the message b of type p, without braces,
// a comma before each but the first of the object (dst ends with '{' when
// none precedes them).
func (w *wireWriter) fields(dst, b []byte, p *wireMsg, depth, signerDepth int) ([]byte, bool) {
	var seen [maxWireFields / 64]uint64
	var oneofs uint64
	open, elems := -1, 0 // the list field whose array is open, and its elements so far
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return dst, false
		}
		b = b[n:]
		i, known := p.byNum[num]
		if !known {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return dst, false
			}
			b = b[n:]
			continue
		}
		f := &p.fields[i]
		if i != open {
			if open >= 0 {
				dst = append(dst, ']')
				open = -1
			}
			if seen[i/64]&(1<<(i%64)) != 0 {
				return dst, false // a field twice, or a list in two runs: merged by protobuf
			}
			seen[i/64] |= 1 << (i % 64)
			if f.oneof >= 0 {
				if oneofs&(1<<f.oneof) != 0 {
					return dst, false // two members of a oneof: the last wins
				}
				oneofs |= 1 << f.oneof
			}
			if dst[len(dst)-1] != '{' {
				dst = append(dst, ',')
			}
			dst = append(dst, f.key...)
			if f.list {
				dst = append(dst, '[')
				open, elems = i, 0
			}
		}
		sd := -1 // the signer search's depth, if it goes through this value
		if signerDepth >= 0 && signerDepth <= 4 && i == p.signer && (!f.list || elems == 0) {
			sd = signerDepth
		}
		var ok bool
		if f.list && typ == protowire.BytesType && packable(f.kind) {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return dst, false
			}
			b = b[m:]
			if dst, ok = w.packed(dst, v, f, depth, &elems); !ok {
				return dst, false
			}
			continue
		}
		if f.list {
			if elems > 0 {
				dst = append(dst, ',')
			}
			elems++
		}
		if dst, n, ok = w.value(dst, b, typ, f, depth, sd); !ok {
			return dst, false
		}
		b = b[n:]
	}
	if open >= 0 {
		dst = append(dst, ']')
	}
	return appendDefaults(dst, p, &seen), true
}

// packed writes the elements of a packed repeated field, v its bytes,
// counting them in *elems.
func (w *wireWriter) packed(dst, v []byte, f *wireField, depth int, elems *int) ([]byte, bool) {
	for len(v) > 0 {
		if *elems > 0 {
			dst = append(dst, ',')
		}
		*elems++
		var n int
		var ok bool
		if dst, n, ok = w.value(dst, v, wireType(f.kind), f, depth, -1); !ok {
			return dst, false
		}
		v = v[n:]
	}
	return dst, true
}

// appendDefaults writes the fields without presence that seen does not
// hold, with their default, as protojson's EmitDefaultValues writes them.
func appendDefaults(dst []byte, p *wireMsg, seen *[maxWireFields / 64]uint64) []byte {
	for i := range p.fields {
		f := &p.fields[i]
		if f.presence || seen[i/64]&(1<<(i%64)) != 0 {
			continue
		}
		if dst[len(dst)-1] != '{' {
			dst = append(dst, ',')
		}
		dst = append(dst, f.key...)
		dst = appendDefault(dst, f)
	}
	return dst
}

// value appends one value of field f read from b, whose wire type is typ,
// and returns how many bytes of b it took. sd is the depth of the signer
// search when f is the signer field, else -1.
func (w *wireWriter) value(dst, b []byte, typ protowire.Type, f *wireField, depth, sd int) ([]byte, int, bool) {
	if typ != wireType(f.kind) {
		return dst, 0, false // protobuf keeps it as an unknown field
	}
	switch typ {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return dst, 0, false
		}
		return appendVarint(dst, v, f), n, true
	case protowire.Fixed32Type:
		v, n := protowire.ConsumeFixed32(b)
		if n < 0 {
			return dst, 0, false
		}
		if f.kind == protoreflect.Sfixed32Kind {
			return strconv.AppendInt(dst, int64(int32(v)), 10), n, true
		}
		return strconv.AppendUint(dst, uint64(v), 10), n, true
	case protowire.Fixed64Type:
		v, n := protowire.ConsumeFixed64(b)
		if n < 0 {
			return dst, 0, false
		}
		dst = append(dst, '"')
		if f.kind == protoreflect.Sfixed64Kind {
			dst = strconv.AppendInt(dst, int64(v), 10)
		} else {
			dst = strconv.AppendUint(dst, v, 10)
		}
		return append(dst, '"'), n, true
	}
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return dst, 0, false
	}
	switch f.kind {
	case protoreflect.StringKind:
		if !utf8.Valid(v) {
			return dst, 0, false // proto3 refuses it
		}
		if sd >= 0 && !f.list {
			w.signer = string(v)
		}
		return jsonscan.AppendQuoted(dst, v), n, true
	case protoreflect.BytesKind:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v)
		return append(dst, '"'), n, true
	}
	// A message: the signer is followed into a singular one, or into the
	// first of a list.
	if sd >= 0 {
		sd++
	}
	dst, ok := w.message(dst, v, f.msg, depth+1, sd)
	return dst, n, ok
}

// any appends an Any as protojson does: "@type", then the fields of the
// message it holds, resolved through the set.
func (w *wireWriter) any(dst, b []byte, depth int) ([]byte, bool) {
	f, _, ok := twoFields(b, protowire.BytesType)
	url, value := f[0], f[1]
	if !ok {
		return dst, false
	}
	if !utf8.Valid(url) {
		return dst, false
	}
	slash := bytes.LastIndexByte(url, '/')
	if slash < 0 {
		return dst, false
	}
	t := w.s.msgs[string(url[slash:])]
	if t == nil {
		return dst, false
	}
	p := t.wirePlan(w.s)
	if !p.ok || p.any || p.timestamp {
		return dst, false // protojson writes these under "value"
	}
	dst = append(dst, `{"@type":`...)
	dst = jsonscan.AppendQuoted(dst, url)
	dst, ok = w.fields(dst, value, p, depth+1, -1)
	return append(dst, '}'), ok
}

// wirePlan returns t's wireMsg, built on first use.
func (t *msgType) wirePlan(s *Set) *wireMsg {
	t.planOnce.Do(func() { t.plan = s.plans.plan(t.mt.Descriptor()) })
	return t.plan
}

// packable reports whether a list of kind k may be packed.
func packable(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return false
	}
	return true
}

// wireType is the wire type of a value of kind k.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// appendVarint appends a varint value of field f as protojson writes it:
// 64-bit integers as strings, enums by name.
func appendVarint(dst []byte, v uint64, f *wireField) []byte {
	switch f.kind {
	case protoreflect.BoolKind:
		if v != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case protoreflect.Int32Kind:
		return strconv.AppendInt(dst, int64(int32(v)), 10)
	case protoreflect.Sint32Kind:
		return strconv.AppendInt(dst, int64(int32(protowire.DecodeZigZag(v&math.MaxUint32))), 10)
	case protoreflect.Uint32Kind:
		return strconv.AppendUint(dst, uint64(uint32(v)), 10)
	case protoreflect.Int64Kind:
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, int64(v), 10)
		return append(dst, '"')
	case protoreflect.Sint64Kind:
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, protowire.DecodeZigZag(v), 10)
		return append(dst, '"')
	case protoreflect.Uint64Kind:
		dst = append(dst, '"')
		dst = strconv.AppendUint(dst, v, 10)
		return append(dst, '"')
	}
	return appendEnum(dst, f.enum, protoreflect.EnumNumber(int32(v)))
}

func appendEnum(dst []byte, ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) []byte {
	if d := ed.Values().ByNumber(n); d != nil {
		dst = append(dst, '"')
		dst = append(dst, d.Name()...) // an identifier: nothing to escape
		return append(dst, '"')
	}
	return strconv.AppendInt(dst, int64(n), 10)
}

// appendDefault appends the value protojson writes for an absent field
// without presence.
func appendDefault(dst []byte, f *wireField) []byte {
	if f.list {
		return append(dst, "[]"...)
	}
	switch f.kind {
	case protoreflect.BoolKind:
		return append(dst, "false"...)
	case protoreflect.StringKind, protoreflect.BytesKind:
		return append(dst, `""`...)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind,
		protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return append(dst, `"0"`...)
	case protoreflect.EnumKind:
		return appendEnum(dst, f.enum, 0)
	}
	return append(dst, '0')
}

// twoFields reads fields 1 and 2 of the message b of a well-known type (Any,
// Timestamp), both of wire type typ: their bytes, or their varints, the
// last of each as protobuf keeps it. Other fields are skipped. ok false: b
// does not read, or one of the two has another wire type.
func twoFields(b []byte, typ protowire.Type) (f [2][]byte, v [2]uint64, ok bool) {
	for len(b) > 0 {
		num, t, n := protowire.ConsumeTag(b)
		if n < 0 {
			return f, v, false
		}
		b = b[n:]
		if num != 1 && num != 2 {
			if n = protowire.ConsumeFieldValue(num, t, b); n < 0 {
				return f, v, false
			}
			b = b[n:]
			continue
		}
		if t != typ {
			return f, v, false
		}
		if typ == protowire.BytesType {
			f[num-1], n = protowire.ConsumeBytes(b)
		} else {
			v[num-1], n = protowire.ConsumeVarint(b)
		}
		if n < 0 {
			return f, v, false
		}
		b = b[n:]
	}
	return f, v, true
}

// Timestamps protojson writes: 0001-01-01 to 9999-12-31 UTC.
const (
	minTimestampSeconds = -62135596800
	maxTimestampSeconds = 253402300799
)

// appendTimestamp appends a google.protobuf.Timestamp as protojson does:
// RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits.
func appendTimestamp(dst, b []byte) ([]byte, bool) {
	_, v, ok := twoFields(b, protowire.VarintType)
	secs, nanos := int64(v[0]), int64(int32(v[1]))
	if !ok {
		return dst, false
	}
	if secs < minTimestampSeconds || secs > maxTimestampSeconds || nanos < 0 || nanos > 999_999_999 {
		return dst, false
	}
	t := time.Unix(secs, nanos).UTC()
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, "2006-01-02T15:04:05")
	switch {
	case nanos == 0:
	case nanos%1_000_000 == 0:
		dst = append(dst, '.')
		dst = appendDigits(dst, nanos/1_000_000, 3)
	case nanos%1_000 == 0:
		dst = append(dst, '.')
		dst = appendDigits(dst, nanos/1_000, 6)
	default:
		dst = append(dst, '.')
		dst = appendDigits(dst, nanos, 9)
	}
	return append(dst, `Z"`...), true
}

// appendDigits appends x with leading zeros to width digits.
func appendDigits(dst []byte, x int64, width int) []byte {
	var buf [9]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + x%10)
		x /= 10
	}
	return append(dst, buf[:width]...)
}
