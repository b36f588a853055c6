package jsonscan

import (
	"encoding/binary"
	"unicode/utf8"
)

// replacementChar stands for a NUL byte or an invalid UTF-8 sequence in
// text written for PostgreSQL: text columns refuse both, and jsonb refuses
// the \u0000 escape.
const replacementChar = "\uFFFD"

// AppendQuoted appends b as a quoted JSON string fit for PostgreSQL's
// jsonb: '"', '\' and control characters escaped, each NUL byte and each
// invalid UTF-8 sequence written as U+FFFD.
func AppendQuoted(dst, b []byte) []byte {
	if plainText(b) {
		dst = append(dst, '"')
		dst = append(dst, b...)
		return append(dst, '"')
	}
	return appendEscaped(dst, b)
}

// plainText reports whether b, at least eight bytes of it, is ASCII with
// nothing to escape: most event attribute keys and values (addresses,
// amounts), copied then as they are. It reads b a word at a time, the last
// word overlapping the one before, with no loop over single bytes.
func plainText(b []byte) bool {
	n := len(b)
	if n < 8 {
		return false
	}
	for i := 0; i+8 < n; i += 8 {
		if special(binary.LittleEndian.Uint64(b[i:])) {
			return false
		}
	}
	return !special(binary.LittleEndian.Uint64(b[n-8:]))
}

// special reports whether any of the eight bytes of w needs attention from
// appendEscaped: a control character, '"', '\' or a non-ASCII byte.
func special(w uint64) bool { return notPlain(w)|w&swarHighs != 0 }

// needsEscape marks the bytes appendEscaped cannot copy as they are.
var needsEscape = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	for c := 0x80; c < 0x100; c++ {
		t[c] = true // multi-byte: checked for validity
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendEscaped is AppendQuoted for any text.
func appendEscaped(dst, b []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(b); {
		// Skip eight plain ASCII bytes at a time: most text is.
		for i+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		if !needsEscape[c] {
			i++
			continue
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRune(b[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, b[start:i]...)
			dst = append(dst, replacementChar...)
			i++
			start = i
			continue
		}
		dst = append(dst, b[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case 0:
			dst = append(dst, replacementChar...)
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		}
		i++
		start = i
	}
	dst = append(dst, b[start:]...)
	return append(dst, '"')
}
