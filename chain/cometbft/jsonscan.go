package cometbft

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a small pull parser over one JSON document, made for the
// decoder: it walks the record once, hands out string values as spans of the
// input (unescaped only when asked), and skips everything it is not asked
// about without building it. encoding/json would allocate every string and
// slice of the record; the decoder needs a fraction of them, and decoding is
// the exporter's CPU cost.
//
// The first error sticks: every method becomes a no-op returning zero values
// once err is set, so callers check err once after a loop.
type scanner struct {
	b   []byte
	i   int
	err error
}

// maxDepth bounds nesting when skipping values, so that hostile input cannot
// exhaust the stack.
const maxDepth = 512

// strRef is a JSON string value as a span of the input: the bytes between
// the quotes, still escaped when esc is set. null marks a JSON null in place
// of a string (CometBFT prints absent byte slices that way).
type strRef struct {
	start, end int
	esc        bool
	null       bool
}

func (r strRef) len() int { return r.end - r.start }

// syntaxError is a malformed-JSON error with the offset it was found at.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return "invalid JSON at offset " + strconv.Itoa(e.off) + ": " + e.msg
}

func (s *scanner) fail(msg string) {
	if s.err == nil {
		s.err = &syntaxError{off: s.i, msg: msg}
	}
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\n', '\r', '\t':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end of input.
func (s *scanner) peek() byte {
	if s.i < len(s.b) && s.b[s.i] > ' ' { // compact JSON: no space to skip
		return s.b[s.i]
	}
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// literal consumes lit (null, true, false) if it is next.
func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// openObject consumes '{'. A null in its place is consumed and reported as
// false with no error (CometBFT prints empty structs and slices as null);
// anything else is an error.
func (s *scanner) openObject() bool {
	if s.err != nil {
		return false
	}
	switch s.peek() {
	case '{':
		s.i++
		return true
	case 'n':
		if s.literal("null") {
			return false
		}
	}
	s.fail("expected object")
	return false
}

// nextKey moves to the next member of the current object and returns its key
// (raw, as written) with the scanner placed at the member's value. It returns
// false at the closing brace, which it consumes, or on error. n counts the
// members seen so far and must start at 0.
func (s *scanner) nextKey(n *int) ([]byte, bool) {
	if s.err != nil {
		return nil, false
	}
	c := s.peek()
	if *n > 0 {
		switch c {
		case '}':
			s.i++
			return nil, false
		case ',':
			s.i++
			c = s.peek()
		default:
			s.fail("expected ',' or '}' in object")
			return nil, false
		}
	} else if c == '}' {
		s.i++
		return nil, false
	}
	if c != '"' {
		s.fail("expected object key")
		return nil, false
	}
	*n++
	k := s.stringSpan()
	if s.peek() != ':' {
		s.fail("expected ':' after object key")
		return nil, false
	}
	s.i++
	if s.err != nil {
		return nil, false
	}
	return s.b[k.start:k.end], true
}

// openArray consumes '['; null is consumed and reported as false, like
// openObject.
func (s *scanner) openArray() bool {
	if s.err != nil {
		return false
	}
	switch s.peek() {
	case '[':
		s.i++
		return true
	case 'n':
		if s.literal("null") {
			return false
		}
	}
	s.fail("expected array")
	return false
}

// nextElem moves to the next element of the current array; false at the
// closing bracket (consumed) or on error. n as for nextKey.
func (s *scanner) nextElem(n *int) bool {
	if s.err != nil {
		return false
	}
	c := s.peek()
	if *n > 0 {
		switch c {
		case ']':
			s.i++
			return false
		case ',':
			s.i++
			c = s.peek()
		default:
			s.fail("expected ',' or ']' in array")
			return false
		}
	} else if c == ']' {
		s.i++
		return false
	}
	if c == 0 {
		s.fail("unexpected end of input in array")
		return false
	}
	*n++
	return true
}

// stringSpan consumes a string literal, checking its escapes, and returns
// the span between its quotes. The caller has checked that it starts with '"'.
//
// Raw control characters inside strings, which strict JSON forbids, are
// let through: they are harmless here (text is cleaned, jsonb is
// re-escaped) and checking for them would cost a pass over every string.
func (s *scanner) stringSpan() strRef {
	s.i++ // opening quote
	r := strRef{start: s.i}
	b := s.b
	// Find the first '"' or '\\' eight bytes at a time.
	i := s.i
	for ; i+8 <= len(b); i += 8 {
		v := binary.LittleEndian.Uint64(b[i:])
		if m := swarZero(v^(swarOnes*'"')) | swarZero(v^(swarOnes*'\\')); m != 0 {
			i += bits.TrailingZeros64(m) / 8
			break
		}
	}
	for ; i < len(b) && b[i] != '"' && b[i] != '\\'; i++ {
	}
	if i >= len(b) {
		s.i = len(b)
		s.fail("unterminated string")
		return strRef{}
	}
	if b[i] == '"' { // no escapes: the common case
		r.end = i
		s.i = i + 1
		return r
	}
	first := i
	r.esc = true
	for i := first; i < len(b); i++ {
		switch b[i] {
		case '"':
			r.end = i
			s.i = i + 1
			return r
		case '\\':
			i++
			if i >= len(b) {
				s.i = i
				s.fail("unterminated string")
				return strRef{}
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex4(b[i+1:i+5]) {
					s.i = i
					s.fail("invalid \\u escape in string")
					return strRef{}
				}
				i += 4
			default:
				s.i = i
				s.fail("invalid escape in string")
				return strRef{}
			}
		}
	}
	s.i = len(b)
	s.fail("unterminated string")
	return strRef{}
}

// SWAR (SIMD within a register) helpers: swarZero(v) has the high bit set
// in the lowest byte of v that is zero (and possibly in higher bytes after
// it, which callers ignore by taking the lowest).
const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

func swarZero(v uint64) uint64 { return (v - swarOnes) & ^v & swarHighs }

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// str reads a string value, or null.
func (s *scanner) str() strRef {
	if s.err != nil {
		return strRef{}
	}
	switch s.peek() {
	case '"':
		return s.stringSpan()
	case 'n':
		if s.literal("null") {
			return strRef{null: true}
		}
	}
	s.fail("expected string")
	return strRef{}
}

// integer reads an integer written either as a JSON number (CometBFT's 32-bit
// fields) or as a decimal string (its 64-bit fields). null reads as 0.
func (s *scanner) integer() int64 {
	if s.err != nil {
		return 0
	}
	var digits []byte
	switch c := s.peek(); {
	case c == '"':
		r := s.stringSpan()
		if s.err != nil {
			return 0
		}
		digits = s.b[r.start:r.end]
	case c == '-' || c >= '0' && c <= '9':
		start := s.i
		for s.i < len(s.b) && (s.b[s.i] == '-' || s.b[s.i] >= '0' && s.b[s.i] <= '9') {
			s.i++
		}
		digits = s.b[start:s.i]
	case c == 'n' && s.literal("null"):
		return 0
	default:
		s.fail("expected integer")
		return 0
	}
	v, ok := parseInt(digits)
	if !ok {
		s.fail("invalid integer " + strconv.Quote(string(digits)))
		return 0
	}
	return v
}

// parseInt parses a decimal int64 without allocating.
func parseInt(b []byte) (int64, bool) {
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

// boolean reads true, false or null (as false).
func (s *scanner) boolean() bool {
	if s.err != nil {
		return false
	}
	switch s.peek() {
	case 't':
		if s.literal("true") {
			return true
		}
	case 'f':
		if s.literal("false") {
			return false
		}
	case 'n':
		if s.literal("null") {
			return false
		}
	}
	s.fail("expected boolean")
	return false
}

// skip consumes one value of any kind.
func (s *scanner) skip() { s.skipDepth(0) }

func (s *scanner) skipDepth(depth int) {
	if s.err != nil {
		return
	}
	if depth > maxDepth {
		s.fail("nesting too deep")
		return
	}
	switch c := s.peek(); {
	case c == '"':
		s.stringSpan()
	case c == '{':
		s.i++
		n := 0
		for _, ok := s.nextKey(&n); ok; _, ok = s.nextKey(&n) {
			s.skipDepth(depth + 1)
		}
	case c == '[':
		s.i++
		n := 0
		for s.nextElem(&n) {
			s.skipDepth(depth + 1)
		}
	case c == '-' || c >= '0' && c <= '9':
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '-', '+', '.', 'e', 'E':
				s.i++
				continue
			}
			break
		}
		if s.i == start {
			s.fail("invalid number")
		}
	case c == 't':
		if !s.literal("true") {
			s.fail("invalid literal")
		}
	case c == 'f':
		if !s.literal("false") {
			s.fail("invalid literal")
		}
	case c == 'n':
		if !s.literal("null") {
			s.fail("invalid literal")
		}
	case c == 0:
		s.fail("unexpected end of input")
	default:
		s.fail("unexpected character " + strconv.QuoteRune(rune(c)))
	}
}

// end checks that nothing but white space follows the document.
func (s *scanner) end() {
	if s.err == nil && s.peek() != 0 {
		s.fail("trailing data after JSON document")
	}
}

// raw returns the bytes of r as written, or appends its unescaped form to
// scratch and returns that when it has escapes. The result is only valid
// until scratch is next reused.
func (s *scanner) raw(r strRef, scratch *[]byte) []byte {
	if !r.esc {
		return s.b[r.start:r.end]
	}
	*scratch = appendUnescaped((*scratch)[:0], s.b[r.start:r.end])
	return *scratch
}

// appendUnescaped appends the unescaped form of a string body that
// stringSpan has already validated. Lone UTF-16 surrogates become U+FFFD, as
// encoding/json does.
func appendUnescaped(dst, b []byte) []byte {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		switch b[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := rune(hex4(b[i+1 : i+5]))
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					r2 = utf16.DecodeRune(r, rune(hex4(b[i+3:i+7])))
					if r2 != utf8.RuneError {
						i += 6
					}
				}
				r = r2
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, b[i])
		}
	}
	return dst
}

func hex4(b []byte) uint16 {
	var v uint16
	for _, c := range b[:4] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint16(c - 'a' + 10)
		default:
			v |= uint16(c - 'A' + 10)
		}
	}
	return v
}
