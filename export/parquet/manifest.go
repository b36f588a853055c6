package parquet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/blockhaul/blockhaul/chain"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ManifestName is the manifest's name at the destination's root.
const ManifestName = "manifest.json"

// ManifestFormat is the manifest's format version.
const ManifestFormat = 1

// Manifest describes a destination's segments. It is written after the
// files it names, so that a segment it lists is whole; it holds no time or
// other value that would make two runs over the same staging differ.
type Manifest struct {
	Format  int    `json:"format"`
	Family  string `json:"family"`
	ChainID string `json:"chain_id"`
	// AnchorHeight and AnchorHash are the first block of the first segment
	// written here (hex): another chain of the same id (a testnet reset)
	// has another block there, and is refused.
	AnchorHeight uint64 `json:"anchor_height"`
	AnchorHash   string `json:"anchor_hash,omitempty"`
	// SegmentBlocks is the segment size: segment k holds heights
	// [k·SegmentBlocks, (k+1)·SegmentBlocks), clipped to the range written.
	SegmentBlocks uint64 `json:"segment_blocks"`
	// Version is the blockhaul version that last wrote the manifest.
	Version string `json:"blockhaul_version"`
	// Decoder is what shaped the rows: the decoder's options and tables.
	Decoder Decoder `json:"decoder"`
	// Segments in height order.
	Segments []Segment `json:"segments"`
}

// Decoder is what shaped the rows of the files: the options the decoder
// was given (--tables, --proto, --abi, --event-encoding, as flags name
// them) and the tables it wrote, column by column.
type Decoder struct {
	Options map[string]string `json:"options,omitempty"`
	Tables  []TableShape      `json:"tables"`
	// Shape is the SHA-256 of Options and Tables: a segment written with
	// another shape is written again.
	Shape string `json:"shape"`
}

// TableShape is one table as the files hold it.
type TableShape struct {
	Name         string        `json:"name"`
	HeightColumn string        `json:"height_column"`
	Columns      []ColumnShape `json:"columns"`
	Definition   string        `json:"definition,omitempty"`
}

// ColumnShape is one column: its PostgreSQL type (what export writes) and
// the Parquet type the files hold it as.
type ColumnShape struct {
	Name     string `json:"name"`
	Postgres string `json:"postgres"`
	Parquet  string `json:"parquet"`
	Nullable bool   `json:"nullable,omitempty"`
}

// Segment is one segment: its heights, the hashes that chain it to its
// neighbours, and one file per table.
type Segment struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	// ParentHash is block From's parent's hash, LastHash block To's hash
	// (hex): a segment's ParentHash is the LastHash of the segment before.
	ParentHash string `json:"parent_hash"`
	LastHash   string `json:"last_hash"`
	Shape      string `json:"shape"`
	Version    string `json:"blockhaul_version"`
	Files      []File `json:"files"`
}

// File is one table's file of a segment.
type File struct {
	Table  string `json:"table"`
	Path   string `json:"path"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// decoderShape describes tables and options, with the digest of both.
func decoderShape(tables []chain.Table, options map[string]string) Decoder {
	d := Decoder{Options: options}
	for _, t := range tables {
		ts := TableShape{Name: t.Name, HeightColumn: t.HeightColumn, Definition: t.Definition}
		for _, c := range t.Columns {
			ts.Columns = append(ts.Columns, ColumnShape{Name: c.Name, Postgres: c.Type, Parquet: ParquetType(c.Type), Nullable: c.Null})
		}
		d.Tables = append(d.Tables, ts)
	}
	b, _ := json.Marshal(struct {
		O map[string]string
		T []TableShape
	}{d.Options, d.Tables}) // maps marshal with sorted keys: the digest is stable
	sum := sha256.Sum256(b)
	d.Shape = hex.EncodeToString(sum[:])
	return d
}

// ReadManifest reads bucket's manifest; ok is false when there is none.
func ReadManifest(ctx context.Context, bucket *blob.Bucket) (m *Manifest, ok bool, err error) {
	b, err := bucket.ReadAll(ctx, ManifestName)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("parquet: read %s: %w", ManifestName, err)
	}
	m = new(Manifest)
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(m); err != nil {
		return nil, false, &ManifestError{Err: err}
	}
	if m.Format != ManifestFormat {
		return nil, false, &ManifestError{Err: fmt.Errorf("format %d, this blockhaul reads %d", m.Format, ManifestFormat)}
	}
	if !slices.IsSortedFunc(m.Segments, func(a, b Segment) int { return compareU64(a.From, b.From) }) {
		return nil, false, &ManifestError{Err: errors.New("segments are not in height order")}
	}
	return m, true, nil
}

func compareU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeManifest replaces bucket's manifest with m in one write: a reader
// sees the old manifest or the new, never a part.
func writeManifest(ctx context.Context, bucket *blob.Bucket, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	w, err := bucket.NewWriter(ctx, ManifestName, &blob.WriterOptions{ContentType: "application/json"})
	if err != nil {
		return fmt.Errorf("parquet: write %s: %w", ManifestName, err)
	}
	if _, err := io.Copy(w, bytes.NewReader(b)); err != nil {
		w.Close()
		return fmt.Errorf("parquet: write %s: %w", ManifestName, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("parquet: write %s: %w", ManifestName, err)
	}
	return nil
}

// ManifestError is a manifest that does not read.
type ManifestError struct{ Err error }

func (e *ManifestError) Error() string {
	return fmt.Sprintf("parquet: %s does not read: %v", ManifestName, e.Err)
}
func (e *ManifestError) Unwrap() error { return e.Err }
