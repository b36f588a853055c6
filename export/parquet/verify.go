package parquet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
	pq "github.com/parquet-go/parquet-go"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// VerifyConfig says what Verify checks beyond the manifest.
type VerifyConfig struct {
	// Dest names the destination in the report (credentials redacted).
	Dest string
	// Store and Decoder, when both set, are the staging the segments were
	// written from and the decoder that wrote them: each segment's ends
	// are compared with staging's hashes, and its files are made again
	// from staging (into a digest, nothing written) and compared with the
	// manifest's SHA-256 when the segment was written by this Version and
	// shape.
	Store   *staging.Store
	Decoder export.Decoder
	Options map[string]string
	Version string
	// OnSegment, if set, is called after each segment is checked.
	OnSegment func(Segment)
}

// VerifyReport is what Verify found. Problems is empty when every file is
// as the manifest says (and as staging gives, when given).
type VerifyReport struct {
	Dest     string    `json:"dest"`
	Segments int       `json:"segments"`
	Files    int       `json:"files"`
	Rows     int64     `json:"rows"`
	Bytes    int64     `json:"bytes"`
	Problems []Problem `json:"problems"`
	// Unlisted are objects no segment names: files of a segment a killed
	// run did not finish (the next run writes them again), or put there
	// by hand. They are not problems of the segments the manifest lists.
	Unlisted []string `json:"unlisted,omitempty"`
	// Rebuilt counts the segments made again from staging and compared
	// byte for byte (by SHA-256); Unrebuilt those whose ends only were
	// compared (written by another version or shape).
	Rebuilt   int           `json:"rebuilt"`
	Unrebuilt int           `json:"unrebuilt"`
	Duration  time.Duration `json:"duration_ns"`
}

// Problem is one thing wrong, naming the file or segment.
type Problem struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	Path string `json:"path,omitempty"`
	What string `json:"what"`
}

func (p Problem) String() string {
	if p.Path != "" {
		return fmt.Sprintf("%s (segment %d-%d): %s", p.Path, p.From, p.To, p.What)
	}
	return fmt.Sprintf("segment %d-%d: %s", p.From, p.To, p.What)
}

// VerifyError is a verify that found problems: data that is wrong.
type VerifyError struct{ Report *VerifyReport }

func (e *VerifyError) Error() string {
	r := e.Report
	s := fmt.Sprintf("parquet: %s: %d problem(s) in %d segment(s): %s", r.Dest, len(r.Problems), r.Segments, r.Problems[0])
	if len(r.Problems) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(r.Problems)-1)
	}
	return s
}

// Fault marks a verify's findings as wrong data.
func (e *VerifyError) Fault() fault.Class { return fault.Data }

// Verify checks the segments in bucket against its manifest: each file
// there, of its size and SHA-256, its footer's row count the manifest's;
// segments chained (a segment's parent hash the last hash of the segment
// before it, where they are adjacent); and, with staging, against staging.
// It returns a *VerifyError when it finds problems.
func Verify(ctx context.Context, bucket *blob.Bucket, cfg VerifyConfig) (*VerifyReport, error) {
	start := time.Now()
	rep := &VerifyReport{Dest: cfg.Dest, Problems: []Problem{}}
	m, ok, err := ReadManifest(ctx, bucket)
	if err != nil {
		return rep, fault.Mark(err, fault.Data)
	}
	if !ok {
		return rep, fault.Mark(fmt.Errorf("parquet: %s holds no %s: not a destination of Parquet segments", cfg.Dest, ManifestName), fault.Config)
	}
	var w *writer
	if cfg.Store != nil && cfg.Decoder != nil {
		if id, ok := cfg.Store.Identity(); ok && (id.Family.String() != m.Family || id.ChainID != m.ChainID) {
			return rep, &ForeignError{Dest: cfg.Dest, Why: fmt.Sprintf("holds segments of %s chain %q; staging %s holds %s chain %q", m.Family, m.ChainID, cfg.Store.Dir(), id.Family, id.ChainID)}
		}
		tables := cfg.Decoder.Tables()
		c := Config{Version: cfg.Version, Options: cfg.Options}
		c.ensureDefaults()
		w = &writer{open: digestOnly, remake: true, store: cfg.Store, dec: cfg.Decoder, cfg: &c, res: &Result{Rows: map[string]uint64{}}}
		w.shape = decoderShape(tables, cfg.Options).Shape
		for _, t := range tables {
			ts, err := newTableSchema(t)
			if err != nil {
				return rep, fault.Mark(err, fault.Config)
			}
			w.schemas = append(w.schemas, ts)
		}
	}
	listed := map[string]bool{}
	for i, s := range m.Segments {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		rep.Segments++
		bad := func(path, what string, args ...any) {
			rep.Problems = append(rep.Problems, Problem{From: s.From, To: s.To, Path: path, What: fmt.Sprintf(what, args...)})
		}
		if s.To < s.From {
			bad("", "ends below its start")
		}
		if i > 0 {
			p := m.Segments[i-1]
			switch {
			case p.To >= s.From:
				bad("", "overlaps the segment %d-%d", p.From, p.To)
			case p.To+1 == s.From && p.LastHash != s.ParentHash:
				bad("", "does not chain: its first block's parent is %s, the block before it (segment %d-%d) is %s", s.ParentHash, p.From, p.To, p.LastHash)
			}
		}
		for _, f := range s.Files {
			listed[f.Path] = true
			rep.Files++
			rep.Rows += f.Rows
			rep.Bytes += f.Bytes
			if err := checkFile(ctx, bucket, f); err != nil {
				if p, ok := err.(problem); ok {
					bad(f.Path, "%s", string(p))
					continue
				}
				return rep, err
			}
		}
		if w != nil {
			if err := w.verifySegment(ctx, s, bad, rep); err != nil {
				return rep, err
			}
		}
		if cfg.OnSegment != nil {
			cfg.OnSegment(s)
		}
	}
	// Files no segment names: left by a killed run, or put there by hand.
	it := bucket.List(nil)
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return rep, fmt.Errorf("parquet: list %s: %w", cfg.Dest, err)
		}
		if obj.Key != ManifestName && !listed[obj.Key] {
			rep.Unlisted = append(rep.Unlisted, obj.Key)
		}
	}
	rep.Duration = time.Since(start)
	if len(rep.Problems) > 0 {
		return rep, &VerifyError{Report: rep}
	}
	return rep, nil
}

// problem is a finding about a file (not an error reading it).
type problem string

func (p problem) Error() string { return string(p) }

// checkFile reads f whole: its size, SHA-256 and footer.
func checkFile(ctx context.Context, bucket *blob.Bucket, f File) error {
	r, err := bucket.NewReader(ctx, f.Path, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return problem("missing")
	}
	if err != nil {
		return fmt.Errorf("parquet: read %s: %w", f.Path, err)
	}
	h := sha256.New()
	n, err := io.Copy(h, r)
	r.Close()
	if err != nil {
		return fmt.Errorf("parquet: read %s: %w", f.Path, err)
	}
	if n != f.Bytes {
		return problem(fmt.Sprintf("%d bytes, the manifest says %d", n, f.Bytes))
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.SHA256 {
		return problem(fmt.Sprintf("SHA-256 %s, the manifest says %s", sum, f.SHA256))
	}
	pf, err := pq.OpenFile(&blobReaderAt{ctx: ctx, bucket: bucket, key: f.Path}, n, pq.SkipPageIndex(true), pq.SkipBloomFilters(true))
	if err != nil {
		return problem(fmt.Sprintf("is not a Parquet file that reads: %v", err))
	}
	if pf.NumRows() != f.Rows {
		return problem(fmt.Sprintf("holds %d rows, the manifest says %d", pf.NumRows(), f.Rows))
	}
	return nil
}

// verifySegment compares s with staging: its end hashes, and its files
// made again when s was written by this version and shape.
func (w *writer) verifySegment(ctx context.Context, s Segment, bad func(string, string, ...any), rep *VerifyReport) error {
	_, parent, err := w.store.Header(s.From)
	if err != nil {
		bad("", "staging cannot give block %d: %v", s.From, err)
		return nil
	}
	last, _, err := w.store.Header(s.To)
	if err != nil {
		bad("", "staging cannot give block %d: %v", s.To, err)
		return nil
	}
	if p := hex.EncodeToString(parent); p != s.ParentHash {
		bad("", "its first block's parent is %s, staging's %s", s.ParentHash, p)
	}
	if l := hex.EncodeToString(last); l != s.LastHash {
		bad("", "its last block is %s, staging's %s", s.LastHash, l)
	}
	if s.Version != w.cfg.Version || s.Shape != w.shape {
		rep.Unrebuilt++
		return nil
	}
	again, err := w.segment(ctx, s.From, s.To, nil)
	if err != nil {
		return err
	}
	rep.Rebuilt++
	for _, f := range again.Files {
		i := -1
		for j, o := range s.Files {
			if o.Path == f.Path {
				i = j
			}
		}
		switch {
		case i < 0:
			bad(f.Path, "staging gives this file, the manifest has none")
		case s.Files[i].SHA256 != f.SHA256:
			bad(f.Path, "staging gives a file of SHA-256 %s (%d rows), the manifest says %s (%d rows)", f.SHA256, f.Rows, s.Files[i].SHA256, s.Files[i].Rows)
		}
	}
	return nil
}

// digestOnly opens a sink that keeps nothing: tableFile hashes what
// passes through it.
func digestOnly(context.Context, string) (io.WriteCloser, error) { return discard{}, nil }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

// blobReaderAt reads an object by ranges, for a Parquet footer.
type blobReaderAt struct {
	ctx    context.Context
	bucket *blob.Bucket
	key    string
}

func (b *blobReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r, err := b.bucket.NewRangeReader(b.ctx, b.key, off, int64(len(p)), nil)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n, err := io.ReadFull(r, p)
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	return n, err
}
