package archive

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL's extended (64-bit, seeded) hash functions, computed in Go on
// the binary form of a value as COPY sends it, so that verify --pg can
// digest what staging decodes to exactly as checksum digests the rows
// inside PostgreSQL (rowHash), without a second database. Each is checked
// against the server's own function (TestPGHashMatchesServer). PostgreSQL
// reads a key in native words, so a big-endian server hashes bytes, text,
// numerics and jsonb differently from a little-endian one: each function
// that depends on it takes the server's wordOrder, which verify asks the
// server for (serverWordOrder).

// wordOrder is the byte order a PostgreSQL server reads a key's words in
// when it hashes bytes (hash_bytes_extended reads native uint32s, a
// numeric's digits are native int16s): its CPU's.
type wordOrder uint8

const (
	littleEndianWords wordOrder = iota // x86-64, arm64, ppc64le: nearly every server
	bigEndianWords                     // s390x, big-endian ppc64
)

func (o wordOrder) String() string {
	if o == bigEndianWords {
		return "big-endian"
	}
	return "little-endian"
}

// errUnknownWordOrder is wrapped by serverWordOrder's error when the
// server's hashes are neither order's.
var errUnknownWordOrder = errors.New("archive: the server's hash functions are not PostgreSQL's of either byte order")

// wordOrderProbe is hashed by serverWordOrder: text of 35 bytes (two
// rounds of three words, then a tail in each of a, b and c) and a numeric
// of several digits.
var wordOrderProbe = struct {
	bytes   []byte
	numeric string
	digits  []int16 // the numeric's base-10000 digits
	weight  int
}{
	bytes:   []byte("blockhaul: the byte order, a probe!"),
	numeric: "12345678.9012",
	digits:  []int16{1234, 5678, 9012},
	weight:  1,
}

// serverWordOrder asks the server which word order its hashes read keys in,
// by hashing wordOrderProbe there and here in both orders. Hashes that fit
// neither are errUnknownWordOrder, naming what the server gave.
func serverWordOrder(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (wordOrder, error) {
	p := wordOrderProbe
	var hb, hn int64
	if err := q.QueryRow(ctx, "SELECT hashtextextended($1::text, 7), hash_numeric_extended($2::numeric, 7)", string(p.bytes), p.numeric).Scan(&hb, &hn); err != nil {
		return 0, fmt.Errorf("ask the server its hashes' byte order: %w", err)
	}
	for _, o := range []wordOrder{littleEndianWords, bigEndianWords} {
		if uint64(hb) == pgHashBytes(o, p.bytes, 7) && uint64(hn) == pgHashNumericDigits(o, p.digits, p.weight, 7) {
			return o, nil
		}
	}
	return 0, fmt.Errorf("%w (hashtextextended of a probe: %x, little-endian PostgreSQL's %x, big-endian's %x): not compared",
		errUnknownWordOrder, uint64(hb), pgHashBytes(littleEndianWords, p.bytes, 7), pgHashBytes(bigEndianWords, p.bytes, 7))
}

// jenkinsMix is mix() of src/common/hashfn.c.
func jenkinsMix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	return a, b, c
}

// jenkinsFinal is final() of src/common/hashfn.c.
func jenkinsFinal(a, b, c uint32) (uint32, uint32, uint32) {
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return a, b, c
}

// pgHashBytes is hash_bytes_extended (hash_any_extended): bytea's,
// text's (deterministic collation) and jsonb strings' hash, as a server
// reading words in order o computes it.
func pgHashBytes(o wordOrder, k []byte, seed uint64) uint64 {
	a := 0x9e3779b9 + uint32(len(k)) + 3923095
	b, c := a, a
	if seed != 0 {
		a += uint32(seed >> 32)
		b += uint32(seed)
		a, b, c = jenkinsMix(a, b, c)
	}
	if o == bigEndianWords {
		for ; len(k) >= 12; k = k[12:] {
			a += binary.BigEndian.Uint32(k)
			b += binary.BigEndian.Uint32(k[4:])
			c += binary.BigEndian.Uint32(k[8:])
			a, b, c = jenkinsMix(a, b, c)
		}
	} else {
		for ; len(k) >= 12; k = k[12:] {
			a += binary.LittleEndian.Uint32(k)
			b += binary.LittleEndian.Uint32(k[4:])
			c += binary.LittleEndian.Uint32(k[8:])
			a, b, c = jenkinsMix(a, b, c)
		}
	}
	// The last 11 bytes, zero-padded: words into a and b, and into c the
	// three bytes other than its lowest ("reserved for the length"), which
	// on a big-endian server is the word's last byte.
	var tail [12]byte
	copy(tail[:], k)
	if o == bigEndianWords {
		a += binary.BigEndian.Uint32(tail[:])
		b += binary.BigEndian.Uint32(tail[4:])
		c += binary.BigEndian.Uint32(tail[8:])
	} else {
		a += binary.LittleEndian.Uint32(tail[:])
		b += binary.LittleEndian.Uint32(tail[4:])
		c += binary.LittleEndian.Uint32(tail[8:]) << 8
	}
	_, b, c = jenkinsFinal(a, b, c)
	return uint64(b)<<32 | uint64(c)
}

// pgHashUint32 is hash_bytes_uint32_extended.
func pgHashUint32(k uint32, seed uint64) uint64 {
	a := uint32(0x9e3779b9 + 4 + 3923095)
	b, c := a, a
	if seed != 0 {
		a += uint32(seed >> 32)
		b += uint32(seed)
		a, b, c = jenkinsMix(a, b, c)
	}
	a += k
	_, b, c = jenkinsFinal(a, b, c)
	return uint64(b)<<32 | uint64(c)
}

// pgHashInt8 is hashint8extended (and timestamptz's hash): the high half
// folded into the low one, so that an int8 hashes as the int4 of equal
// value does.
func pgHashInt8(v int64, seed uint64) uint64 {
	lo, hi := uint32(v), uint32(v>>32)
	if v >= 0 {
		lo ^= hi
	} else {
		lo ^= ^hi
	}
	return pgHashUint32(lo, seed)
}

// pgHashNumericDigits is hash_numeric_extended over a numeric's base-10000
// digits (most significant first) and the weight of the first: leading and
// trailing zero digits do not count, nor does the sign or display scale.
func pgHashNumericDigits(o wordOrder, digits []int16, weight int, seed uint64) uint64 {
	for len(digits) > 0 && digits[0] == 0 {
		digits = digits[1:]
		weight--
	}
	if len(digits) == 0 {
		return seed - 1
	}
	for digits[len(digits)-1] == 0 {
		digits = digits[:len(digits)-1]
	}
	var buf [64]byte
	k := buf[:0]
	for _, d := range digits { // native int16s
		if o == bigEndianWords {
			k = binary.BigEndian.AppendUint16(k, uint16(d))
		} else {
			k = binary.LittleEndian.AppendUint16(k, uint16(d))
		}
	}
	return pgHashBytes(o, k, seed) ^ uint64(int64(weight))
}

// pgHashNumeric hashes a numeric in its binary (COPY) form.
func pgHashNumeric(o wordOrder, v []byte, seed uint64) (uint64, error) {
	if len(v) < 8 {
		return 0, fmt.Errorf("numeric of %d bytes", len(v))
	}
	n := int(binary.BigEndian.Uint16(v))
	weight := int(int16(binary.BigEndian.Uint16(v[2:])))
	sign := binary.BigEndian.Uint16(v[4:])
	if sign == 0xC000 || sign == 0xD000 || sign == 0xF000 { // NaN, ±Infinity
		return seed, nil
	}
	if len(v) != 8+2*n {
		return 0, fmt.Errorf("numeric of %d digits in %d bytes", n, len(v))
	}
	digits := make([]int16, n)
	for i := range digits {
		digits[i] = int16(binary.BigEndian.Uint16(v[8+2*i:]))
	}
	return pgHashNumericDigits(o, digits, weight, seed), nil
}

// pgHashArray is hash_array_extended over an array in its binary form:
// 31·h + each element's hash (0 for NULL), from 1.
func pgHashArray(v []byte, seed uint64, elem func([]byte, uint64) (uint64, error)) (uint64, error) {
	if len(v) < 12 {
		return 0, fmt.Errorf("array of %d bytes", len(v))
	}
	ndim := int(int32(binary.BigEndian.Uint32(v)))
	if ndim < 0 || len(v) < 12+8*ndim {
		return 0, fmt.Errorf("array header of %d dimensions in %d bytes", ndim, len(v))
	}
	items := 0
	if ndim > 0 {
		items = 1
		for d := range ndim {
			items *= int(int32(binary.BigEndian.Uint32(v[12+8*d:])))
		}
	}
	p := v[12+8*ndim:]
	result := uint64(1)
	for range items {
		if len(p) < 4 {
			return 0, errors.New("array truncated")
		}
		n := int32(binary.BigEndian.Uint32(p))
		p = p[4:]
		var h uint64
		if n >= 0 {
			if int(n) > len(p) {
				return 0, errors.New("array element truncated")
			}
			var err error
			if h, err = elem(p[:n], seed); err != nil {
				return 0, err
			}
			p = p[n:]
		}
		result = result*31 + h
	}
	return result, nil
}
