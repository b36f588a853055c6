package staging

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// FormatVersion is the version byte that starts every staged value. A store
// written by a newer blockhaul is refused rather than misread.
const FormatVersion = 1

// A staged value is a small header followed by the zstd-compressed raw record:
//
//	version    1 byte   FormatVersion
//	family     1 byte   chain.Family
//	height     8 bytes  big-endian
//	hashLen    1 byte   then hash
//	parentLen  1 byte   then parent hash
//	rawLen     4 bytes  uncompressed length of the raw record
//	checksum   4 bytes  CRC-32C of every byte before it and of the payload
//	payload    zstd frame, without a content checksum of its own (the
//	           CRC-32C covers it); frames that carry one decode too
//
// The header lets export check continuity without decompressing; the
// checksum turns a flipped bit anywhere in the value into a
// *CorruptRecordError naming the height, never a wrong row.
const fixedHeaderLen = 1 + 1 + 8 + 1 + 1 + 4 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded header of a staged value.
type Header struct {
	Version    uint8
	Family     chain.Family
	Height     uint64
	Hash       []byte
	ParentHash []byte
	RawLen     uint32
}

// CorruptRecordError reports a staged value that fails its checksum or
// cannot be decoded. The record must not be used; fetching the height again
// replaces it.
type CorruptRecordError struct {
	Height uint64
	Reason string
}

func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("staging: corrupt record at height %d: %s", e.Height, e.Reason)
}

// Fault marks the error as data that is wrong (exit 4).
func (e *CorruptRecordError) Fault() fault.Class { return fault.Data }

// appendValue appends the encoded header of b followed by payload (the
// compressed raw record) to dst.
func appendValue(dst []byte, family chain.Family, b *chain.Block, payload []byte) ([]byte, error) {
	return appendValueFunc(dst, family, b, func(dst []byte) []byte { return append(dst, payload...) })
}

// appendValueFunc is appendValue with the payload appended by compress, so
// that a compressor can write it in place, after the header, rather than
// into a buffer of its own that is then copied.
func appendValueFunc(dst []byte, family chain.Family, b *chain.Block, compress func(dst []byte) []byte) ([]byte, error) {
	if len(b.Hash) > 255 || len(b.ParentHash) > 255 {
		return dst, fmt.Errorf("staging: block %d: hash longer than 255 bytes", b.Height)
	}
	if uint64(len(b.Raw)) > 1<<32-1 {
		return dst, fmt.Errorf("staging: block %d: raw record of %d bytes exceeds 4 GiB", b.Height, len(b.Raw))
	}
	start := len(dst)
	dst = append(dst, FormatVersion, byte(family))
	dst = binary.BigEndian.AppendUint64(dst, b.Height)
	dst = append(dst, byte(len(b.Hash)))
	dst = append(dst, b.Hash...)
	dst = append(dst, byte(len(b.ParentHash)))
	dst = append(dst, b.ParentHash...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b.Raw)))
	sumAt := len(dst)
	dst = append(dst, 0, 0, 0, 0) // the checksum, once the payload is there
	dst = compress(dst)
	sum := crc32.Update(0, castagnoli, dst[start:sumAt])
	sum = crc32.Update(sum, castagnoli, dst[sumAt+4:])
	binary.BigEndian.PutUint32(dst[sumAt:], sum)
	return dst, nil
}

// parseValue splits a staged value into its header and compressed payload,
// verifying the checksum. keyHeight is the height of the key it was stored
// under; a header that disagrees is corrupt.
func parseValue(keyHeight uint64, v []byte) (Header, []byte, error) {
	var h Header
	corrupt := func(format string, args ...any) (Header, []byte, error) {
		return Header{}, nil, &CorruptRecordError{Height: keyHeight, Reason: fmt.Sprintf(format, args...)}
	}
	if len(v) < fixedHeaderLen {
		return corrupt("value of %d bytes is shorter than a header", len(v))
	}
	if v[0] != FormatVersion {
		return corrupt("unknown format version %d", v[0])
	}
	h.Version, h.Family = v[0], chain.Family(v[1])
	h.Height = binary.BigEndian.Uint64(v[2:10])
	p := 10
	n := int(v[p])
	p++
	if p+n+1+8 > len(v) {
		return corrupt("hash length %d overruns the value", n)
	}
	h.Hash = v[p : p+n : p+n]
	p += n
	m := int(v[p])
	p++
	if p+m+8 > len(v) {
		return corrupt("parent hash length %d overruns the value", m)
	}
	h.ParentHash = v[p : p+m : p+m]
	p += m
	h.RawLen = binary.BigEndian.Uint32(v[p:])
	p += 4
	want := binary.BigEndian.Uint32(v[p:])
	sum := crc32.Update(0, castagnoli, v[:p])
	sum = crc32.Update(sum, castagnoli, v[p+4:])
	if sum != want {
		return corrupt("checksum mismatch (stored %08x, computed %08x)", want, sum)
	}
	if h.Height != keyHeight {
		return corrupt("header names height %d", h.Height)
	}
	return h, v[p+4:], nil
}
