package hashchain

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// Seed returns the seed a synthetic chain derives all its values from
// (times, addresses, contents, and so its block hashes): the configured
// seed itself while every other parameter that shapes its blocks holds its
// default, else a digest of the family, the seed and those parameters. Two
// chains that differ in any parameter then share no derived value, so a
// store filled with one is told apart from the other at its first block,
// while a chain of default parameters keeps the blocks it always had.
// params and defaults are the parameters in a fixed order (floats as
// math.Float64bits), the same length.
func Seed(family string, seed int64, params, defaults []uint64) uint64 {
	if len(params) != len(defaults) {
		panic("hashchain: Seed: params and defaults differ in length")
	}
	if slices.Equal(params, defaults) {
		return uint64(seed)
	}
	in := make([]byte, 0, len(family)+1+8*(1+len(params)))
	in = append(in, family...)
	in = append(in, 0)
	in = binary.BigEndian.AppendUint64(in, uint64(seed))
	for _, p := range params {
		in = binary.BigEndian.AppendUint64(in, p)
	}
	sum := sha256.Sum256(in)
	return binary.BigEndian.Uint64(sum[:8])
}
