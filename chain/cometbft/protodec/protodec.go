// Package protodec decodes Cosmos SDK messages — the protobuf Any values of
// a tx's body — into the canonical JSON of protojson, from descriptors
// rather than generated code: a built-in set compiled from the Cosmos SDK's
// and ibc-go's published .proto files (builtin.binpb.zst, written by
// scripts/protoset), plus whatever .proto files or compiled descriptor sets
// an operator gives (--proto, --proto-descriptors), compiled in-process
// with protocompile.
//
// The JSON is protojson's with the proto field names (snake_case) and
// every scalar field present with its default (EmitDefaultValues): 64-bit
// integers as strings, enums by value name, bytes as base64, a nested Any
// as {"@type": …, fields…} resolved through the same set, a sub-message
// absent from the wire omitted. A message of a type the set does not know
// is ErrUnknownType; bytes that do not read as their type are
// ErrMalformed.
//
// A Set is immutable once loaded and safe for concurrent use.
package protodec

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// builtin is the descriptor set of the Cosmos SDK (v0.53.4) and ibc-go
// (v8.8.0) with their imports: a zstd-compressed FileDescriptorSet.
//
//go:embed builtin.binpb.zst
var builtinZst []byte

var (
	// ErrUnknownType is a message whose type URL no descriptor defines.
	ErrUnknownType = errors.New("protodec: unknown message type")
	// ErrMalformed is a message whose bytes do not read as its type, or
	// whose JSON cannot be written (a nested Any of an unknown type).
	ErrMalformed = errors.New("protodec: malformed message")
	// ErrCompile is a --proto directory whose files do not compile (a
	// syntax error, a missing import); the error names file and line.
	ErrCompile = errors.New("protodec: proto files do not compile")
	// ErrProtoDir is a --proto directory that is not there or cannot be
	// read: no file was compiled.
	ErrProtoDir = errors.New("protodec: --proto directory cannot be read")
	// ErrDescriptorSet is a --proto-descriptors file that is not a
	// FileDescriptorSet or whose files do not link.
	ErrDescriptorSet = errors.New("protodec: bad descriptor set")
)

// Set is the message types of a set of proto files, by type URL.
type Set struct {
	marshal   protojson.MarshalOptions
	unmarshal proto.UnmarshalOptions
	files     *protoregistry.Files
	types     *dynamicpb.Types
	msgs      map[string]*msgType // by type URL, "/" + full name
	added     int                 // files given by the operator
	plans     wirePlans
}

type msgType struct {
	mt     protoreflect.MessageType
	signer protoreflect.FieldDescriptor // cosmos.msg.v1.signer's first field, or nil
	// noRequired: no message of the type can have a required field unset
	// (see requiredFree), decided on first use.
	noRequired     bool
	noRequiredOnce sync.Once
	plan           *wireMsg // how the direct writer writes it, built on first use
	planOnce       sync.Once
}

var builtin = sync.OnceValues(func() (*Set, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(64<<20))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	raw, err := dec.DecodeAll(builtinZst, nil)
	if err != nil {
		return nil, fmt.Errorf("protodec: built-in descriptor set: %w", err)
	}
	var fds descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &fds); err != nil {
		return nil, fmt.Errorf("protodec: built-in descriptor set: %w", err)
	}
	files, err := protodesc.NewFiles(&fds)
	if err != nil {
		return nil, fmt.Errorf("protodec: built-in descriptor set: %w", err)
	}
	return newSet(files, 0), nil
})

// Builtin returns the built-in set: the Cosmos SDK's and ibc-go's messages.
func Builtin() (*Set, error) { return builtin() }

// MustBuiltin is Builtin for callers that cannot fail: the built-in set is
// embedded and checked by the tests, so an error is a broken build.
func MustBuiltin() *Set {
	s, err := builtin()
	if err != nil {
		panic(err)
	}
	return s
}

// None returns a set that knows no type: every message is kept raw. It
// measures what decoding costs (BenchmarkDecodeMessages).
func None() *Set { return newSet(new(protoregistry.Files), 0) }

func newSet(files *protoregistry.Files, added int) *Set {
	s := &Set{files: files, types: dynamicpb.NewTypes(files), msgs: map[string]*msgType{}, added: added}
	s.marshal = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true, Resolver: s.types}
	// Merge: AppendJSON unmarshals into a new message, which the default
	// would reset first (allocating its fields' storage anew).
	s.unmarshal = proto.UnmarshalOptions{Resolver: s.types, Merge: true}
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		s.addMessages(fd.Messages())
		return true
	})
	return s
}

func (s *Set) addMessages(ms protoreflect.MessageDescriptors) {
	for i := 0; i < ms.Len(); i++ {
		md := ms.Get(i)
		if md.IsMapEntry() {
			continue
		}
		mt, err := s.types.FindMessageByName(md.FullName())
		if err != nil {
			continue
		}
		s.msgs["/"+string(md.FullName())] = &msgType{mt: mt, signer: signerField(md)}
		s.addMessages(md.Messages())
	}
}

// signerFieldNum is the cosmos.msg.v1.signer extension of MessageOptions:
// the names of the fields that hold the message's signers.
const signerFieldNum = 11110000

// signerField is the first field cosmos.msg.v1.signer names, or nil. The
// extension is not linked into this binary: it is read from the options'
// unknown fields.
func signerField(md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	opts, ok := md.Options().(*descriptorpb.MessageOptions)
	if !ok || opts == nil {
		return nil
	}
	b := opts.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == signerFieldNum && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil
			}
			return md.Fields().ByName(protoreflect.Name(v))
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil
		}
		b = b[m:]
	}
	return nil
}

// Known reports whether the set defines typeURL.
func (s *Set) Known(typeURL string) bool { return s.msgs[typeName(typeURL)] != nil }

// Types is the number of message types the set defines.
func (s *Set) Types() int { return len(s.msgs) }

// Added is the number of files the operator's protos and descriptor sets
// added to the built-in set.
func (s *Set) Added() int { return s.added }

// typeName is "/" + the full name of a type URL: "type.googleapis.com/x.Y"
// and "/x.Y" both give "/x.Y".
func typeName(typeURL string) string {
	if i := strings.LastIndexByte(typeURL, '/'); i > 0 {
		return typeURL[i:]
	}
	return typeURL
}

// AppendJSON appends the JSON of the message of type typeURL whose bytes
// are value to dst and returns it with the address the message names as
// its signer (cosmos.msg.v1.signer; for a repeated message field, that of
// its first element), "" when it names none. On an error dst is returned
// unchanged; the error wraps ErrUnknownType or ErrMalformed and names the
// type.
func (s *Set) AppendJSON(dst []byte, typeURL string, value []byte) ([]byte, string, error) {
	t := s.msgs[typeName(typeURL)]
	if t == nil {
		return dst, "", fmt.Errorf("%w %s", ErrUnknownType, typeURL)
	}
	if p := t.wirePlan(s); !p.any && !p.timestamp {
		w := wireWriter{s: s}
		if out, ok := w.message(dst, value, p, 0, 0); ok {
			return out, w.signer, nil
		}
	}
	return s.appendProtojson(dst, typeURL, t, value)
}

// appendProtojson is AppendJSON through a dynamic message and protojson:
// for what the direct writer does not answer.
func (s *Set) appendProtojson(dst []byte, typeURL string, t *msgType, value []byte) ([]byte, string, error) {
	t.noRequiredOnce.Do(func() { t.noRequired = requiredFree(t.mt.Descriptor(), map[protoreflect.FullName]bool{}) })
	unmarshal, marshal := s.unmarshal, s.marshal
	// Where no field can be required (every proto3 message), the checks
	// for unset required fields can find nothing: skipped, as they walk
	// every message again (a tenth of the decoding's time).
	unmarshal.AllowPartial, marshal.AllowPartial = t.noRequired, t.noRequired
	m := t.mt.New()
	if err := unmarshal.Unmarshal(value, m.Interface()); err != nil {
		return dst, "", fmt.Errorf("%w %s: %v", ErrMalformed, typeURL, err)
	}
	if f := misread(m, 0); f != "" {
		return dst, "", fmt.Errorf("%w %s: field %s has the wrong wire type", ErrMalformed, typeURL, f)
	}
	start := len(dst)
	out, err := marshal.MarshalAppend(dst, m.Interface())
	if err != nil {
		return dst[:start], "", fmt.Errorf("%w %s: %v", ErrMalformed, typeURL, err)
	}
	out = scrubNUL(out, start)
	return out, s.signer(m, t.signer, 0), nil
}

// requiredFree reports whether no message of type md can hold a required
// field, in itself or in a message within it, nor an extension (which
// may be a message with one); seen holds the types already on the way.
func requiredFree(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return true // its fields are being checked further up
	}
	seen[md.FullName()] = true
	if md.RequiredNumbers().Len() > 0 || md.ExtensionRanges().Len() > 0 {
		return false
	}
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		if f.IsMap() {
			f = f.MapValue()
		}
		if f.Message() != nil && !requiredFree(f.Message(), seen) {
			return false
		}
	}
	return true
}

// misread returns the name of a field of m or of a message within it that
// the wire holds with the wrong wire type (protobuf keeps such a field as
// unknown bytes rather than fail), or "". Unknown field numbers are fine: a
// newer version of the type.
func misread(m protoreflect.Message, depth int) string {
	if depth > 64 {
		return ""
	}
	fields := m.Descriptor().Fields()
	for b := m.GetUnknown(); len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "?"
		}
		if f := fields.ByNumber(num); f != nil {
			return string(f.FullName())
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return "?"
		}
		b = b[n+m:]
	}
	if m.Descriptor().ExtensionRanges().Len() > 0 {
		// Populated extensions are reached through Range alone.
		bad := ""
		m.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			bad = misreadField(f, v, depth)
			return bad == ""
		})
		return bad
	}
	// The populated fields, as Range visits them, without the closure it
	// needs (an allocation for every message decoded).
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		if (f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind) && m.Has(f) {
			if bad := misreadField(f, m.Get(f), depth); bad != "" {
				return bad
			}
		}
	}
	return ""
}

// misreadField is misread of the messages in field f of value v.
func misreadField(f protoreflect.FieldDescriptor, v protoreflect.Value, depth int) string {
	if f.Kind() != protoreflect.MessageKind && f.Kind() != protoreflect.GroupKind {
		return ""
	}
	bad := ""
	switch {
	case f.IsList():
		l := v.List()
		for i := 0; i < l.Len() && bad == ""; i++ {
			bad = misread(l.Get(i).Message(), depth+1)
		}
	case f.IsMap():
		if f.MapValue().Kind() == protoreflect.MessageKind {
			v.Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool {
				bad = misread(v.Message(), depth+1)
				return bad == ""
			})
		}
	default:
		bad = misread(v.Message(), depth+1)
	}
	return bad
}

// signer follows the signer field f of m to a string.
func (s *Set) signer(m protoreflect.Message, f protoreflect.FieldDescriptor, depth int) string {
	if f == nil || depth > 4 {
		return ""
	}
	switch {
	case f.Kind() == protoreflect.StringKind && !f.IsList():
		return m.Get(f).String()
	case f.Kind() == protoreflect.MessageKind && f.IsList():
		l := m.Get(f).List()
		if l.Len() == 0 {
			return ""
		}
		sub := l.Get(0).Message()
		return s.signer(sub, signerField(sub.Descriptor()), depth+1)
	case f.Kind() == protoreflect.MessageKind && !f.IsMap() && m.Has(f):
		sub := m.Get(f).Message()
		return s.signer(sub, signerField(sub.Descriptor()), depth+1)
	}
	return ""
}

// scrubNUL replaces the escape \u0000, which PostgreSQL's jsonb refuses,
// with \ufffd in js[start:], as blockhaul's own JSON writer cleans text.
func scrubNUL(js []byte, start int) []byte {
	const nul = `\u0000`
	if !bytes.Contains(js[start:], []byte(nul)) {
		return js
	}
	for i := start; i+len(nul) <= len(js); i++ {
		if js[i] != '\\' {
			continue
		}
		if bytes.HasPrefix(js[i:], []byte(nul)) {
			copy(js[i:], `\ufffd`)
		}
		i++ // skip the escaped character: \\u0000 is text
	}
	return js
}
