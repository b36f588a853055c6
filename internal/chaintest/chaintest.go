// Package chaintest holds small fixtures shared by the engines' tests.
package chaintest

import (
	"crypto/sha256"
	"encoding/binary"
)

// HashOf is a deterministic 32-byte block hash for height h, so that a test
// chain's block h has ParentHash HashOf(h-1).
func HashOf(h uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h)
	s := sha256.Sum256(b[:])
	return s[:]
}
