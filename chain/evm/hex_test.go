package evm

import (
	"encoding/hex"
	"strings"
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

// Runs of zero digits take a path of their own, and so do the last four
// bytes of an address: every length up to a few blocks, with each byte
// value in each position of an all-zero string, decodes as the standard
// library does.
func TestDecodeHexZeroRunsAndTails(t *testing.T) {
	for n := range 42 {
		zeros := strings.Repeat("0", 2*n)
		checkDecodeHex(t, []byte(zeros))
		for pos := range 2 * n {
			for c := range 256 {
				src := []byte(zeros)
				src[pos] = byte(c)
				checkDecodeHex(t, src)
			}
		}
	}
}

func FuzzDecodeHex(f *testing.F) {
	f.Add([]byte("00000000000000000000000000000000000000ab"))
	f.Add([]byte("0123456789abcdefABCDEF0123456789aF"))
	f.Fuzz(func(t *testing.T, src []byte) {
		checkDecodeHex(t, src[:len(src)&^1])
	})
}

func checkDecodeHex(t *testing.T, src []byte) {
	t.Helper()
	want, wantErr := hex.DecodeString(string(src))
	got := make([]byte, len(src)/2)
	ok := decodeHex(got, src)
	if ok != (wantErr == nil) {
		t.Fatalf("%q: ok=%v, stdlib err=%v", src, ok, wantErr)
	}
	if ok && string(got) != string(want) {
		t.Fatalf("%q: got %x want %x", src, got, want)
	}
}

func TestSlabWord(t *testing.T) {
	full := "0x" + strings.Repeat("ab", 32)
	for _, c := range []struct{ in, want string }{
		{"0x1", strings.Repeat("00", 31) + "01"},
		{"0xabc", strings.Repeat("00", 30) + "0abc"},
		{"0x000abc", strings.Repeat("00", 30) + "0abc"},
		{"0x0", strings.Repeat("00", 32)},
		{full, full[2:]},
	} {
		var s slab
		b, err := s.word([]byte(c.in))
		if err != nil || hex.EncodeToString(b) != c.want {
			t.Errorf("word(%s) = %x, %v; want %s", c.in, b, err, c.want)
		}
	}
	for _, bad := range []string{full + "1", "0x", "0xg1", "12", "0x1g"} {
		var s slab
		if b, err := s.word([]byte(bad)); err == nil {
			t.Errorf("word(%s) = %x, want an error", bad, b)
		}
	}
}
