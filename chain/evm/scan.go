package evm

import (
	"iter"

	"github.com/blockhaul/blockhaul/chain/jsonscan"
)

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

// object ranges over the members of the object at the cursor, yielding
// each key with the cursor at its value, which the loop body reads. Unlike
// jsonscan's Members, null is an error here (as for beginObject). An error
// ends the range and stays in s.Err(), for the caller to return after the
// loop.
func (s *scanner) object() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		if s.beginObject() != nil {
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

// member reads the value of the object member key at the cursor: a string
// into v (ok), or, of another kind, skipped. Errors name the key.
func (s *scanner) member(key []byte) (v []byte, ok bool, err error) {
	if s.Peek() != '"' {
		return nil, false, inFieldIf(string(key), s.skip())
	}
	if v, err = s.str(); err != nil {
		return nil, false, inField(string(key), err)
	}
	return v, true, nil
}

// memberInto reads the string value of member key into *dst, or skips the
// value when dst is nil. Errors name the key.
func (s *scanner) memberInto(key []byte, dst *[]byte) error {
	if dst == nil {
		return inFieldIf(string(key), s.skip())
	}
	v, err := s.str()
	if err != nil {
		return inField(string(key), err)
	}
	*dst = v
	return nil
}

// closed is the error of an object walk once its loop is over: the
// scanner's, else the first of the required members (names, one bit each
// in all) that have lacks.
func (s *scanner) closed(names []string, have, all int) error {
	if err := s.Err(); err != nil {
		return err
	}
	if have != all {
		return missingField(names, have, all)
	}
	return nil
}

// eachIn is eachElem with fn's error named as the element's ("[3].…").
func (s *scanner) eachIn(fn func(i int) error) (int, error) {
	return s.eachElem(func(i int) error {
		if err := fn(i); err != nil {
			return inElem("", i, err)
		}
		return nil
	})
}
