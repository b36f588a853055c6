package cometbft

import (
	"bytes"
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
