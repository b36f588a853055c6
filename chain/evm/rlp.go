package evm

import "fmt"

// RLP, as much of it as the hashes of a block need (go-ethereum rlp/): byte
// strings, lists, and quantities as minimal big-endian strings. Values come
// from the record's hex, decoded straight into the encoding.

// appendRLPString appends v as an RLP byte string.
func appendRLPString(b, v []byte) []byte {
	switch {
	case len(v) == 1 && v[0] < 0x80:
		return append(b, v[0])
	case len(v) <= 55:
		b = append(b, 0x80+byte(len(v)))
	default:
		b = appendRLPLength(b, 0xb7, len(v))
	}
	return append(b, v...)
}

func appendRLPListHeader(b []byte, n int) []byte {
	if n <= 55 {
		return append(b, 0xc0+byte(n))
	}
	return appendRLPLength(b, 0xf7, n)
}

// appendRLPLength appends the long-form prefix base+len(len) and n big-endian.
func appendRLPLength(b []byte, base byte, n int) []byte {
	var be [8]byte
	k := 8
	for v := uint64(n); v > 0; v >>= 8 {
		k--
		be[k] = byte(v)
	}
	b = append(b, base+byte(8-k))
	return append(b, be[k:]...)
}

// rlpListHeaderLen is the length of the header of a list of n payload bytes
// (and of a long string's: both forms have the same size).
func rlpListHeaderLen(n int) int {
	if n <= 55 {
		return 1
	}
	k := 1
	for v := uint64(n); v > 0; v >>= 8 {
		k++
	}
	return k
}

// rlpWriter builds one RLP value. Lists are opened and closed around their
// items; close writes the list's header in front of its payload, moving
// the payload up by the header's few bytes.
type rlpWriter struct {
	b     []byte
	lists []int // payload start of each open list
}

func (w *rlpWriter) reset() {
	w.b = w.b[:0]
	w.lists = w.lists[:0]
}

func (w *rlpWriter) open() { w.lists = append(w.lists, len(w.b)) }

func (w *rlpWriter) close() {
	start := w.lists[len(w.lists)-1]
	w.lists = w.lists[:len(w.lists)-1]
	n := len(w.b) - start
	h := rlpListHeaderLen(n)
	w.b = append(w.b, make([]byte, h)...)
	copy(w.b[start+h:], w.b[start:start+n])
	appendRLPListHeader(w.b[start:start], n)
}

// raw appends bytes that are already RLP.
func (w *rlpWriter) raw(v []byte) { w.b = append(w.b, v...) }

// bytes appends the 0x-hex string v (an even number of digits) as a byte
// string; n > 0 requires exactly n bytes.
func (w *rlpWriter) bytes(v []byte, n int) error {
	d, err := digits(v)
	if err != nil {
		return err
	}
	if len(d)%2 != 0 {
		return badHex(v, errOddHex)
	}
	l := len(d) / 2
	if n > 0 && l != n {
		return badHex(v, fmt.Errorf("want %d bytes", n))
	}
	if l == 1 {
		x, y := unhex[d[0]], unhex[d[1]]
		if x|y > 0xf {
			return badHex(v, errHexDigit)
		}
		w.b = appendRLPString(w.b, []byte{x<<4 | y})
		return nil
	}
	if !decodeHex(w.string(l), d) {
		return badHex(v, errHexDigit)
	}
	return nil
}

// string appends the header of a byte string of l > 1 bytes and room for
// them, which it returns.
func (w *rlpWriter) string(l int) []byte {
	if l <= 55 {
		w.b = append(w.b, 0x80+byte(l))
	} else {
		w.b = appendRLPLength(w.b, 0xb7, l)
	}
	w.b = append(w.b, make([]byte, l)...)
	return w.b[len(w.b)-l:]
}

// quantity appends the hex quantity v (no leading zeros needed) as a
// minimal big-endian byte string: 0 is the empty string.
func (w *rlpWriter) quantity(v []byte) error {
	d, err := quantityDigits(v)
	if err != nil {
		return err
	}
	if len(d) == 1 && d[0] == '0' {
		w.b = append(w.b, 0x80)
		return nil
	}
	l := (len(d) + 1) / 2
	out := w.string(l)
	start := len(w.b) - l
	if len(d)%2 == 1 {
		x := unhex[d[0]]
		if x > 0xf {
			return badHex(v, errHexDigit)
		}
		out[0] = x
		out, d = out[1:], d[1:]
	}
	if !decodeHex(out, d) {
		return badHex(v, errHexDigit)
	}
	if l == 1 && w.b[start] < 0x80 {
		// A single byte below 0x80 is its own encoding.
		w.b[start-1] = w.b[start]
		w.b = w.b[:start]
	}
	return nil
}

// uint appends x as a minimal big-endian byte string.
func (w *rlpWriter) uint(x uint64) {
	var be [8]byte
	k := 8
	for v := x; v > 0; v >>= 8 {
		k--
		be[k] = byte(v)
	}
	w.b = appendRLPString(w.b, be[k:])
}
