package parquet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"
)

// Config configures Write. Bucket, the range and Identity are required.
type Config struct {
	// Dest names the destination in logs and errors (credentials redacted).
	Dest string
	// From and To are the heights written (inclusive).
	From, To uint64
	// SegmentBlocks is the segment size. Required: a family has its own
	// default (pipeline sets it).
	SegmentBlocks uint64
	// RowGroupRows is the most rows of a row group. Default 65,536.
	RowGroupRows int
	// Options are the decoder's options as flags name them, recorded in
	// the manifest.
	Options map[string]string
	// Version is blockhaul's version, recorded in the manifest and in each
	// file's created_by.
	Version string
	// Logger receives progress logs. Default: discard.
	Logger *slog.Logger
	// OnBatch, if set, is called after each batch is written to the files
	// of its segment (not yet complete: see OnSegment).
	OnBatch func(BatchStats)
	// OnSegment, if set, is called after each segment's manifest entry is
	// written, and for each segment found already written (Skipped).
	OnSegment func(SegmentStats)
}

// BatchStats describes one batch written.
type BatchStats struct {
	From, To uint64
	Rows     []int // per table, in decoder order
}

// SegmentStats describes one segment.
type SegmentStats struct {
	Segment Segment
	Skipped bool // it was in the manifest as it would be written
}

// Result summarises a Write.
type Result struct {
	Segments int // written
	Skipped  int // already there
	Removed  int // files of replaced segments deleted
	Blocks   uint64
	Rows     map[string]uint64
	Bytes    int64
	Duration time.Duration
}

func (c *Config) ensureDefaults() {
	if c.RowGroupRows == 0 {
		c.RowGroupRows = 64 << 10
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid field at once.
func (c *Config) Validate() error {
	var errs []error
	if c.SegmentBlocks == 0 {
		errs = append(errs, errors.New("parquet: segment size must be at least 1 block"))
	}
	if c.To < c.From {
		errs = append(errs, fmt.Errorf("parquet: range end %d is below its start %d", c.To, c.From))
	}
	if c.RowGroupRows < 0 {
		errs = append(errs, fmt.Errorf("parquet: row group rows must be positive, got %d", c.RowGroupRows))
	}
	if err := errors.Join(errs...); err != nil {
		return fault.Mark(err, fault.Config)
	}
	return nil
}

// ForeignError is a destination that holds another chain's segments, or
// objects that are not segments: nothing is written there.
type ForeignError struct {
	Dest, Why string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("parquet: %s %s: give a new or empty destination, or one holding this chain's segments", e.Dest, e.Why)
}

// Fault marks a foreign destination as bad input.
func (e *ForeignError) Fault() fault.Class { return fault.Config }

// Segments returns the segments of [from, to] for a segment size: aligned
// to multiples of size, the first and last clipped to the range.
func Segments(from, to, size uint64) [][2]uint64 {
	var out [][2]uint64
	for s := from; ; {
		e := (s/size+1)*size - 1
		if e < s || e > to { // overflow, or the range ends first
			e = to
		}
		out = append(out, [2]uint64{s, e})
		if e == to {
			return out
		}
		s = e + 1
	}
}

// FileName is the path of table's file of segment [from, to]: heights
// zero-padded to 20 digits (every uint64), so that names sort by height in
// every listing and a glob takes them as they are.
func FileName(table string, from, to uint64) string {
	return fmt.Sprintf("%s/%020d-%020d.parquet", table, from, to)
}

// Check refuses a destination Write would refuse, before anything is
// written: a manifest of another chain or segment size, or objects that
// are not this decoder's segments. It returns the manifest, if any.
func Check(ctx context.Context, bucket *blob.Bucket, store *staging.Store, tables []chain.Table, cfg Config) (*Manifest, error) {
	id, ok := store.Identity()
	if !ok {
		return nil, fault.Mark(fmt.Errorf("parquet: staging %s holds no chain yet: fetch first", store.Dir()), fault.Config)
	}
	m, ok, err := ReadManifest(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if ok {
		switch {
		case m.Family != id.Family.String() || m.ChainID != id.ChainID:
			return nil, &ForeignError{Dest: cfg.Dest, Why: fmt.Sprintf("holds segments of %s chain %q, not %s chain %q", m.Family, m.ChainID, id.Family, id.ChainID)}
		case m.AnchorHash != "" && anchorDiffers(store, m):
			return nil, &ForeignError{Dest: cfg.Dest, Why: fmt.Sprintf("holds segments of a chain whose block %d is %s, which staging's is not", m.AnchorHeight, m.AnchorHash)}
		case m.SegmentBlocks != cfg.SegmentBlocks:
			return nil, fault.Mark(fmt.Errorf("parquet: %s holds segments of %d blocks, not %d: give --segment-blocks %d or another destination", cfg.Dest, m.SegmentBlocks, cfg.SegmentBlocks, m.SegmentBlocks), fault.Config)
		}
	}
	// Without a manifest, only files a killed first run left are welcome.
	names := map[string]bool{}
	for _, t := range tables {
		names[t.Name] = true
	}
	it := bucket.List(nil)
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parquet: list %s: %w", cfg.Dest, err)
		}
		if obj.Key == ManifestName || ours(obj.Key, names, m) {
			continue
		}
		return nil, &ForeignError{Dest: cfg.Dest, Why: fmt.Sprintf("is not empty and holds %s, which is not a segment of these tables", obj.Key)}
	}
	return m, nil
}

// unfinished tells whether key is a file a killed run was writing into a
// directory (OpenDir: NAME.parquet.<hex>.tmp, renamed when whole).
func unfinished(key string) bool {
	i := strings.Index(key, ".parquet.")
	return i > 0 && strings.HasSuffix(key, ".tmp")
}

// removeUnfinished deletes the files a killed run was writing. (Object
// stores show an upload only once it completes: there are none there.)
// One job writes a destination at a time.
func removeUnfinished(ctx context.Context, bucket *blob.Bucket) error {
	it := bucket.List(nil)
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("parquet: list: %w", err)
		}
		if unfinished(obj.Key) {
			if err := bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return fmt.Errorf("parquet: delete %s, a file a stopped run left unfinished: %w", obj.Key, err)
			}
		}
	}
}

// anchorDiffers tells whether staging holds the manifest's anchor block
// with another hash.
func anchorDiffers(store *staging.Store, m *Manifest) bool {
	h, _, err := store.Header(m.AnchorHeight)
	return err == nil && hex.EncodeToString(h) != m.AnchorHash
}

// ours tells whether key is a segment file name of one of the tables, or of
// a table the manifest lists (another selection of the decoder's tables).
func ours(key string, names map[string]bool, m *Manifest) bool {
	if unfinished(key) {
		key = key[:strings.Index(key, ".parquet.")+len(".parquet")]
	}
	table, file, ok := strings.Cut(key, "/")
	if !ok || !strings.HasSuffix(file, ".parquet") {
		return false
	}
	var from, to uint64
	if n, err := fmt.Sscanf(file, "%020d-%020d.parquet", &from, &to); err != nil || n != 2 || FileName(table, from, to) != key {
		return false
	}
	if names[table] {
		return true
	}
	if m != nil {
		for _, t := range m.Decoder.Tables {
			if t.Name == table {
				return true
			}
		}
	}
	return false
}

// Write writes the staged range [cfg.From, cfg.To] as Parquet segments into
// bucket: per segment one file per table of dec, then the segment's entry
// in the manifest. A segment the manifest lists as it would be written
// (same heights, hashes and shape, its files present) is left as it is.
// Files of the segments a new one replaces are deleted after the manifest
// that no longer names them is written.
//
// The files are the same bytes for the same staged blocks and options.
func Write(ctx context.Context, store *staging.Store, dec export.Decoder, bucket *blob.Bucket, cfg Config) (Result, error) {
	start := time.Now()
	cfg.ensureDefaults()
	res := Result{Rows: map[string]uint64{}}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	tables := dec.Tables()
	schemas := make([]*tableSchema, len(tables))
	for i, t := range tables {
		ts, err := newTableSchema(t)
		if err != nil {
			return res, fault.Mark(err, fault.Config)
		}
		schemas[i] = ts
		res.Rows[t.Name] = 0
	}
	if id, ok := store.Identity(); ok && id.Family != dec.Family() {
		return res, fault.Mark(fmt.Errorf("parquet: staging %s holds a %s chain, not %s", store.Dir(), id.Family, dec.Family()), fault.Config)
	}
	m, err := Check(ctx, bucket, store, tables, cfg)
	if err != nil {
		return res, err
	}
	shape := decoderShape(tables, cfg.Options)
	if m == nil {
		id, _ := store.Identity()
		m = &Manifest{Format: ManifestFormat, Family: id.Family.String(), ChainID: id.ChainID, SegmentBlocks: cfg.SegmentBlocks}
	}
	m.Decoder, m.Version = shape, cfg.Version
	if err := removeUnfinished(ctx, bucket); err != nil {
		return res, err
	}

	w := &writer{open: upload(bucket), store: store, dec: dec, bucket: bucket, cfg: &cfg, schemas: schemas, shape: shape.Shape, res: &res}
	for _, seg := range Segments(cfg.From, cfg.To, cfg.SegmentBlocks) {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if s, ok := w.written(ctx, m, seg[0], seg[1]); ok {
			res.Skipped++
			if cfg.OnSegment != nil {
				cfg.OnSegment(SegmentStats{Segment: s, Skipped: true})
			}
			continue
		}
		s, err := w.segment(ctx, seg[0], seg[1], prevHash(m, store, seg[0]))
		if err != nil {
			return res, err
		}
		if err := crashpoint.Hit(ctx, crashpoint.ParquetManifest); err != nil {
			return res, err
		}
		if m.AnchorHash == "" {
			h, _, err := store.Header(s.From)
			if err != nil {
				return res, err
			}
			m.AnchorHeight, m.AnchorHash = s.From, hex.EncodeToString(h)
		}
		stale := m.put(s)
		if err := writeManifest(ctx, bucket, m); err != nil {
			return res, err
		}
		res.Segments++
		for _, f := range s.Files {
			res.Bytes += f.Bytes
		}
		res.Blocks += s.To - s.From + 1
		for _, p := range stale {
			if err := bucket.Delete(ctx, p); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return res, fmt.Errorf("parquet: delete %s, a file of a replaced segment: %w", p, err)
			}
			res.Removed++
		}
		cfg.Logger.Info("segment written", "from", s.From, "to", s.To, "files", len(s.Files))
		if cfg.OnSegment != nil {
			cfg.OnSegment(SegmentStats{Segment: s})
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// prevHash is the hash block from's parent must have: the manifest's
// segment ending at from-1, or staging's block from-1.
func prevHash(m *Manifest, store *staging.Store, from uint64) []byte {
	if from == 0 {
		return nil
	}
	for _, s := range m.Segments {
		if s.To == from-1 {
			if b, err := hex.DecodeString(s.LastHash); err == nil {
				return b
			}
		}
	}
	if h, _, err := store.Header(from - 1); err == nil {
		return h
	}
	return nil
}

// put adds s to the manifest in height order, in place of every segment it
// overlaps, and returns the paths of their files that s does not reuse.
func (m *Manifest) put(s Segment) (stale []string) {
	keep := m.Segments[:0]
	for _, o := range m.Segments {
		if o.To < s.From || o.From > s.To {
			keep = append(keep, o)
			continue
		}
		for _, f := range o.Files {
			if !slices.ContainsFunc(s.Files, func(n File) bool { return n.Path == f.Path }) {
				stale = append(stale, f.Path)
			}
		}
	}
	m.Segments = append(keep, s)
	slices.SortFunc(m.Segments, func(a, b Segment) int { return compareU64(a.From, b.From) })
	return stale
}

// writer writes the segments of one Write.
type writer struct {
	// open opens a file of a segment: the upload to the bucket, or (verify)
	// a sink that keeps only its digest. Cancelling ctx before Close
	// aborts the upload.
	open func(ctx context.Context, path string) (io.WriteCloser, error)
	// remake: the segment is made again to compare (verify), not
	// written: no crash point is hit.
	remake  bool
	store   *staging.Store
	dec     export.Decoder
	bucket  *blob.Bucket
	cfg     *Config
	schemas []*tableSchema
	shape   string
	res     *Result
}

// written returns the manifest's entry for [from, to] when it is what
// writing the segment now would give: same heights and shape, the hashes
// staging holds at its ends, every file present at its size.
func (w *writer) written(ctx context.Context, m *Manifest, from, to uint64) (Segment, bool) {
	i := slices.IndexFunc(m.Segments, func(s Segment) bool { return s.From == from && s.To == to })
	if i < 0 {
		return Segment{}, false
	}
	s := m.Segments[i]
	if s.Shape != w.shape || len(s.Files) != len(w.schemas) {
		return s, false
	}
	if _, parent, err := w.store.Header(from); err != nil || hex.EncodeToString(parent) != s.ParentHash {
		return s, false
	}
	if last, _, err := w.store.Header(to); err != nil || hex.EncodeToString(last) != s.LastHash {
		return s, false
	}
	for _, f := range s.Files {
		a, err := w.bucket.Attributes(ctx, f.Path)
		if err != nil || a.Size != f.Bytes {
			return s, false
		}
	}
	return s, true
}

// upload opens files as uploads to bucket: an object appears whole when
// its writer is closed, or not at all.
func upload(bucket *blob.Bucket) func(ctx context.Context, path string) (io.WriteCloser, error) {
	return func(ctx context.Context, path string) (io.WriteCloser, error) {
		return bucket.NewWriter(ctx, path, &blob.WriterOptions{ContentType: "application/vnd.apache.parquet"})
	}
}

// tableFile is one table's file of the segment being written.
type tableFile struct {
	path string
	blob io.WriteCloser
	sum  hash.Hash
	n    int64 // bytes
	pw   *pq.Writer
	rows int64
	buf  []pq.Row
}

func (f *tableFile) Write(p []byte) (int, error) {
	n, err := f.blob.Write(p)
	f.sum.Write(p[:n])
	f.n += int64(n)
	return n, err
}

// segment writes the files of [from, to]; prev is the hash block from's
// parent must have (nil: not checked). On error nothing of the segment is
// left as a file: every upload not yet closed is aborted.
func (w *writer) segment(ctx context.Context, from, to uint64, prev []byte) (Segment, error) {
	sctx, abort := context.WithCancel(ctx)
	defer abort()
	_, parent, err := w.store.Header(from)
	if errors.Is(err, staging.ErrNotFound) {
		return Segment{}, &export.GapError{Height: from}
	}
	if err != nil {
		return Segment{}, err
	}
	files := make([]*tableFile, len(w.schemas))
	for i, ts := range w.schemas {
		f := &tableFile{path: FileName(ts.table.Name, from, to), sum: sha256.New()}
		f.blob, err = w.open(sctx, f.path)
		if err != nil {
			return Segment{}, fmt.Errorf("parquet: write %s: %w", f.path, err)
		}
		f.pw = pq.NewWriter(f, ts.schema,
			pq.Compression(&zstdFastest),
			pq.MaxRowsPerRowGroup(int64(w.cfg.RowGroupRows)),
			pq.CreatedBy("blockhaul", w.cfg.Version, ""),
			pq.DataPageStatistics(true),
		)
		files[i] = f
	}
	// Each file is closed once written whole; a failure aborts the rest.
	closed := 0
	defer func() {
		for _, f := range files[closed:] {
			if f != nil {
				abort()
				f.blob.Close()
			}
		}
	}()

	// A reader decodes the next batch while the tables of this one are
	// written, each table by a goroutine of its own; the batches are the
	// same whatever the timing, so the bytes are too.
	g, gctx := errgroup.WithContext(sctx)
	free := make(chan *chain.Rows, 2)
	for range 2 {
		free <- chain.NewRows(w.dec.Tables())
	}
	type decoded struct {
		d    export.Decoded
		rows *chain.Rows
	}
	batches := make(chan decoded)
	g.Go(func() error {
		defer close(batches)
		next, prevSrc := from, "the segment before"
		if prev == nil {
			prevSrc = ""
		}
		for next <= to {
			var rows *chain.Rows
			select {
			case rows = <-free:
			case <-gctx.Done():
				return gctx.Err()
			}
			end := min(next+batchBlocks-1, to)
			if end < next {
				end = to
			}
			d, err := export.ReadDecoded(w.store, w.dec, next, end, batchRows, prev, prevSrc, rows)
			if err != nil {
				return err
			}
			select {
			case batches <- decoded{d, rows}:
			case <-gctx.Done():
				return gctx.Err()
			}
			prev, prevSrc = d.LastHash, "staging"
			if next = d.To + 1; next == 0 {
				break
			}
		}
		return nil
	})
	var last []byte
	g.Go(func() error {
		for b := range batches {
			st := BatchStats{From: b.d.From, To: b.d.To, Rows: make([]int, len(files))}
			var tg errgroup.Group
			for i, f := range files {
				tr := b.rows.Table(i)
				st.Rows[i] = len(tr)
				if len(tr) == 0 {
					continue
				}
				tg.Go(func() error {
					for j := 0; j < len(tr); j += rowChunk {
						if err := f.write(w.schemas[i], tr[j:min(j+rowChunk, len(tr))]); err != nil {
							return err
						}
					}
					f.rows += int64(len(tr))
					return nil
				})
			}
			if err := tg.Wait(); err != nil {
				return err
			}
			for i, n := range st.Rows {
				w.res.Rows[w.schemas[i].table.Name] += uint64(n)
			}
			b.rows.Reuse() // written: parquet-go copied every value
			free <- b.rows
			last = b.d.LastHash
			if w.cfg.OnBatch != nil {
				w.cfg.OnBatch(st)
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return Segment{}, ctx.Err()
		}
		return Segment{}, err
	}
	seg := Segment{From: from, To: to, ParentHash: hex.EncodeToString(parent), LastHash: hex.EncodeToString(last),
		Shape: w.shape, Version: w.cfg.Version}
	for i, f := range files {
		if err := f.pw.Close(); err != nil {
			return Segment{}, fmt.Errorf("parquet: write %s: %w", f.path, err)
		}
		if err := f.blob.Close(); err != nil {
			closed = i + 1
			return Segment{}, fmt.Errorf("parquet: write %s: %w", f.path, err)
		}
		closed = i + 1
		seg.Files = append(seg.Files, File{Table: w.schemas[i].table.Name, Path: f.path, Rows: f.rows, Bytes: f.n, SHA256: hex.EncodeToString(f.sum.Sum(nil))})
		if w.remake {
			continue
		}
		if err := crashpoint.Hit(ctx, crashpoint.ParquetFile); err != nil {
			return Segment{}, err
		}
	}
	return seg, nil
}

// A segment is decoded in batches of at most batchBlocks blocks, ended
// early after the block that brings it to batchRows rows. They are not
// options: parquet-go ends a page after the WriteRows call that fills it,
// so the batches decide where pages end, and the same staging must give
// the same bytes whatever the flags (--batch-blocks is an export's).
const (
	batchBlocks = 500
	batchRows   = 100_000
)

// zstdFastest is zstd at its fastest level: the default level took 1.5
// times the CPU of this one for files 1% smaller (20,000 synthetic CometBFT
// blocks: 70.8 MB against 71.5 MB; docs/parquet.md).
var zstdFastest = zstd.Codec{Level: zstd.SpeedFastest}

// rowChunk is how many rows go to parquet-go in one WriteRows.
const rowChunk = 1024

// write converts rows into Parquet rows (their value slices reused from
// the last call) and writes them.
func (f *tableFile) write(ts *tableSchema, rows [][]any) error {
	if cap(f.buf) < len(rows) {
		f.buf = make([]pq.Row, 0, rowChunk)
	}
	f.buf = f.buf[:len(rows)]
	for j, row := range rows {
		r, err := ts.appendRow(f.buf[j][:0], row)
		if err != nil {
			return fault.Mark(&export.DecodeError{Height: rowHeight(row, ts.height), Err: err}, fault.Data)
		}
		f.buf[j] = r
	}
	if _, err := f.pw.WriteRows(f.buf); err != nil {
		return fmt.Errorf("parquet: write %s: %w", f.path, err)
	}
	return nil
}

func rowHeight(row []any, i int) uint64 {
	if x, ok := row[i].(int64); ok {
		return uint64(x)
	}
	return 0
}
