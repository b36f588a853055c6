package cometbft

import (
	"bytes"
	"encoding/binary"
	"time"
	"unicode/utf8"
)

// Text that reaches PostgreSQL must be valid UTF-8 without NUL bytes: text
// columns reject both, and jsonb rejects the \u0000 escape. Chains do emit
// such bytes (0.34 attributes are arbitrary bytes, logs quote user input), so
// the decoder replaces each NUL byte and each invalid UTF-8 sequence with
// U+FFFD. The raw record in staging keeps the original bytes.

const replacementChar = "\uFFFD"

// cleanText returns b itself when it is already clean, else a cleaned copy
// appended to dst[:0].
func cleanText(dst, b []byte) []byte {
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		return b
	}
	dst = dst[:0]
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == 0 || r == utf8.RuneError && size == 1 {
			dst = append(dst, replacementChar...)
		} else {
			dst = append(dst, b[:size]...)
		}
		b = b[size:]
	}
	return dst
}

// needsEscape marks the bytes AppendJSONString cannot copy as they are.
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

// AppendJSONString appends b as a quoted JSON string, cleaned as cleanText
// does.
func AppendJSONString(dst, b []byte) []byte {
	if plainText(b) {
		dst = append(dst, '"')
		dst = append(dst, b...)
		return append(dst, '"')
	}
	return appendJSONEscaped(dst, b)
}

// appendJSONEscaped is AppendJSONString for any text.
func appendJSONEscaped(dst, b []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(b); {
		// Skip eight plain ASCII bytes at a time: most text is.
		for i+8 <= len(b) && !swarSpecial(binary.LittleEndian.Uint64(b[i:])) {
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

// plainText reports whether b, at least eight bytes of it, is ASCII with
// nothing to escape: most attribute keys and values (addresses, amounts),
// copied then as they are. It reads b a word at a time, the last word
// overlapping the one before, with no loop over single bytes.
func plainText(b []byte) bool {
	n := len(b)
	if n < 8 {
		return false
	}
	for i := 0; i+8 < n; i += 8 {
		if swarSpecial(binary.LittleEndian.Uint64(b[i:])) {
			return false
		}
	}
	return !swarSpecial(binary.LittleEndian.Uint64(b[n-8:]))
}

// SWAR (SIMD within a register) over eight bytes: swarZero(v) has the
// high bit set in the lowest byte of v that is zero (and possibly in
// higher bytes after it).
const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

func swarZero(v uint64) uint64 { return (v - swarOnes) & ^v & swarHighs }

// swarSpecial reports whether any of the eight bytes of v needs attention
// from AppendJSONString: a control character, '"', '\\' or a non-ASCII byte.
func swarSpecial(v uint64) bool {
	ctl := (v - swarOnes*0x20) & ^v & swarHighs // bytes < 0x20 (or a borrow from one)
	return (ctl | swarZero(v^(swarOnes*'"')) | swarZero(v^(swarOnes*'\\')) | v&swarHighs) != 0
}

const hexDigits = "0123456789abcdef"

// isPrintableText reports whether b is non-empty UTF-8 without control
// characters: what an event attribute key decoded from 0.34 base64 looks like.
func isPrintableText(b []byte) bool {
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// parseTime parses a CometBFT timestamp (RFC 3339, UTC, up to nanoseconds,
// as Go prints time.Time). The common UTC form is parsed by hand, without
// allocating; anything else goes through time.Parse.
func parseTime(b []byte) (time.Time, error) {
	if t, ok := parseTimeUTC(b); ok {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, string(b))
}

func parseTimeUTC(b []byte) (time.Time, bool) {
	// 2006-01-02T15:04:05[.999999999]Z
	if len(b) < 20 || b[len(b)-1] != 'Z' || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	num := func(p []byte) (int, bool) {
		n := 0
		for _, c := range p {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	year, ok1 := num(b[0:4])
	month, ok2 := num(b[5:7])
	day, ok3 := num(b[8:10])
	hour, ok4 := num(b[11:13])
	minute, ok5 := num(b[14:16])
	sec, ok6 := num(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		n, ok := num(frac[1:])
		if !ok {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			n *= 10
		}
		nsec = n
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // 2023-02-30 would silently become March 2
		return time.Time{}, false
	}
	return t, true
}
