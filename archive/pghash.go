package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// PostgreSQL's extended (64-bit, seeded) hash functions, computed in Go on
// the binary form of a value as COPY sends it, so that verify --pg can
// digest what staging decodes to exactly as checksum digests the rows
// inside PostgreSQL (rowHash), without a second database. Each is checked
// against the server's own function (TestPGHashMatchesServer). The results
// are those of a little-endian server (x86-64, arm64): PostgreSQL reads the
// key in native words, so a big-endian server hashes differently, and its
// digests differ from its own checksum's anyway.

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
// text's (deterministic collation) and jsonb strings' hash.
func pgHashBytes(k []byte, seed uint64) uint64 {
	a := 0x9e3779b9 + uint32(len(k)) + 3923095
	b, c := a, a
	if seed != 0 {
		a += uint32(seed >> 32)
		b += uint32(seed)
		a, b, c = jenkinsMix(a, b, c)
	}
	for len(k) >= 12 {
		a += binary.LittleEndian.Uint32(k)
		b += binary.LittleEndian.Uint32(k[4:])
		c += binary.LittleEndian.Uint32(k[8:])
		a, b, c = jenkinsMix(a, b, c)
		k = k[12:]
	}
	// The last 11 bytes: little-endian words into a and b, and c's upper
	// three bytes (its lowest is "reserved for the length").
	for i, x := range k {
		switch {
		case i < 4:
			a += uint32(x) << (8 * i)
		case i < 8:
			b += uint32(x) << (8 * (i - 4))
		default:
			c += uint32(x) << (8 * (i - 7))
		}
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
func pgHashNumericDigits(digits []int16, weight int, seed uint64) uint64 {
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
	for _, d := range digits {
		k = binary.LittleEndian.AppendUint16(k, uint16(d))
	}
	return pgHashBytes(k, seed) ^ uint64(int64(weight))
}

// pgHashNumeric hashes a numeric in its binary (COPY) form.
func pgHashNumeric(v []byte, seed uint64) (uint64, error) {
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
	return pgHashNumericDigits(digits, weight, seed), nil
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
