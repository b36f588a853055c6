package evm

import (
	"encoding/hex"
	"testing"
)

func TestDecodeHexMatchesStdlib(t *testing.T) {
	// Every byte value in every position of a 16-digit block, valid or not.
	base := []byte("0123456789abcdefABCDEF0123456789aF") // two SWAR blocks and a tail
	for pos := range base {
		for c := range 256 {
			src := append([]byte(nil), base...)
			src[pos] = byte(c)
			want, wantErr := hex.DecodeString(string(src))
			got := make([]byte, len(src)/2)
			ok := decodeHex(got, src)
			if ok != (wantErr == nil) {
				t.Fatalf("byte %#x at %d: ok=%v, stdlib err=%v", c, pos, ok, wantErr)
			}
			if ok && string(got) != string(want) {
				t.Fatalf("byte %#x at %d: got %x want %x", c, pos, got, want)
			}
		}
	}
}
