package jsonscan

import (
	"errors"
	"strconv"
)

// ErrEnd is what a SyntaxError unwraps to when the input ended inside a
// value: a body or record cut short.
var ErrEnd = errors.New("unexpected end of input")

// SyntaxError is input that is not well-formed JSON, with the offset of the
// first byte that shows it.
type SyntaxError struct {
	Off int
	Msg string
	end bool // the input ended: Unwrap gives ErrEnd
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at offset " + strconv.Itoa(e.Off) + ": " + e.Msg
}

// Unwrap gives ErrEnd for input that ended too soon.
func (e *SyntaxError) Unwrap() error {
	if e.end {
		return ErrEnd
	}
	return nil
}

func errEnd(off int) error { return &SyntaxError{Off: off, Msg: ErrEnd.Error(), end: true} }

// ErrorAt is the error for the byte of b at off, which is not what the
// grammar allows (what: where it was met, as "after object key"); the end
// of input when off is past it.
func ErrorAt(b []byte, off int, what string) error {
	if off >= len(b) {
		return errEnd(off)
	}
	return &SyntaxError{Off: off, Msg: "invalid character " + strconv.QuoteRune(rune(b[off])) + " " + what}
}
