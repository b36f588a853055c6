package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

// MaxDepth is encoding/json's limit on nested arrays and objects: SkipValue
// refuses what it refuses.
const MaxDepth = 10000

// SkipSpace returns the offset of the first byte at or after i that is not
// JSON white space.
func SkipSpace(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' { // compact JSON: no white space at all
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

// SkipValue checks the JSON value that starts at b[i] (after any white
// space), nested depth containers deep, against encoding/json's grammar
// and limit, and returns the offset just past it.
func SkipValue(b []byte, i, depth int) (int, error) {
	return skipValue(b, i, depth)
}

// skipValue is SkipValue. It walks nested containers with a stack of its
// own rather than by recursion. (A caller with a lower bound passes a
// depth that leaves that many levels below MaxDepth: a constant bound keeps
// this loop's compare a compare with a constant.)
func skipValue(b []byte, i, depth int) (int, error) {
	var stackBuf [64]byte
	open := stackBuf[:0] // '{' or '[' of each container not yet closed
	var err error
	for {
		// A value starts here.
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, errEnd(i)
		}
		switch b[i] {
		case '{', '[':
			c := b[i]
			if depth+len(open) >= MaxDepth {
				return i, errDepth(i)
			}
			i = SkipSpace(b, i+1)
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
				i, _, err = SkipString(b, i+1)
			}
		case 't':
			i, err = SkipLiteral(b, i, "true")
		case 'f':
			i, err = SkipLiteral(b, i, "false")
		case 'n':
			i, err = SkipLiteral(b, i, "null")
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
			i = SkipSpace(b, i)
			if i >= len(b) {
				return i, errEnd(i)
			}
			c, top := b[i], open[len(open)-1]
			if c == ',' {
				i++
				if top == '{' {
					if i, err = skipKey(b, SkipSpace(b, i)); err != nil {
						return i, err
					}
				}
				break
			}
			if c != top+2 {
				if top == '{' {
					return i, ErrorAt(b, i, "after object key:value pair")
				}
				return i, ErrorAt(b, i, "after array element")
			}
			open = open[:len(open)-1]
			i++
		}
	}
}

func errDepth(off int) error {
	return &SyntaxError{Off: off, Msg: "nesting too deep (exceeded max depth)"}
}

// skipKey skips an object key at b[i] and the colon after it.
func skipKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, ErrorAt(b, i, "looking for beginning of object key string")
	}
	if j, ok := skipShortString(b, i+1); ok {
		i = j
	} else {
		var err error
		if i, _, err = SkipString(b, i+1); err != nil {
			return i, err
		}
	}
	if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
		return i, ErrorAt(b, i, "after object key")
	}
	return i + 1, nil
}

// SkipString checks the rest of a string whose opening quote is just
// before b[i], and returns the offset past its closing quote and whether it
// holds escapes. As for encoding/json, control characters must be escaped
// and invalid UTF-8 is let through.
func SkipString(b []byte, i int) (int, bool, error) {
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
			n, err := escapeLen(b, i)
			if err != nil {
				return i + n, escaped, err
			}
			i += n
		default:
			return i, escaped, ErrorAt(b, i, "in string literal")
		}
	}
}

// escapeLen checks the escape that starts at b[i] ('\\') and returns its
// length; on error, the offset from i of the byte that shows it.
func escapeLen(b []byte, i int) (int, error) {
	if i+1 >= len(b) {
		return 1, errEnd(i + 1)
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		for k := i + 2; k < i+6; k++ {
			if k >= len(b) {
				return k - i, errEnd(k)
			}
			if !isHex(b[k]) {
				return k - i, &SyntaxError{Off: k, Msg: "invalid \\u escape in string: " + strconv.QuoteRune(rune(b[k]))}
			}
		}
		return 6, nil
	}
	return 1, &SyntaxError{Off: i + 1, Msg: "invalid escape in string: " + strconv.QuoteRune(rune(b[i+1]))}
}

// skipShortString is the fast path for the many strings that are short and
// plain (keys, numbers, hashes...): it reports whether the string ends
// within the next eight bytes with nothing to look at before its closing
// quote, and the offset past that quote.
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

// SWAR (SIMD within a register) over eight bytes, the first in the low
// bits. These are the bit tricks of "has a zero byte" and "has a byte less
// than n": the high bit of each marked byte is set; a borrow can also mark
// bytes above a marked one, never below, so the lowest mark is exact.
const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

// notPlain marks the bytes of w that are a quote, a backslash or a control
// character.
func notPlain(w uint64) uint64 {
	q := w ^ (swarOnes * '"')
	s := w ^ (swarOnes * '\\')
	return ((q-swarOnes)&^q | (s-swarOnes)&^s | (w-swarOnes*0x20)&^w) & swarHighs
}

// quoteOrBackslash marks the bytes of w that are a quote or a backslash.
func quoteOrBackslash(w uint64) uint64 {
	q := w ^ (swarOnes * '"')
	s := w ^ (swarOnes * '\\')
	return ((q-swarOnes)&^q | (s-swarOnes)&^s) & swarHighs
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// SkipLiteral skips lit (true, false or null) at b[i].
func SkipLiteral(b []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return i + k, errEnd(i + k)
		}
		if b[i+k] != lit[k] {
			return i + k, ErrorAt(b, i+k, "in literal "+lit)
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
		return i, ErrorAt(b, i, "looking for beginning of value")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, ErrorAt(b, i, "after decimal point in numeric literal")
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
			return i, ErrorAt(b, i, "in exponent of numeric literal")
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i, nil
}
