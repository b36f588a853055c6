package evm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/blockhaul/blockhaul/chain"
)

// unhex maps an ASCII byte to its hex digit value, or 0xff.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
		t[c-'a'+'A'] = byte(c-'a') + 10
	}
	return t
}()

var (
	errPrefix   = errors.New("missing 0x prefix (a lower-case x, as JSON-RPC writes it)")
	errHexDigit = errors.New("invalid hex digit")
	errOddHex   = errors.New("odd number of hex digits")
	errEmptyQty = errors.New("empty quantity")
	errRange    = errors.New("value out of range")
)

// hexValueError names the offending value, shortened so a huge corrupt
// field cannot flood a log line.
type hexValueError struct {
	val []byte
	err error
}

func (e *hexValueError) Error() string {
	v := e.val
	suffix := ""
	if len(v) > 80 {
		v, suffix = v[:80], "..."
	}
	return fmt.Sprintf("%v in %q%s", e.err, v, suffix)
}

func (e *hexValueError) Unwrap() error { return e.err }

func badHex(v []byte, err error) error {
	return &hexValueError{val: append([]byte(nil), v...), err: err}
}

// digits strips the 0x prefix of a hex string. The prefix is "0x" only:
// the JSON-RPC specification writes no other, the RPC source's own checks
// refuse "0X", and a record must read the same everywhere it is read.
func digits(b []byte) ([]byte, error) {
	if len(b) < 2 || b[0] != '0' || b[1] != 'x' {
		return nil, badHex(b, errPrefix)
	}
	return b[2:], nil
}

// quantityDigits strips the prefix and leading zeros of a hex quantity.
// Geth never sends leading zeros; other clients sometimes do.
func quantityDigits(b []byte) ([]byte, error) {
	d, err := digits(b)
	if err != nil {
		return nil, err
	}
	if len(d) == 0 {
		return nil, badHex(b, errEmptyQty)
	}
	for len(d) > 1 && d[0] == '0' {
		d = d[1:]
	}
	return d, nil
}

// parseUint reads a hex quantity that must fit in 64 bits.
func parseUint(b []byte) (uint64, error) {
	d, err := quantityDigits(b)
	if err != nil {
		return 0, err
	}
	if len(d) > 16 {
		return 0, badHex(b, errRange)
	}
	var v uint64
	for _, c := range d {
		x := unhex[c]
		if x > 0xf {
			return 0, badHex(b, errHexDigit)
		}
		v = v<<4 | uint64(x)
	}
	return v, nil
}

// parseInt64 reads a hex quantity bound for a bigint column.
func parseInt64(b []byte) (int64, error) {
	v, err := parseUint(b)
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt64 {
		return 0, badHex(b, errRange)
	}
	return int64(v), nil
}

// parseNumeric reads a hex quantity of up to 256 bits bound for a numeric
// column. A value that fits int64 is returned as small, with large nil
// (cheaper to hold and to box); a larger one as large.
func parseNumeric(b []byte) (small int64, large *big.Int, err error) {
	d, err := quantityDigits(b)
	if err != nil {
		return 0, nil, err
	}
	if len(d) > 64 {
		return 0, nil, badHex(b, errRange)
	}
	if len(d) <= 16 {
		var v uint64
		for _, c := range d {
			x := unhex[c]
			if x > 0xf {
				return 0, nil, badHex(b, errHexDigit)
			}
			v = v<<4 | uint64(x)
		}
		if v <= math.MaxInt64 {
			return int64(v), nil, nil
		}
		return 0, new(big.Int).SetUint64(v), nil
	}
	// Words are filled from the least significant end, 16 digits each.
	words := make([]big.Word, (len(d)+15)/16)
	end := len(d)
	for w := range words {
		start := max(end-16, 0)
		var v uint64
		for _, c := range d[start:end] {
			x := unhex[c]
			if x > 0xf {
				return 0, nil, badHex(b, errHexDigit)
			}
			v = v<<4 | uint64(x)
		}
		words[w] = big.Word(v)
		end = start
	}
	return 0, new(big.Int).SetBits(words), nil
}

// decodeHex decodes len(dst) bytes from src, which holds twice as many
// hex digits. It works on 16 digits at a time (SWAR): hex decoding is the
// largest single cost of decoding a record. Runs of zeros, common in
// blooms and in ABI-encoded input and log data (padding), are written
// without decoding.
func decodeHex(dst, src []byte) bool {
	if len(src) < 2*len(dst) {
		return false
	}
	const zeros = 0x3030303030303030 // "00000000"
	for len(dst) >= 8 {
		x, y := binary.LittleEndian.Uint64(src), binary.LittleEndian.Uint64(src[8:])
		if x == zeros && y == zeros {
			binary.LittleEndian.PutUint64(dst, 0)
		} else {
			a, okA := decode8(x)
			b, okB := decode8(y)
			if !okA || !okB {
				return false
			}
			binary.LittleEndian.PutUint64(dst, uint64(a)|uint64(b)<<32)
		}
		dst, src = dst[8:], src[16:]
	}
	if len(dst) >= 4 { // an address's last four bytes
		a, ok := decode8(binary.LittleEndian.Uint64(src))
		if !ok {
			return false
		}
		binary.LittleEndian.PutUint32(dst, a)
		dst, src = dst[4:], src[8:]
	}
	for i := range dst {
		a, b := unhex[src[2*i]], unhex[src[2*i+1]]
		if a|b > 0xf {
			return false
		}
		dst[i] = a<<4 | b
	}
	return true
}

// decode8 decodes 8 hex digits, packed little-endian in x, into 4 bytes
// (little-endian in the result). Each byte lane is range-checked with the
// usual carry-free trick: every lane is below 0x80 first, so adding a bias
// below 0x80 never carries into the next lane.
func decode8(x uint64) (uint32, bool) {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	if x&high != 0 {
		return 0, false
	}
	digit := (x + ones*(0x80-'0')) &^ (x + ones*(0x80-'9'-1)) & high
	l := x | ones*0x20 // fold A-F to a-f
	alpha := (l + ones*(0x80-'a')) &^ (l + ones*(0x80-'f'-1)) & high
	if digit|alpha != high {
		return 0, false
	}
	v := x&(ones*0x0f) + (alpha>>7)*9
	t := (v<<4 | v>>8) & 0x00ff00ff00ff00ff // lane 2k: digits 2k and 2k+1 as one byte
	t = (t | t>>8) & 0x0000ffff0000ffff
	return uint32(t | t>>16), true
}

// parseFixed decodes a hex string of exactly n bytes into dst.
func parseFixed(dst []byte, b []byte) error {
	d, err := digits(b)
	if err != nil {
		return err
	}
	if len(d) != 2*len(dst) {
		return badHex(b, fmt.Errorf("want %d bytes", len(dst)))
	}
	if !decodeHex(dst, d) {
		return badHex(b, errHexDigit)
	}
	return nil
}

// slab hands out the byte slices of a block's bytea values from the
// memory of the rows they go into (chain.Rows.Bytes), so that they cost no
// allocation of their own and are reused with the rows' memory. A slab
// without rows (tests) allocates each slice.
type slab struct {
	rows *chain.Rows
}

func (s *slab) alloc(n int) []byte {
	if s.rows == nil {
		return make([]byte, n)
	}
	return s.rows.Bytes(n)
}

// bytes decodes an arbitrary-length 0x hex string into the slab. An empty
// string ("0x") yields an empty, non-nil slice: an empty bytea, not NULL.
func (s *slab) bytes(b []byte) ([]byte, error) {
	d, err := digits(b)
	if err != nil {
		return nil, err
	}
	if len(d)%2 != 0 {
		return nil, badHex(b, errOddHex)
	}
	out := s.alloc(len(d) / 2)
	if !decodeHex(out, d) {
		return nil, badHex(b, errHexDigit)
	}
	return out, nil
}

// fixed decodes a hex string of exactly n bytes into the slab.
func (s *slab) fixed(b []byte, n int) ([]byte, error) {
	out := s.alloc(n)
	if err := parseFixed(out, b); err != nil {
		return nil, err
	}
	return out, nil
}

// word decodes a hex quantity of up to 256 bits into 32 big-endian bytes
// of the slab, left-padded with zeros (quantities drop leading zeros, and
// may have an odd number of digits).
func (s *slab) word(b []byte) ([]byte, error) {
	d, err := quantityDigits(b)
	if err != nil {
		return nil, err
	}
	if len(d) > 64 {
		return nil, badHex(b, errRange)
	}
	out := s.alloc(32)
	clear(out)
	// Digits fill from the least significant end, two per byte.
	for i, j := len(d)-1, 31; i >= 0; i, j = i-2, j-1 {
		lo := unhex[d[i]]
		hi := byte(0)
		if i > 0 {
			hi = unhex[d[i-1]]
		}
		if lo > 0xf || hi > 0xf {
			return nil, badHex(b, errHexDigit)
		}
		out[j] = hi<<4 | lo
	}
	return out, nil
}
