package cometbft

// bech32 encoding (BIP-173) of account and validator addresses, so that the
// synthetic chain's events carry addresses of the exact form and length a
// Cosmos SDK chain prints (cosmos1…, cosmosvaloper1…), which matters for how
// its records compress.

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// bech32Gen holds, for each value of the checksum's top five bits, the
// generator words they select XORed together: one lookup per character
// where the checksum's definition takes five conditional XORs (it was 5%
// of an export's CPU, at several addresses per tx).
var bech32Gen = func() (t [32]uint32) {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	for top := range t {
		for i := range 5 {
			if top>>i&1 == 1 {
				t[top] ^= gen[i]
			}
		}
	}
	return t
}()

func bech32Polymod(values []byte) uint32 {
	chk := uint32(1)
	for _, v := range values {
		chk = bech32Step(chk, v)
	}
	return chk
}

// Bech32Encode returns hrp + "1" + data (8-bit groups) in bech32 with its checksum.
func Bech32Encode(hrp string, data []byte) string {
	// The buffers hold an address (20 or 32 bytes) on the stack.
	var fiveBuf, valuesBuf, outBuf [128]byte
	five := appendBech32Groups(fiveBuf[:0], data)
	values := valuesBuf[:0]
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]>>5)
	}
	values = append(values, 0)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]&31)
	}
	values = append(values, five...)
	values = append(values, 0, 0, 0, 0, 0, 0)
	mod := bech32Polymod(values) ^ 1

	out := append(outBuf[:0], hrp...)
	out = append(out, '1')
	for _, v := range five {
		out = append(out, bech32Charset[v])
	}
	for i := range 6 {
		out = append(out, bech32Charset[(mod>>uint(5*(5-i)))&31])
	}
	return string(out)
}

// appendBech32Groups appends data regrouped from 8-bit bytes into 5-bit
// groups, the last one padded.
func appendBech32Groups(dst, data []byte) []byte {
	var acc uint32
	bits := 0
	for _, b := range data {
		acc = acc<<8 | uint32(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			dst = append(dst, byte(acc>>uint(bits))&31)
		}
	}
	if bits > 0 {
		dst = append(dst, byte(acc<<uint(5-bits))&31)
	}
	return dst
}

// appendBech32Data appends the data characters of data's bech32 encoding:
// what Bech32Encode writes between the '1' and the checksum, whatever the
// prefix.
func appendBech32Data(dst, data []byte) []byte {
	start := len(dst)
	dst = appendBech32Groups(dst, data)
	for i := start; i < len(dst); i++ {
		dst[i] = bech32Charset[dst[i]]
	}
	return dst
}

// bech32Valid reports whether s is a lowercase bech32 string with a valid
// checksum (it says nothing of what the data is).
func bech32Valid(s []byte) bool {
	p := bech32Prefix0(s)
	if p < 1 || len(s) > 90 {
		return false
	}
	// The checksum over the prefix's high bits, a zero, its low bits, then
	// the data characters' values, without writing those values out.
	chk := uint32(1)
	for _, c := range s[:p] {
		chk = bech32Step(chk, c>>5)
	}
	chk = bech32Step(chk, 0)
	for _, c := range s[:p] {
		chk = bech32Step(chk, c&31)
	}
	for _, c := range s[p+1:] {
		v := bech32Values[c]
		if v < 0 {
			return false
		}
		chk = bech32Step(chk, byte(v))
	}
	return chk == 1
}

// bech32Step is one character's step of bech32Polymod.
func bech32Step(chk uint32, v byte) uint32 {
	return (chk&0x1ffffff)<<5 ^ uint32(v) ^ bech32Gen[chk>>25]
}

// bech32Values is the value of each bech32 data character, -1 for a byte
// that is not one.
var bech32Values = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(bech32Charset); i++ {
		t[bech32Charset[i]] = int8(i)
	}
	return t
}()

// bech32Prefix0 is the position of the separator of a bech32-shaped string
// (lowercase letters, '1', at least six data characters), or -1.
func bech32Prefix0(s []byte) int {
	i := -1
	for j := len(s) - 1; j >= 0; j-- {
		if s[j] == '1' {
			i = j
			break
		}
	}
	if i < 1 || len(s)-i-1 < 6 {
		return -1
	}
	for _, c := range s[:i] {
		if c < 'a' || c > 'z' {
			return -1
		}
	}
	return i
}
