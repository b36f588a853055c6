package evm

import (
	"bytes"
	"testing"
)

// quoteIndex finds the first quote as bytes.IndexByte does, wherever it
// stands and whatever surrounds it (bytes one off a quote, bytes with the
// high bit set, a quote just past the SWAR part).
func TestQuoteIndexMatchesIndexByte(t *testing.T) {
	fillers := []byte{'0', 'a', 0x21, 0x23, 0xa2, 0x80, 0xff, 0x00, 0x01}
	for _, fill := range fillers {
		for n := range 48 {
			for q := -1; q < n; q++ {
				b := bytes.Repeat([]byte{fill}, n)
				if q >= 0 {
					b[q] = '"'
					if q+1 < n {
						b[q+1] = '"' // a second quote after the first
					}
				}
				for from := 0; from <= n; from++ {
					want := bytes.IndexByte(b[from:], '"')
					if want >= 0 {
						want += from
					}
					if got := quoteIndex(b, from); got != want {
						t.Fatalf("fill %#x, len %d, quote at %d, from %d: %d, want %d", fill, n, q, from, got, want)
					}
				}
			}
		}
	}
}
