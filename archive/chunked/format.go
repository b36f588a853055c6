package chunked

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Format is the manifest's format version; a reader refuses any other.
const Format = 1

// Encoding names the chunk encoding in the manifest: the records framed
// as described in docs/format/archive.md, the whole compressed as one
// zstd stream.
const Encoding = "blockhaul-records-v1+zstd"

// Object names under an archive's chain prefix (<chain-id>/).
const (
	ManifestName = "manifest.json"
	chunkDir     = "chunks/"
	chunkExt     = ".rec.zst"
	partDir      = "parts/"
)

// DefaultChunkBlocks is the chunk size of a new archive: 1,000 blocks
// (the Akash indexer's chunks), a few MB a chunk, small enough that the
// readers' chunks in memory stay bounded, large enough that a 30M-block
// chain is 30,000 objects.
const DefaultChunkBlocks = 1000

// MaxChunkBlocks bounds the chunk size (a reader holds a chunk's records
// in memory).
const MaxChunkBlocks = 100_000

// maxRecord bounds one record's length in a chunk, so that a damaged
// length cannot ask for GiBs.
const maxRecord = 1 << 30

// Manifest describes one chain's archive: <chain-id>/manifest.json.
type Manifest struct {
	Format   int    `json:"format"`
	Encoding string `json:"encoding"`
	Family   string `json:"family"`
	ChainID  string `json:"chain_id"`
	// ChunkBlocks is the chunk size: chunk k holds heights
	// max(k*ChunkBlocks, Genesis) to (k+1)*ChunkBlocks-1.
	ChunkBlocks uint64    `json:"chunk_blocks"`
	Genesis     uint64    `json:"genesis"`
	Updated     time.Time `json:"updated"`
	// Chunks are in height order, without overlap; gaps are allowed (a
	// reader lists them before it reads anything).
	Chunks []Chunk `json:"chunks"`
}

// Chunk is one chunk object of an archive.
type Chunk struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	// Name is the object's name under the chain prefix.
	Name      string   `json:"name"`
	FirstHash HexBytes `json:"first_hash"`
	LastHash  HexBytes `json:"last_hash"`
	// ParentHash is the parent hash of the chunk's first block: the
	// LastHash of the chunk before it.
	ParentHash HexBytes `json:"parent_hash"`
	// SHA256 is the digest of the object's bytes (as stored, compressed).
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// RecordBytes is the size of the records uncompressed, framing
	// included.
	RecordBytes int64 `json:"record_bytes"`
}

// HexBytes is a hash in the manifest: lowercase hex, no 0x.
type HexBytes []byte

func (h HexBytes) MarshalJSON() ([]byte, error) { return json.Marshal(hex.EncodeToString(h)) }

func (h *HexBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := hex.DecodeString(strings.TrimPrefix(strings.ToLower(s), "0x"))
	if err != nil {
		return fmt.Errorf("hash %q: %w", s, err)
	}
	*h = v
	return nil
}

// ChainPrefix is the prefix of a chain's archive: its chain id, path-escaped.
func ChainPrefix(chainID string) string { return url.PathEscape(chainID) + "/" }

// ChunkName is the object name of the chunk of heights from..to.
func ChunkName(from, to uint64) string {
	return chunkDir + strconv.FormatUint(from, 10) + "-" + strconv.FormatUint(to, 10) + chunkExt
}

// PartName is the manifest part of shard index of shards; a publish that
// is not sharded writes "parts/publish.json".
func PartName(shards, index int) string {
	if shards == 0 {
		return partDir + "publish.json"
	}
	return fmt.Sprintf("%sshard-%d-of-%d.json", partDir, index, shards)
}

// chunkRange is the range of the chunk holding height h.
func chunkRange(h, size, genesis uint64) (from, to uint64) {
	k := h / size
	return max(k*size, genesis), k*size + size - 1
}

// frameHeader is a record's frame: height (8 bytes) and length (4 bytes),
// big-endian.
const frameHeader = 12

// appendFrame appends the frame of height h's record to dst.
func appendFrame(dst []byte, h uint64, raw []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, h)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(raw)))
	return append(dst, raw...)
}

// record is one record read from a chunk; Raw points into the chunk's
// decompressed bytes. Hash and Parent are the record's own (the family's
// RecordIdentity), set once the chunk is checked.
type record struct {
	Height       uint64
	Raw          []byte
	Hash, Parent []byte
}

// readChunk reads a chunk's records from r, its decompressed bytes, each
// into a buffer of its own (let go as soon as the record is staged, where
// one buffer of the whole chunk lives until its last record is), and
// checks that they are exactly the heights from..to, in order, framed in
// no more than size bytes (the manifest's record_bytes), with nothing
// after them. A read error of r (the chunk does not decompress) is
// returned as *decompressError.
func readChunk(r io.Reader, from, to uint64, size int64) ([]record, error) {
	out := make([]record, 0, to-from+1)
	var hdr [frameHeader]byte
	left := size
	for want := from; ; want++ {
		n, err := io.ReadFull(r, hdr[:])
		switch {
		case err == io.EOF && want > to:
			return out, nil
		case err == io.EOF:
			return nil, fmt.Errorf("records end at height %d, the chunk's range at %d", want-1, to)
		case err == io.ErrUnexpectedEOF:
			return nil, fmt.Errorf("%d bytes after height %d: not a whole frame", n, want-1)
		case err != nil:
			return nil, &decompressError{err}
		}
		h := binary.BigEndian.Uint64(hdr[:])
		length := binary.BigEndian.Uint32(hdr[8:])
		if h != want || h > to {
			return nil, fmt.Errorf("record of height %d where %d was due", h, want)
		}
		if left -= frameHeader; length == 0 || length > maxRecord || int64(length) > left {
			return nil, fmt.Errorf("record of height %d: length %d, %d bytes of the chunk's %d left", h, length, max(left, 0), size)
		}
		left -= int64(length)
		raw := make([]byte, length)
		if n, err := io.ReadFull(r, raw); err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("record of height %d: %d bytes of %d", h, n, length)
		} else if err != nil {
			return nil, &decompressError{err}
		}
		out = append(out, record{Height: h, Raw: raw})
		if h == to {
			// Nothing after the last record.
			var b [1]byte
			switch _, err := io.ReadFull(r, b[:]); {
			case err == nil:
				return nil, fmt.Errorf("bytes after the record of height %d, the chunk's last", to)
			case err != io.EOF:
				return nil, &decompressError{err}
			}
		}
	}
}

// decompressError is a chunk whose bytes do not decompress.
type decompressError struct{ err error }

func (e *decompressError) Error() string { return "does not decompress: " + e.err.Error() }

// digest is the SHA-256 of b in lowercase hex.
func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// decoders decompress chunks as streams, one at a time each, without
// goroutines of their own; a decoder keeps its window's buffers from one
// chunk to the next. The window is capped (zstd's --long=30 at most), so
// that a damaged frame header cannot ask for more.
var decoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<30))
	if err != nil {
		panic(err) // only for options out of range: a programming error
	}
	return d
}}

// encoder compresses chunks (EncodeAll is safe for concurrent use).
var encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))

// check reports what is wrong with m as a manifest of family's chain, or nil.
func (m *Manifest) check(family string) error {
	switch {
	case m.Format != Format:
		return fmt.Errorf("format %d, this blockhaul reads %d", m.Format, Format)
	case m.Encoding != Encoding:
		return fmt.Errorf("chunk encoding %q, this blockhaul reads %q", m.Encoding, Encoding)
	case family != "" && m.Family != family:
		return fmt.Errorf("an archive of a %s chain, not %s", m.Family, family)
	case m.ChainID == "":
		return fmt.Errorf("no chain_id")
	case m.ChunkBlocks == 0 || m.ChunkBlocks > MaxChunkBlocks:
		return fmt.Errorf("chunk_blocks %d (want 1 to %d)", m.ChunkBlocks, MaxChunkBlocks)
	}
	for i, c := range m.Chunks {
		from, to := chunkRange(c.From, m.ChunkBlocks, m.Genesis)
		if c.From != from || c.To != to || c.Name != ChunkName(c.From, c.To) {
			return fmt.Errorf("chunk %d: %s holds %d-%d, not a chunk of %d heights from %d", i, c.Name, c.From, c.To, m.ChunkBlocks, m.Genesis)
		}
		if i > 0 && c.From <= m.Chunks[i-1].To {
			return fmt.Errorf("chunk %s overlaps or precedes %s", c.Name, m.Chunks[i-1].Name)
		}
		if len(c.SHA256) != 64 || len(c.FirstHash) == 0 || len(c.LastHash) == 0 {
			return fmt.Errorf("chunk %s: no digest or hashes", c.Name)
		}
	}
	return nil
}

// links returns the first chunk of m whose parent hash is not the last
// hash of the chunk just before it (adjacent chunks only; gaps are not
// breaks), or "".
func (m *Manifest) links() string {
	for i := 1; i < len(m.Chunks); i++ {
		p, c := m.Chunks[i-1], m.Chunks[i]
		if p.To+1 == c.From && !bytes.Equal(p.LastHash, c.ParentHash) {
			return fmt.Sprintf("chunk %s's parent hash %x is not the last hash %x of %s", c.Name, []byte(c.ParentHash), []byte(p.LastHash), p.Name)
		}
	}
	return ""
}

// Gaps returns the ranges of from..to that no chunk of m holds.
func (m *Manifest) Gaps(from, to uint64) [][2]uint64 {
	var out [][2]uint64
	next := from
	for _, c := range m.Chunks {
		if c.To < next || c.From > to {
			continue
		}
		if c.From > next {
			out = append(out, [2]uint64{next, c.From - 1})
		}
		next = c.To + 1
		if c.To >= to {
			return out
		}
	}
	if next <= to {
		out = append(out, [2]uint64{next, to})
	}
	return out
}

// sortChunks orders chunks by height.
func sortChunks(cs []Chunk) {
	slices.SortFunc(cs, func(a, b Chunk) int { return cmp.Compare(a.From, b.From) })
}

// parseManifest decodes a manifest's JSON.
func parseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not an archive manifest: %v", err)
	}
	return &m, nil
}
