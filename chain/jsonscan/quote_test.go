package jsonscan

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestAppendQuotedPlainPath: the copy of plain text AppendQuoted
// takes is what the escaping path writes, for text of 0 to 40 bytes with
// every byte value, and multi-byte and cut UTF-8, at every position.
func TestAppendQuotedPlainPath(t *testing.T) {
	var specials [][]byte
	for c := range 256 {
		specials = append(specials, []byte{byte(c)})
	}
	specials = append(specials, []byte("é"), []byte("—"), []byte("🚀"), []byte("\u2028"), []byte("\xe2\x82"), []byte("\xf0\x9f\x9a"))
	plain, copied := 0, 0
	check := func(b []byte) {
		got, want := AppendQuoted([]byte("x"), b), appendEscaped([]byte("x"), b)
		if !bytes.Equal(got, want) {
			t.Errorf("AppendQuoted(%q) = %s, escaping path %s", b, got, want)
		}
		if plainText(b) {
			copied++
		}
	}
	for n := range 41 {
		base := []byte(strings.Repeat("cosmos1qyp", 5)[:n])
		check(base)
		plain++
		for pos := 0; pos <= n; pos++ {
			for _, sp := range specials {
				check(slices.Concat(base[:pos], sp, base[pos:]))
			}
		}
	}
	if copied < plain/2 {
		t.Errorf("%d of the %d plain texts copied: the plain path was not taken", copied, plain)
	}
}
