package protodec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// appendDirect is the direct writer alone, as AppendJSON tries it first.
func (s *Set) appendDirect(dst []byte, typeURL string, value []byte) ([]byte, string, bool) {
	t := s.msgs[typeName(typeURL)]
	if t == nil {
		return dst, "", false
	}
	p := t.wirePlan(s)
	if p.any || p.timestamp {
		return dst, "", false
	}
	w := wireWriter{s: s}
	out, ok := w.message(dst, value, p, 0, 0)
	return out, w.signer, ok
}

// sameValue reports whether two JSON texts hold the same value (what jsonb
// keeps: neither key order nor white space), with the first's parse error.
func sameValue(a, b []byte) (bool, error) {
	parse := func(js []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(js))
		d.UseNumber()
		var v any
		return v, d.Decode(&v)
	}
	va, err := parse(a)
	if err != nil {
		return false, err
	}
	vb, err := parse(b)
	return err == nil && reflect.DeepEqual(va, vb), nil
}

// checkAgainstProtojson decodes value both ways. Where the direct writer
// answers, protojson must decode it too, to the same JSON value and
// signer; it reports whether the direct writer answered.
func checkAgainstProtojson(t *testing.T, s *Set, typeURL string, value []byte) bool {
	t.Helper()
	// Something before the message, as in a block's arena.
	direct, dsigner, ok := s.appendDirect([]byte("x"), typeURL, value)
	slow, ssigner, err := s.appendProtojson([]byte("x"), typeURL, s.msgs[typeName(typeURL)], value)
	if !ok {
		return false
	}
	if err != nil {
		t.Errorf("%s %x: direct %s, protojson refuses: %v", typeURL, value, direct, err)
		return true
	}
	if same, perr := sameValue(direct[1:], slow[1:]); !same {
		t.Errorf("%s %x:\ndirect    %s (%v)\nprotojson %s", typeURL, value, direct[1:], perr, slow[1:])
	}
	if bytes.Contains(direct, []byte(`\u0000`)) {
		t.Errorf("%s %x: direct %s holds \\u0000", typeURL, value, direct)
	}
	if dsigner != ssigner {
		t.Errorf("%s %x: signer %q, protojson's %q", typeURL, value, dsigner, ssigner)
	}
	return true
}

// TestWireJSONRealMessages: every message of the real transactions in
// testdata, decoded directly, is what protojson gives.
func TestWireJSONRealMessages(t *testing.T) {
	s := MustBuiltin()
	files, _ := filepath.Glob("testdata/*/txs.json")
	if len(files) == 0 {
		t.Fatal("no testdata/*/txs.json")
	}
	direct, all := 0, 0
	for _, file := range files {
		for _, tx := range readRealTxs(t, file) {
			b, err := base64.StdEncoding.DecodeString(tx.TxBytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range bodyMessages(t, b) {
				if !s.Known(m.typeURL) {
					continue
				}
				all++
				if checkAgainstProtojson(t, s, m.typeURL, m.value) {
					direct++
				}
			}
		}
	}
	t.Logf("%d of %d known messages written directly", direct, all)
	if direct < all*3/4 {
		t.Errorf("%d of %d known messages written directly, want most", direct, all)
	}
}

// TestWireJSONMatchesProtojson generates messages of every built-in type
// (fields present or not, twice, packed or not, of wrong wire types,
// unknown; strings with every character JSON escapes and invalid UTF-8;
// nested Any of other types; timestamps in and out of range; truncated)
// and checks the direct writer against protojson wherever it answers.
func TestWireJSONMatchesProtojson(t *testing.T) {
	s := MustBuiltin()
	urls := make([]string, 0, len(s.msgs))
	for u := range s.msgs {
		urls = append(urls, u)
	}
	slices.Sort(urls)
	g := &wireGen{rnd: rand.New(rand.NewPCG(1, 2)), urls: urls, s: s}
	perType := 12
	if testing.Short() {
		perType = 3
	}
	answered, escaped, anys, stamps := 0, 0, 0, 0
	for _, u := range urls {
		md := s.msgs[u].mt.Descriptor()
		for range perType {
			g.odd = g.rnd.IntN(4) == 0 // one in four with something unusual on the wire
			v := g.message(nil, md, 0)
			if g.rnd.IntN(16) == 0 && len(v) > 0 {
				v = v[:g.rnd.IntN(len(v))]
			}
			if checkAgainstProtojson(t, s, u, v) {
				answered++
				js, _, _ := s.appendDirect(nil, u, v)
				if bytes.Contains(js, []byte(`\u00`)) || bytes.Contains(js, []byte(`\ufffd`)) {
					escaped++
				}
				if bytes.Contains(js, []byte(`"@type"`)) {
					anys++
				}
				if bytes.Contains(js, []byte(`Z"`)) {
					stamps++
				}
			}
		}
	}
	t.Logf("%d types, %d messages answered directly (%d with escapes, %d with an Any, %d with a timestamp)",
		len(urls), answered, escaped, anys, stamps)
	// The test is only as good as what the direct writer answered.
	if total := len(urls) * perType; answered < total/3 || escaped == 0 || anys == 0 || stamps == 0 {
		t.Errorf("answered %d of %d, %d with escapes, %d with an Any, %d with a timestamp: too few to say", answered, total, escaped, anys, stamps)
	}
}

// TestWireJSONListSigner: a signer field that is a list of messages names
// the signer of its first element, as protojson's path reads it.
func TestWireJSONListSigner(t *testing.T) {
	s := MustBuiltin()
	input := func(addr string) []byte { return str(nil, 1, addr) } // bank Input.address
	v := msg(msg(msg(nil, 1, input("cosmos1first")), 1, input("cosmos1second")), 2, str(nil, 1, "cosmos1out"))
	js, signer, ok := s.appendDirect(nil, "/cosmos.bank.v1beta1.MsgMultiSend", v)
	if !ok || signer != "cosmos1first" {
		t.Errorf("MsgMultiSend: %s, signer %q, answered %v; want cosmos1first", js, signer, ok)
	}
	checkAgainstProtojson(t, s, "/cosmos.bank.v1beta1.MsgMultiSend", v)
}

// TestWireJSONWellKnownWrongWireType: a field of a Timestamp or an Any of
// the wrong wire type, which protobuf keeps unknown and protojson's path
// refuses, is not written directly, even where its bytes would read as the
// right type.
func TestWireJSONWellKnownWrongWireType(t *testing.T) {
	s := MustBuiltin()
	// Timestamp.seconds as fixed32 05 18 80 01: read as a varint, 5 and
	// then an unknown field 3.
	stamp := protowire.AppendFixed32(protowire.AppendTag(nil, 1, protowire.Fixed32Type), 0x01801805)
	// Any.value as the varint 0: read as bytes, an empty message.
	anyv := protowire.AppendVarint(protowire.AppendTag(str(nil, 1, "/cosmos.bank.v1beta1.MsgSend"), 2, protowire.VarintType), 0)
	for _, c := range []struct {
		wkt string
		v   []byte
	}{
		{"google.protobuf.Timestamp", stamp},
		{"google.protobuf.Any", anyv},
	} {
		// The first type with a field of the well-known type.
		var u string
		var num protowire.Number
		for _, url := range slices.Sorted(maps.Keys(s.msgs)) {
			fields := s.msgs[url].mt.Descriptor().Fields()
			for i := 0; i < fields.Len() && u == ""; i++ {
				if f := fields.Get(i); f.Message() != nil && string(f.Message().FullName()) == c.wkt && !f.IsList() {
					u, num = url, f.Number()
				}
			}
			if u != "" {
				break
			}
		}
		v := msg(nil, num, c.v)
		if js, _, ok := s.appendDirect(nil, u, v); ok {
			t.Errorf("%s with a %s of a wrong wire type: written directly as %s", u, c.wkt, js)
		}
		if _, _, err := s.AppendJSON(nil, u, v); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s with a %s of a wrong wire type: %v, want ErrMalformed", u, c.wkt, err)
		}
	}
}

// wireGen writes random wire bytes of a message type.
type wireGen struct {
	rnd  *rand.Rand
	urls []string
	s    *Set
	odd  bool // write what protobuf merges or keeps unknown
}

// texts holds every character JSON escapes, NUL, DEL, U+2028, multibyte
// text and invalid UTF-8.
var texts = func() []string {
	out := []string{"", "cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu", "uatom", "ünïcødé ✓ 日本", "a\u2028b\u2029", "\x7f", "<&>'"}
	var all strings.Builder
	for c := 0; c < 0x20; c++ {
		out = append(out, "x"+string(rune(c))+"y")
		all.WriteByte(byte(c))
	}
	all.WriteString(`"\/`)
	out = append(out, all.String(), `"`, `\`, `\"\\`, "\xff", "a\xc3", "\xed\xa0\x80")
	return out
}()

func (g *wireGen) text() []byte {
	if g.rnd.IntN(8) == 0 {
		b := make([]byte, g.rnd.IntN(12))
		for i := range b {
			b[i] = byte(g.rnd.IntN(256))
		}
		return b
	}
	return []byte(texts[g.rnd.IntN(len(texts))])
}

func (g *wireGen) varint() uint64 {
	switch g.rnd.IntN(6) {
	case 0:
		return 0
	case 1:
		return uint64(g.rnd.IntN(10))
	case 2:
		return uint64(-int64(g.rnd.IntN(1000) + 1)) // negative int32/int64
	case 3:
		return math.MaxUint64 - uint64(g.rnd.IntN(3))
	case 4:
		return uint64(g.rnd.Uint32())
	}
	return g.rnd.Uint64()
}

// message appends a message of type md.
func (g *wireGen) message(b []byte, md protoreflect.MessageDescriptor, depth int) []byte {
	switch md.FullName() {
	case "google.protobuf.Any":
		return g.anyValue(b, depth)
	case "google.protobuf.Timestamp":
		secs := []int64{0, 1_700_000_000, -62135596800, 253402300799, 253402300800, -62135596801, -5}[g.rnd.IntN(7)]
		nanos := []int64{0, 1_000_000, 123_000, 5, 999_999_999, 1_000_000_000, -1}[g.rnd.IntN(7)]
		if secs != 0 || g.rnd.IntN(2) == 0 {
			b = protowire.AppendTag(b, 1, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(secs))
		}
		if nanos != 0 || g.rnd.IntN(2) == 0 {
			b = protowire.AppendTag(b, 2, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(nanos))
		}
		return g.oddKnownField(b)
	}
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		n := 0
		switch r := g.rnd.IntN(8); {
		case r < 3:
		case fd.IsList() || fd.IsMap():
			n = 1 + g.rnd.IntN(3)
		default:
			n = 1
		}
		if fd.Kind() == protoreflect.MessageKind && depth > 5 {
			n = 0
		}
		if g.odd && g.rnd.IntN(12) == 0 {
			n++ // a singular field twice
		}
		if fd.IsList() && n > 0 && packable(fd.Kind()) && g.rnd.IntN(2) == 0 {
			var packed []byte
			for range n {
				packed = g.scalar(packed, fd, wireType(fd.Kind()))
			}
			b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
			b = protowire.AppendBytes(b, packed)
			continue
		}
		for range n {
			typ := wireType(fd.Kind())
			if g.odd && g.rnd.IntN(20) == 0 {
				typ = []protowire.Type{protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type, protowire.BytesType}[g.rnd.IntN(4)]
			}
			b = protowire.AppendTag(b, fd.Number(), typ)
			if typ != wireType(fd.Kind()) || fd.IsMap() {
				b = g.raw(b, typ)
				continue
			}
			if fd.Kind() == protoreflect.MessageKind {
				b = protowire.AppendBytes(b, g.message(nil, fd.Message(), depth+1))
				continue
			}
			b = g.scalar(b, fd, typ)
		}
	}
	if g.odd && g.rnd.IntN(4) == 0 {
		b = protowire.AppendTag(b, protowire.Number(1000+g.rnd.IntN(100)), protowire.VarintType)
		b = protowire.AppendVarint(b, g.varint())
	}
	return b
}

// scalar appends a value of a scalar field of wire type typ.
func (g *wireGen) scalar(b []byte, fd protoreflect.FieldDescriptor, typ protowire.Type) []byte {
	switch typ {
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(b, uint32(g.varint()))
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(b, g.varint())
	case protowire.BytesType:
		return protowire.AppendBytes(b, g.text())
	}
	if fd.Kind() == protoreflect.EnumKind && g.rnd.IntN(3) > 0 {
		vals := fd.Enum().Values()
		return protowire.AppendVarint(b, uint64(int64(vals.Get(g.rnd.IntN(vals.Len())).Number())))
	}
	return protowire.AppendVarint(b, g.varint())
}

// raw appends a value of wire type typ with no regard to the field.
func (g *wireGen) raw(b []byte, typ protowire.Type) []byte {
	switch typ {
	case protowire.VarintType:
		return protowire.AppendVarint(b, g.varint())
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(b, g.rnd.Uint32())
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(b, g.rnd.Uint64())
	}
	return protowire.AppendBytes(b, g.text())
}

// anyValue appends an Any: a known type's message, or an unknown or empty
// type URL.
func (g *wireGen) anyValue(b []byte, depth int) []byte {
	url := g.urls[g.rnd.IntN(len(g.urls))]
	switch g.rnd.IntN(10) {
	case 0:
		url = "/no.such.Type"
	case 1:
		url = ""
	case 2:
		url = "type.googleapis.com" + url
	case 3:
		url = []string{"/cosmos.bank.v1beta1.MsgSend", "/google.protobuf.Timestamp", "/google.protobuf.Any", "/google.protobuf.Duration"}[g.rnd.IntN(4)]
	}
	var value []byte
	if t := g.s.msgs[typeName(url)]; t != nil && depth < 4 {
		value = g.message(nil, t.mt.Descriptor(), depth+1)
	}
	if url != "" || g.rnd.IntN(2) == 0 {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, url)
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return g.oddKnownField(protowire.AppendBytes(b, value))
}

// oddKnownField appends, when the message is to be odd, field 1 or 2 once
// more, of any wire type: a well-known type's field twice or of a wrong type.
func (g *wireGen) oddKnownField(b []byte) []byte {
	if !g.odd || g.rnd.IntN(3) > 0 {
		return b
	}
	typ := []protowire.Type{protowire.VarintType, protowire.Fixed64Type, protowire.BytesType}[g.rnd.IntN(3)]
	b = protowire.AppendTag(b, protowire.Number(1+g.rnd.IntN(2)), typ)
	return g.raw(b, typ)
}
