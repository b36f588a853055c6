// Package jsonscan is the one JSON scanner of the chain families and their
// JSON-RPC client: a pull cursor (Scanner) that the decoders walk records
// with, and SkipValue, which checks a value against encoding/json's
// grammar without building it (the client splits response bodies with it).
//
// Both exist because encoding/json is too slow on this path: it would
// build every string and slice of a record, and the decoders need a
// fraction of them (EVM's decoder measured 5.2x faster this way); and it
// would check a response body byte by byte through its state machine, then
// walk each result a second time to find its end. Strings are handed out
// as spans of the input, unescaped only when asked; their contents are
// skimmed eight bytes at a time, or with bytes.IndexByte when long.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"iter"
	"math/bits"
	"strconv"
)

// Scanner is a pull cursor over one JSON document: it walks the document
// once, hands out string values as spans of the input, and skips whatever
// it is not asked about without building it.
//
// The first error sticks: every method becomes a no-op returning zero
// values once Err is set, so callers may check Err once after a loop.
//
// The values it skips are checked as SkipValue checks them, nested at most
// CursorDepth deep. The keys it reads are checked as strictly; the string
// values it reads have their escapes checked, but raw control characters in
// them are let through (strict JSON forbids
// them): they are harmless to the decoders (text is cleaned, jsonb
// re-escaped), records come from bodies SkipValue has already checked, and
// looking for them would cost a pass over every byte of a long string that
// bytes.IndexByte now skims.
//
// A Scanner is not safe for concurrent use; its zero value is a scanner
// over an empty document.
type Scanner struct {
	b   []byte
	i   int
	err error
	key []byte // an escaped key, unescaped: valid until the next key
}

// CursorDepth bounds the nesting of the values a Scanner skips, so that
// hostile input cannot make it walk without end.
const CursorDepth = 512

// Span is a string value as a span of the input: the bytes between the
// quotes, still escaped when Esc is set. Null marks a JSON null in place
// of a string.
type Span struct {
	Start, End int
	Esc        bool
	Null       bool
}

// Len is the length of the span as written.
func (r Span) Len() int { return r.End - r.Start }

// Reset places the scanner at the start of b, with no error.
func (s *Scanner) Reset(b []byte) {
	s.b, s.i, s.err = b, 0, nil
}

// Bytes is the document.
func (s *Scanner) Bytes() []byte { return s.b }

// Pos is the offset of the next byte to read.
func (s *Scanner) Pos() int { return s.i }

// Seek moves the cursor to offset i (one Pos returned).
func (s *Scanner) Seek(i int) { s.i = i }

// Err is the first error met, or nil.
func (s *Scanner) Err() error { return s.err }

// ClearErr forgets the error, for a caller that tried a fast path and goes
// back (with Seek) to read the same bytes another way.
func (s *Scanner) ClearErr() { s.err = nil }

// Fail sets the error, unless one is set, to a syntax error at the cursor.
func (s *Scanner) Fail(msg string) {
	if s.err == nil {
		s.err = &SyntaxError{Off: s.i, Msg: msg}
	}
}

func (s *Scanner) failErr(err error) {
	if s.err == nil {
		s.err = err
	}
}

// failEnd sets the error to the end of input, met where what was
// expected ("" for any value).
func (s *Scanner) failEnd(what string) {
	if s.err == nil {
		e := &SyntaxError{Off: s.i, Msg: ErrEnd.Error(), end: true}
		if what != "" {
			e.Msg = what + ": " + e.Msg
		}
		s.err = e
	}
}

// Peek returns the next byte that is not white space, without consuming
// it; 0 at the end of input.
func (s *Scanner) Peek() byte {
	if s.i < len(s.b) && s.b[s.i] > ' ' { // compact JSON: no space to skip
		return s.b[s.i]
	}
	s.i = SkipSpace(s.b, s.i)
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// Literal consumes lit if the input continues with it, byte for byte, and
// reports whether it did. It skips no white space.
func (s *Scanner) Literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// Null consumes a null if one is next and reports whether it did.
func (s *Scanner) Null() bool {
	return s.err == nil && s.Peek() == 'n' && s.Literal("null")
}

// OpenObject consumes '{'. A null in its place is consumed and reported as
// false with no error (nodes print empty structs and slices as null);
// anything else is an error.
func (s *Scanner) OpenObject() bool { return s.open('{', "expected object") }

// OpenArray consumes '['; null is consumed and reported as false, as by
// OpenObject.
func (s *Scanner) OpenArray() bool { return s.open('[', "expected array") }

func (s *Scanner) open(c byte, msg string) bool {
	if s.err != nil {
		return false
	}
	switch s.Peek() {
	case c:
		s.i++
		return true
	case 'n':
		if s.Literal("null") {
			return false
		}
	case 0:
		s.failEnd(msg)
		return false
	}
	s.Fail(msg)
	return false
}

// NextKey moves to the next member of the current object and returns its
// key (unescaped; valid until the next call) with the cursor placed at the
// member's value. It returns false at the closing brace, which it
// consumes, or on error. n counts the members seen so far and must start
// at 0.
func (s *Scanner) NextKey(n *int) ([]byte, bool) {
	if s.err != nil {
		return nil, false
	}
	c := s.Peek()
	if *n > 0 {
		switch c {
		case '}':
			s.i++
			return nil, false
		case ',':
			s.i++
			c = s.Peek()
		case 0:
			s.failEnd("in object")
			return nil, false
		default:
			s.Fail("expected ',' or '}' in object")
			return nil, false
		}
	} else if c == '}' {
		s.i++
		return nil, false
	}
	if c != '"' {
		if c == 0 {
			s.failEnd("expected object key")
		} else {
			s.Fail("expected object key")
		}
		return nil, false
	}
	*n++
	k := s.String()
	// A key is checked for raw control characters as SkipValue checks
	// every string: keys are short, and a document read key by key must
	// be refused where one skipped whole is (records are verified by
	// reading them and identified by skipping most of them).
	for i := k.Start; i < k.End; i++ {
		if s.b[i] < 0x20 {
			s.failErr(ErrorAt(s.b, i, "in string literal"))
			return nil, false
		}
	}
	if s.Peek() != ':' {
		s.Fail("expected ':' after object key")
		return nil, false
	}
	s.i++
	if s.err != nil {
		return nil, false
	}
	if k.Esc {
		s.key = AppendUnescaped(s.key[:0], s.b[k.Start:k.End])
		return s.key, true
	}
	return s.b[k.Start:k.End], true
}

// NextElem moves to the next element of the current array; false at the
// closing bracket (consumed) or on error. n as for NextKey.
func (s *Scanner) NextElem(n *int) bool {
	if s.err != nil {
		return false
	}
	c := s.Peek()
	if *n > 0 {
		switch c {
		case ']':
			s.i++
			return false
		case ',':
			s.i++
			c = s.Peek()
		case 0:
			s.failEnd("in array")
			return false
		default:
			s.Fail("expected ',' or ']' in array")
			return false
		}
	} else if c == ']' {
		s.i++
		return false
	}
	if c == 0 {
		s.failEnd("in array")
		return false
	}
	*n++
	return true
}

// String consumes the string literal at the cursor, checking its escapes,
// and returns its span. The caller has checked that the cursor is at '"'.
func (s *Scanner) String() Span {
	if s.err != nil {
		return Span{}
	}
	start := s.i + 1
	end, esc, err := stringEnd(s.b, start)
	if err != nil {
		s.i = end
		s.failErr(err)
		return Span{}
	}
	s.i = end + 1
	return Span{Start: start, End: end, Esc: esc}
}

// stringEnd returns the offset of the quote that closes the string whose
// contents start at b[i], and whether the string holds escapes, which it
// checks. Raw control characters are let through (see Scanner). On error
// the offset is of the byte that shows it.
func stringEnd(b []byte, i int) (int, bool, error) {
	// Most strings are short (keys, quantities, hashes): the first 16
	// bytes are looked at eight at a time, the rest left to
	// bytes.IndexByte, which is faster on a long string than any loop here.
	j := -1
	for n := 0; n < 2 && i+8 <= len(b); n++ {
		if m := quoteOrBackslash(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			j = i + bits.TrailingZeros64(m)>>3
			break
		}
		i += 8
	}
	if j < 0 {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b), false, errEnd(len(b))
		}
		if e := bytes.IndexByte(b[i:i+q], '\\'); e >= 0 {
			j = i + e
		} else {
			j = i + q
		}
	}
	if b[j] == '"' { // no escapes: the common case
		return j, false, nil
	}
	for i := j; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i, true, nil
		case '\\':
			n, err := escapeLen(b, i)
			if err != nil {
				return i + n, true, err
			}
			i += n - 1
		}
	}
	return len(b), true, errEnd(len(b))
}

// Raw reads a string value and returns its contents as written, escapes
// neither checked nor interpreted: for values whose parsers refuse a
// backslash anyway (hex), it spares String's look for escapes. The string
// ends at the first quote that an even number of backslashes precede.
func (s *Scanner) Raw() []byte {
	if s.err != nil {
		return nil
	}
	if s.Peek() != '"' {
		if s.i >= len(s.b) {
			s.failEnd("expected string")
		} else {
			s.Fail("expected string")
		}
		return nil
	}
	start := s.i + 1
	i := start
	for {
		j := quoteIndex(s.b, i)
		if j < 0 {
			s.i = len(s.b)
			s.failEnd("in string")
			return nil
		}
		k := j - 1
		for k >= start && s.b[k] == '\\' {
			k--
		}
		if (j-1-k)%2 == 0 {
			s.i = j + 1
			return s.b[start:j]
		}
		i = j + 1
	}
}

// quoteIndex returns the offset of the first '"' in b at or after i, or
// -1. For the many short strings a call of bytes.IndexByte costs more than
// the search: the first 16 bytes are looked at eight at a time.
func quoteIndex(b []byte, i int) int {
	for n := 0; n < 2 && i+8 <= len(b); n++ {
		x := binary.LittleEndian.Uint64(b[i:]) ^ (swarOnes * '"') // a quote is now a zero byte
		if m := (x - swarOnes) &^ x & swarHighs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	j := bytes.IndexByte(b[i:], '"')
	if j < 0 {
		return -1
	}
	return i + j
}

// Str reads a string value, or null (a Span with Null set).
func (s *Scanner) Str() Span {
	if s.err != nil {
		return Span{}
	}
	switch s.Peek() {
	case '"':
		return s.String()
	case 'n':
		if s.Literal("null") {
			return Span{Null: true}
		}
	case 0:
		s.failEnd("expected string")
		return Span{}
	}
	s.Fail("expected string")
	return Span{}
}

// Integer reads an integer written either as a JSON number or as a decimal
// string (CometBFT writes its 64-bit fields so). null reads as 0.
func (s *Scanner) Integer() int64 {
	if s.err != nil {
		return 0
	}
	var digits []byte
	switch c := s.Peek(); {
	case c == '"':
		r := s.String()
		if s.err != nil {
			return 0
		}
		digits = s.b[r.Start:r.End]
	case c == '-' || c >= '0' && c <= '9':
		start := s.i
		for s.i < len(s.b) && (s.b[s.i] == '-' || s.b[s.i] >= '0' && s.b[s.i] <= '9') {
			s.i++
		}
		digits = s.b[start:s.i]
	case c == 'n' && s.Literal("null"):
		return 0
	case c == 0:
		s.failEnd("expected integer")
		return 0
	default:
		s.Fail("expected integer")
		return 0
	}
	v, ok := ParseInt(digits)
	if !ok {
		s.Fail("invalid integer " + strconv.Quote(string(digits)))
		return 0
	}
	return v
}

// ParseInt parses a decimal int64 without allocating.
func ParseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// Boolean reads true, false or null (as false).
func (s *Scanner) Boolean() bool {
	if s.err != nil {
		return false
	}
	switch s.Peek() {
	case 't':
		if s.Literal("true") {
			return true
		}
	case 'f':
		if s.Literal("false") {
			return false
		}
	case 'n':
		if s.Literal("null") {
			return false
		}
	case 0:
		s.failEnd("expected boolean")
		return false
	}
	s.Fail("expected boolean")
	return false
}

// Skip consumes one value of any kind.
func (s *Scanner) Skip() {
	if s.err != nil {
		return
	}
	i, err := skipValue(s.b, s.i, MaxDepth-CursorDepth)
	s.i = i
	if err != nil {
		s.failErr(err)
	}
}

// End checks that nothing but white space follows the document.
func (s *Scanner) End() {
	if s.err == nil && s.Peek() != 0 {
		s.Fail("trailing data before end of input")
	}
}

// Text returns the bytes of r as written, or appends its unescaped form to
// scratch and returns that when it has escapes. The result is valid until
// scratch is next reused.
func (s *Scanner) Text(r Span, scratch *[]byte) []byte {
	if !r.Esc {
		return s.b[r.Start:r.End]
	}
	*scratch = AppendUnescaped((*scratch)[:0], s.b[r.Start:r.End])
	return *scratch
}

// Members ranges over the members of the object at the cursor, yielding
// each key (as NextKey returns it) with the cursor at the member's value,
// which the loop body must consume. A null in place of the object yields
// nothing; anything else sets Err, as OpenObject does. A loop that breaks
// leaves the cursor inside the object.
func (s *Scanner) Members() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		if !s.OpenObject() {
			return
		}
		n := 0
		for k, ok := s.NextKey(&n); ok; k, ok = s.NextKey(&n) {
			if !yield(k) {
				return
			}
		}
	}
}

// Elems ranges over the elements of the array at the cursor, yielding each
// one's index with the cursor at it; the loop body must consume it. null
// yields nothing, as for Members.
func (s *Scanner) Elems() iter.Seq[int] {
	return func(yield func(int) bool) {
		if !s.OpenArray() {
			return
		}
		n := 0
		for s.NextElem(&n) {
			if !yield(n - 1) {
				return
			}
		}
	}
}
