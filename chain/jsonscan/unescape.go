package jsonscan

import (
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnescaped appends the unescaped form of a string body whose
// escapes have been checked (a Span's, or one SkipString accepted). Lone
// UTF-16 surrogates become U+FFFD, as encoding/json makes them.
func AppendUnescaped(dst, b []byte) []byte {
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
