package evm

import "github.com/blockhaul/blockhaul/chain/jsonscan"

// scanner is the shared JSON cursor (chain/jsonscan) as this package's
// code reads it: each step returns its error. The decoder walks the few
// fields that become columns and skips the rest without building any
// value, which is several times faster than encoding/json into structs
// and allocates nothing for skipped fields.
type scanner struct{ jsonscan.Scanner }

func newScanner(b []byte) *scanner {
	s := new(scanner)
	s.Reset(b)
	return s
}

// fail is the error of a step that met something else than it wanted: the
// scanner's own when it has one.
func (s *scanner) fail(msg string) error {
	s.Fail(msg)
	return s.Err()
}

// beginObject consumes '{'.
func (s *scanner) beginObject() error {
	if s.OpenObject() {
		return nil
	}
	return s.fail("expected object")
}

// beginArray consumes '['.
func (s *scanner) beginArray() error {
	if s.OpenArray() {
		return nil
	}
	return s.fail("expected array")
}

// nextKey advances to the next member of the current object and returns
// its key; done is true once the closing '}' has been consumed. n counts
// the members seen so far: pass a pointer to a zeroed int per object.
func (s *scanner) nextKey(n *int) (key []byte, done bool, err error) {
	key, ok := s.NextKey(n) // false on an error too, which sticks
	return key, !ok, s.Err()
}

// nextElem advances to the next element of the current array; done is
// true once the closing ']' has been consumed.
func (s *scanner) nextElem(n *int) (done bool, err error) {
	return !s.NextElem(n), s.Err()
}

// eachElem reads the array at the cursor, calling fn with the index of each
// element (fn reads the element), and returns the element count. fn's
// error is returned as it is.
func (s *scanner) eachElem(fn func(i int) error) (int, error) {
	if err := s.beginArray(); err != nil {
		return 0, err
	}
	n := 0
	for s.NextElem(&n) {
		if err := fn(n - 1); err != nil {
			return n, err
		}
	}
	return n, s.Err()
}

// str reads a string value and returns its contents as they stand in the
// input, escapes uninterpreted. Every string the decoder reads is hex,
// whose parsers reject a backslash, so an escaped hex field is an error
// rather than a misread (no node escapes them).
func (s *scanner) str() ([]byte, error) {
	v := s.Raw()
	return v, s.Err()
}

// skip consumes one value of any kind.
func (s *scanner) skip() error {
	s.Skip()
	return s.Err()
}

// end checks that nothing but white space follows the document.
func (s *scanner) end() error {
	s.End()
	return s.Err()
}
