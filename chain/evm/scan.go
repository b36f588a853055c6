package evm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
)

// scanner is a minimal pull tokenizer over one JSON document. The decoder
// walks the few fields that become columns and skips the rest without
// building any value, which is several times faster than encoding/json
// into structs and allocates nothing for skipped fields.
//
// Strings are returned as sub-slices of the input (no copy) unless they
// contain escapes, which no hex field legitimately does.
type scanner struct {
	b []byte
	i int
}

// maxDepth bounds nesting of skipped values so a hostile record cannot
// recurse without end.
const maxDepth = 256

var (
	errEOF       = errors.New("unexpected end of input")
	errDepth     = errors.New("nesting too deep")
	errNotString = errors.New("want a string")
)

type syntaxError struct {
	off  int
	want string
	got  byte
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: want %s, got %q", e.off, e.want, e.got)
}

func (s *scanner) ws() {
	// Records are mostly written without white space: one comparison
	// settles the common case (every JSON white space byte is <= ' ').
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return
	}
	s.wsSlow()
}

func (s *scanner) wsSlow() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\n', '\r', '\t':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it (0 at end).
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) expect(c byte, want string) error {
	s.ws()
	if s.i >= len(s.b) {
		return errEOF
	}
	if s.b[s.i] != c {
		return &syntaxError{off: s.i, want: want, got: s.b[s.i]}
	}
	s.i++
	return nil
}

// null consumes a JSON null if one is next and reports whether it did.
func (s *scanner) null() bool {
	s.ws()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// beginObject consumes '{'.
func (s *scanner) beginObject() error { return s.expect('{', "'{'") }

// beginArray consumes '['.
func (s *scanner) beginArray() error { return s.expect('[', "'['") }

// nextKey advances to the next member of the current object and returns
// its key; done is true once the closing '}' has been consumed. n counts
// the members seen so far (the caller increments nothing: pass a pointer
// to a zeroed int per object).
func (s *scanner) nextKey(n *int) (key []byte, done bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return nil, false, errEOF
	}
	c := s.b[s.i]
	if c == '}' {
		s.i++
		return nil, true, nil
	}
	if *n > 0 {
		if c != ',' {
			return nil, false, &syntaxError{off: s.i, want: "',' or '}'", got: c}
		}
		s.i++
	}
	*n++
	key, err = s.key()
	if err != nil {
		return nil, false, err
	}
	if err := s.expect(':', "':'"); err != nil {
		return nil, false, err
	}
	return key, false, nil
}

// nextElem advances to the next element of the current array; done is
// true once the closing ']' has been consumed.
func (s *scanner) nextElem(n *int) (done bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return false, errEOF
	}
	c := s.b[s.i]
	if c == ']' {
		s.i++
		return true, nil
	}
	if *n > 0 {
		if c != ',' {
			return false, &syntaxError{off: s.i, want: "',' or ']'", got: c}
		}
		s.i++
	}
	*n++
	return false, nil
}

// eachElem reads the array at the cursor, calling fn with the index of each
// element (fn reads the element), and returns the element count. fn's
// error is returned as it is.
func (s *scanner) eachElem(fn func(i int) error) (int, error) {
	if err := s.beginArray(); err != nil {
		return 0, err
	}
	n := 0
	for {
		done, err := s.nextElem(&n)
		if err != nil {
			return n, err
		}
		if done {
			return n, nil
		}
		if err := fn(n - 1); err != nil {
			return n, err
		}
	}
}

// str reads a string value and returns its contents as they stand in the
// input: escapes other than a quote's are left uninterpreted. Every
// string the decoder reads is hex, whose parsers reject a backslash, so
// an escaped hex field is an error rather than a misread (no node escapes
// them); other strings are skipped, which handles escapes fully.
func (s *scanner) str() ([]byte, error) {
	s.ws()
	if s.i >= len(s.b) {
		return nil, errEOF
	}
	if s.b[s.i] != '"' {
		return nil, errNotString
	}
	start := s.i + 1
	end := quoteIndex(s.b, start)
	if end < 0 {
		return nil, errEOF
	}
	if end > start && s.b[end-1] == '\\' {
		// The quote found may be escaped: find the real end.
		e, err := s.stringEnd(start)
		if err != nil {
			return nil, err
		}
		end = e
	}
	s.i = end + 1
	return s.b[start:end], nil
}

// quoteIndex returns the index of the first '"' in b at or after i, or -1.
// Most strings the decoder reads are short (quantities, addresses,
// hashes), and for a quantity a call of bytes.IndexByte costs more than the
// search: the first 16 bytes are looked at 8 at a time (SWAR), the rest left
// to it.
func quoteIndex(b []byte, i int) int {
	const (
		ones   = 0x0101010101010101
		high   = 0x8080808080808080
		quotes = ones * '"'
	)
	for n := 0; n < 2 && i+8 <= len(b); n++ {
		x := binary.LittleEndian.Uint64(b[i:]) ^ quotes // a quote is now a zero byte
		// The lowest zero byte's high bit, exactly: a borrow only runs
		// upwards from it.
		if m := (x - ones) &^ x & high; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	j := bytes.IndexByte(b[i:], '"')
	if j < 0 {
		return -1
	}
	return i + j
}

// key reads an object key, unescaping it if need be so that a key written
// with escapes still matches.
func (s *scanner) key() ([]byte, error) {
	s.ws()
	if s.i >= len(s.b) {
		return nil, errEOF
	}
	if s.b[s.i] != '"' {
		return nil, &syntaxError{off: s.i, want: "a key", got: s.b[s.i]}
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch s.b[j] {
		case '"':
			s.i = j + 1
			return s.b[start:j], nil
		case '\\':
			return s.escapedStr(start)
		}
	}
	return nil, errEOF
}

// escapedStr is the slow path of str for strings holding escapes: it finds
// the real closing quote and lets encoding/json unescape.
func (s *scanner) escapedStr(start int) ([]byte, error) {
	end, err := s.stringEnd(start)
	if err != nil {
		return nil, err
	}
	var out string
	if err := json.Unmarshal(s.b[start-1:end+1], &out); err != nil {
		return nil, err
	}
	s.i = end + 1
	return []byte(out), nil
}

// stringEnd returns the index of the quote closing the string whose
// contents start at start.
func (s *scanner) stringEnd(start int) (int, error) {
	i := start
	for {
		j := bytes.IndexByte(s.b[i:], '"')
		if j < 0 {
			return 0, errEOF
		}
		j += i
		// The quote is escaped when an odd number of backslashes precede it.
		k := j - 1
		for k >= start && s.b[k] == '\\' {
			k--
		}
		if (j-1-k)%2 == 0 {
			return j, nil
		}
		i = j + 1
	}
}

// skip consumes one value of any kind.
func (s *scanner) skip() error { return s.skipDepth(0) }

func (s *scanner) skipDepth(depth int) error {
	if depth > maxDepth {
		return errDepth
	}
	s.ws()
	if s.i >= len(s.b) {
		return errEOF
	}
	switch c := s.b[s.i]; c {
	case '"':
		end, err := s.stringEnd(s.i + 1)
		if err != nil {
			return err
		}
		s.i = end + 1
		return nil
	case '{':
		s.i++
		n := 0
		for {
			_, done, err := s.nextKey(&n)
			if err != nil {
				return err
			}
			if done {
				return nil
			}
			if err := s.skipDepth(depth + 1); err != nil {
				return err
			}
		}
	case '[':
		s.i++
		n := 0
		for {
			done, err := s.nextElem(&n)
			if err != nil {
				return err
			}
			if done {
				return nil
			}
			if err := s.skipDepth(depth + 1); err != nil {
				return err
			}
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			start := s.i
			for s.i < len(s.b) && isNumberByte(s.b[s.i]) {
				s.i++
			}
			if s.i == start {
				return &syntaxError{off: s.i, want: "a value", got: c}
			}
			return nil
		}
		return &syntaxError{off: s.i, want: "a value", got: c}
	}
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func (s *scanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return &syntaxError{off: s.i, want: lit, got: s.b[s.i]}
	}
	s.i += len(lit)
	return nil
}

// end checks that nothing but whitespace follows the document.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return &syntaxError{off: s.i, want: "end of input", got: s.b[s.i]}
	}
	return nil
}
