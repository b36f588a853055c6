package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
)

// Responses are split by a scanner of their own rather than by
// encoding/json. Results are kept as the node sent them, so all that is
// needed of a result is where it ends and that it is well-formed JSON;
// encoding/json would check the whole body byte by byte through its state
// machine, then walk each result a second time to find its end, at a few
// hundred MB/s. This scanner makes one pass, skims string contents eight
// bytes at a time, and validates the same grammar (a truncated or malformed
// body is refused, as before), leaving only the small error objects to
// encoding/json.

// rawResponse is one JSON-RPC response object, split. id and result alias
// the body; err is decoded (it owns its bytes).
type rawResponse struct {
	id     []byte    // raw id, nil when absent
	result []byte    // raw result, nil when absent
	err    *RPCError // nil when absent or null
}

// maxNesting is encoding/json's limit on nested arrays and objects, kept
// so that the bodies refused are the same.
const maxNesting = 10000

// syntaxError is a body that is not well-formed JSON, with the offset of
// the first byte that shows it.
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s (offset %d)", e.msg, e.off) }

func errEnd(off int) error { return &syntaxError{"unexpected end of JSON input", off} }

func errAt(b []byte, off int, what string) error {
	if off >= len(b) {
		return errEnd(off)
	}
	return &syntaxError{fmt.Sprintf("invalid character %q %s", b[off], what), off}
}

// splitSingle splits a body that holds one response object.
func splitSingle(b []byte) (rawResponse, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return rawResponse{}, errAt(b, i, "looking for a response object")
	}
	r, i, err := splitResponse(b, i, 0)
	if err != nil {
		return rawResponse{}, err
	}
	if i = skipSpace(b, i); i != len(b) {
		return rawResponse{}, errAt(b, i, "after the response")
	}
	return r, nil
}

// splitBatch splits a body that holds an array of responses, appending
// them to dst. A null element counts as a response with no id, as it did
// with encoding/json; any other element that is not an object makes the
// body bad. Nothing is appended when the body is bad.
func splitBatch(b []byte, dst []rawResponse) ([]rawResponse, error) {
	n0 := len(dst)
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return dst, errAt(b, i, "looking for an array of responses")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		i++
	} else {
		for {
			var err error
			switch {
			case i >= len(b):
				err = errEnd(i)
			case b[i] == '{':
				var r rawResponse
				r, i, err = splitResponse(b, i, 1)
				dst = append(dst, r)
			case b[i] == 'n':
				i, err = skipLiteral(b, i, "null")
			default:
				if i, err = skipValue(b, i, 1); err == nil {
					err = errors.New("batch element is not a response object")
				}
			}
			if err != nil {
				return dst[:n0], err
			}
			if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			return dst[:n0], errAt(b, i, "after an array element")
		}
	}
	if i = skipSpace(b, i); i != len(b) {
		return dst[:n0], errAt(b, i, "after the responses")
	}
	return dst, nil
}

// splitResponse splits the response object that starts at b[i] ('{'),
// nested depth containers deep, and returns the offset just past it. Keys
// are matched as encoding/json matched them into response: exactly, else
// case-insensitively; the last of duplicate keys wins; others are skipped
// (but validated).
func splitResponse(b []byte, i, depth int) (rawResponse, int, error) {
	var r rawResponse
	if depth >= maxNesting {
		return r, i, &syntaxError{"exceeded max depth", i}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return r, i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return r, i, errAt(b, i, "looking for beginning of object key string")
		}
		start := i
		end, escaped, err := skipString(b, i+1)
		if err != nil {
			return r, end, err
		}
		key := b[start:end]
		if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
			return r, i, errAt(b, i, "after object key")
		}
		i = skipSpace(b, i+1)
		vstart := i
		if i, err = skipValue(b, i, depth+1); err != nil {
			return r, i, err
		}
		val := b[vstart:i]
		switch keyField(key, escaped) {
		case fieldID:
			r.id = val
		case fieldResult:
			r.result = val
		case fieldError:
			// Decoded into the same pointer, so null clears it and a
			// repeated key merges, as encoding/json did. (Through a copy
			// of the pointer, for r not to escape.)
			e := r.err
			if err := json.Unmarshal(val, &e); err != nil {
				return r, vstart, fmt.Errorf("error object: %w", err)
			}
			r.err = e
		}
		if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return r, i + 1, nil
		}
		return r, i, errAt(b, i, "after object key:value pair")
	}
}

type field int

const (
	fieldOther field = iota
	fieldID
	fieldResult
	fieldError
)

// keyField says which field of a response a quoted key names.
func keyField(quoted []byte, escaped bool) field {
	name := quoted[1 : len(quoted)-1]
	if escaped {
		var s string
		if json.Unmarshal(quoted, &s) != nil {
			return fieldOther
		}
		name = []byte(s)
	}
	switch string(name) {
	case "id":
		return fieldID
	case "result":
		return fieldResult
	case "error":
		return fieldError
	}
	switch {
	case bytes.EqualFold(name, []byte("id")):
		return fieldID
	case bytes.EqualFold(name, []byte("result")):
		return fieldResult
	case bytes.EqualFold(name, []byte("error")):
		return fieldError
	}
	return fieldOther
}

// skipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' { // compact JSON: no whitespace at all
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue validates the JSON value that starts at b[i] (after any
// whitespace), nested depth containers deep, and returns the offset just
// past it. It walks nested containers with a stack of its own rather than
// by recursion.
func skipValue(b []byte, i, depth int) (int, error) {
	var stackBuf [64]byte
	open := stackBuf[:0] // '{' or '[' of each container not yet closed
	var err error
	for {
		// A value starts here.
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, errEnd(i)
		}
		switch b[i] {
		case '{', '[':
			c := b[i]
			if depth+len(open) >= maxNesting {
				return i, &syntaxError{"exceeded max depth", i}
			}
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '{'+2 is '}', '['+2 is ']'
				i++
				break
			}
			open = append(open, c)
			if c == '{' {
				if i, err = skipKey(b, i); err != nil {
					return i, err
				}
			}
			continue
		case '"':
			if j, ok := skipShortString(b, i+1); ok {
				i = j
			} else {
				i, _, err = skipString(b, i+1)
			}
		case 't':
			i, err = skipLiteral(b, i, "true")
		case 'f':
			i, err = skipLiteral(b, i, "false")
		case 'n':
			i, err = skipLiteral(b, i, "null")
		default:
			i, err = skipNumber(b, i)
		}
		if err != nil {
			return i, err
		}
		// A value ended at i: close containers up to the next comma.
		for {
			if len(open) == 0 {
				return i, nil
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, errEnd(i)
			}
			c, top := b[i], open[len(open)-1]
			if c == ',' {
				i++
				if top == '{' {
					if i, err = skipKey(b, skipSpace(b, i)); err != nil {
						return i, err
					}
				}
				break
			}
			if c != top+2 {
				if top == '{' {
					return i, errAt(b, i, "after object key:value pair")
				}
				return i, errAt(b, i, "after array element")
			}
			open = open[:len(open)-1]
			i++
		}
	}
}

// skipKey skips an object key at b[i] and the colon after it.
func skipKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, errAt(b, i, "looking for beginning of object key string")
	}
	if j, ok := skipShortString(b, i+1); ok {
		i = j
	} else {
		var err error
		if i, _, err = skipString(b, i+1); err != nil {
			return i, err
		}
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return i, errAt(b, i, "after object key")
	}
	return i + 1, nil
}

// skipString validates the rest of a string whose opening quote is just
// before b[i], and returns the offset past its closing quote and whether it
// holds escapes. As for encoding/json, control characters must be escaped
// and invalid UTF-8 is let through.
func skipString(b []byte, i int) (int, bool, error) {
	escaped := false
	for {
		// Find the next byte that is not plain, eight bytes at a time.
		for {
			if i+8 > len(b) {
				for i < len(b) && plainString[b[i]] {
					i++
				}
				if i >= len(b) {
					return i, escaped, errEnd(i)
				}
				break
			}
			if m := notPlain(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		switch b[i] {
		case '"':
			return i + 1, escaped, nil
		case '\\':
			escaped = true
			if i+1 >= len(b) {
				return i + 1, escaped, errEnd(i + 1)
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(b) {
						return k, escaped, errEnd(k)
					}
					if !isHex(b[k]) {
						return k, escaped, errAt(b, k, "in \\u hexadecimal character escape")
					}
				}
				i += 6
			default:
				return i + 1, escaped, errAt(b, i+1, "in string escape code")
			}
		default:
			return i, escaped, errAt(b, i, "in string literal")
		}
	}
}

// skipShortString is the fast path of skipString for the many strings that
// are short and plain (keys, numbers, hashes...): it reports whether the
// string ends within the next eight bytes with nothing to look at before
// its closing quote, and the offset past that quote.
func skipShortString(b []byte, i int) (int, bool) {
	if i+8 <= len(b) {
		j := i + bits.TrailingZeros64(notPlain(binary.LittleEndian.Uint64(b[i:])))>>3
		if j < len(b) && b[j] == '"' {
			return j + 1, true
		}
	}
	return i, false
}

// plainString[c] is true for a byte that stands for itself in a string.
var plainString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// notPlain marks the bytes of w (eight string bytes, the first in the low
// bits) that are a quote, a backslash or a control character: the high
// bit of each such byte is set. These are the bit tricks of "has a zero
// byte" and "has a byte less than n": a borrow can also mark bytes above a
// marked one, never below, so the lowest mark is exact.
func notPlain(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := w ^ (ones * '"')
	s := w ^ (ones * '\\')
	return ((q-ones)&^q | (s-ones)&^s | (w-ones*0x20)&^w) & highs
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipLiteral skips lit (true, false or null) at b[i].
func skipLiteral(b []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return i + k, errEnd(i + k)
		}
		if b[i+k] != lit[k] {
			return i + k, errAt(b, i+k, "in literal "+lit)
		}
	}
	return i + len(lit), nil
}

// skipNumber skips a number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) (int, error) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, errEnd(i)
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return i, errAt(b, i, "looking for beginning of value")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, errAt(b, i, "after decimal point in numeric literal")
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, errAt(b, i, "in exponent of numeric literal")
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i, nil
}
