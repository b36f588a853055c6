package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/export/parquet"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/monitor"
	"github.com/blockhaul/blockhaul/staging"
	"gocloud.dev/blob"
)

// DefaultSegmentBlocks is the segment size of a family that names none
// (family.Family.SegmentBlocks).
const DefaultSegmentBlocks = 10_000

// validateParquet checks --parquet and --segment-blocks: run, export and
// follow write files in place of PostgreSQL; verify checks them.
func (c *Config) validateParquet() []*FieldError {
	var fs []*FieldError
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	if c.Parquet == "" {
		if c.SegmentBlocksSet {
			bad("segment-blocks", "sizes the segments of --parquet, which is not given")
		}
		return fs
	}
	switch c.Command {
	case CmdRun, CmdExport, CmdFollow:
		if c.PG != "" {
			bad("parquet", "writes the tables as files in place of PostgreSQL: give --pg or --parquet, not both (run the job once for each)")
		}
		if len(c.Replay) > 0 {
			bad("replay", "rewrites tables in PostgreSQL; a Parquet destination is written again by giving it the same range (changed segments are rewritten)")
		}
		if c.ExportStreams > 1 {
			bad("export-streams", "splits a PostgreSQL export; Parquet segments are written one after another")
		}
		if c.BackfillFromSet {
			bad("backfill-from", "follow --parquet writes segments from --from as they become final; a backfill beside it is for PostgreSQL")
		}
	case CmdVerify:
	default:
		bad("parquet", "is for run, export, follow (write files) and verify (check them), not %s", c.Command)
	}
	if c.SegmentBlocksSet && c.SegmentBlocks == 0 {
		bad("segment-blocks", "must be at least 1 block")
	}
	if strings.Contains(c.Parquet, "://") {
		if _, err := url.Parse(c.Parquet); err != nil {
			bad("parquet", "%q is not a directory or a URL: %v", archive.RedactURL(c.Parquet), err)
		}
	}
	return fs
}

// segmentBlocks is --segment-blocks, or the family's default.
func (c *Job) segmentBlocks() uint64 {
	if c.SegmentBlocksSet {
		return c.SegmentBlocks
	}
	if c.Family != nil && c.Family.SegmentBlocks > 0 {
		return c.Family.SegmentBlocks
	}
	return DefaultSegmentBlocks
}

// openParquetDest opens --parquet: a directory (made if missing) written
// without sidecar files, or a gocloud.dev/blob URL (file://, s3://, gs://,
// azblob://) through the same drivers and credentials as snapshot.
func openParquetDest(ctx context.Context, dest string, create bool) (*blob.Bucket, error) {
	var b *blob.Bucket
	var err error
	if !strings.Contains(dest, "://") {
		b, err = parquet.OpenDir(dest, create)
	} else {
		u, perr := url.Parse(dest)
		if perr == nil && strings.EqualFold(u.Scheme, "file") {
			q := u.Query()
			for k, v := range map[string]string{"metadata": "skip", "no_tmp_dir": "true", "create_dir": strconv.FormatBool(create)} {
				if q.Get(k) == "" {
					q.Set(k, v)
				}
			}
			u.RawQuery = q.Encode()
			dest = u.String()
		}
		b, err = archive.OpenBucket(ctx, dest, create)
	}
	if err != nil {
		return nil, fault.Mark(fmt.Errorf("--parquet %s: %w", archive.RedactURL(dest), err), fault.Config)
	}
	return b, nil
}

// checkWritable writes and removes a probe object: a destination that
// cannot be written is refused before any block is read.
func checkWritable(ctx context.Context, b *blob.Bucket, dest string) error {
	const probe = ".blockhaul-probe"
	err := b.WriteAll(ctx, probe, []byte("probe"), nil)
	if err == nil {
		err = b.Delete(ctx, probe)
	}
	if err != nil {
		return fault.Mark(fmt.Errorf("--parquet %s cannot be written: %w", archive.RedactURL(dest), err), fault.Config)
	}
	return nil
}

// decoderOptions are the flags that shape a decoder's rows, as the
// manifest records them.
func decoderOptions(cfg *Job) map[string]string {
	o := map[string]string{}
	if cfg.Tables != "" {
		o["tables"] = cfg.Tables
	}
	if e := cfg.EventEncoding.String(); cfg.EventEncoding != 0 {
		o["event-encoding"] = e
	}
	if len(cfg.Proto) > 0 {
		o["proto"] = strings.Join(cfg.Proto, ",")
	}
	if len(cfg.ProtoDescriptors) > 0 {
		o["proto-descriptors"] = strings.Join(cfg.ProtoDescriptors, ",")
	}
	if cfg.Bech32Prefix != "" {
		o["bech32-prefix"] = cfg.Bech32Prefix
	}
	if len(cfg.ABI) > 0 {
		o["abi"] = strings.Join(cfg.ABI, ",")
	}
	return o
}

// parquetJob is what run, export and follow with --parquet share: the
// destination opened and checked, the decoder, the writer's config.
type parquetJob struct {
	bucket *blob.Bucket
	dec    export.Decoder
	pcfg   parquet.Config
}

// openParquetJob opens and checks --parquet before anything is fetched or
// written: a destination that cannot be written, or that holds another
// chain's segments, or objects that are not segments, is refused.
func openParquetJob(ctx context.Context, cfg *Job, store *staging.Store, log *slog.Logger, c *counters) (*parquetJob, error) {
	dec, err := cfg.decoder()
	if err != nil {
		return nil, err
	}
	b, err := openParquetDest(ctx, cfg.Parquet, true)
	if err != nil {
		return nil, err
	}
	j := &parquetJob{bucket: b, dec: dec}
	j.pcfg = parquet.Config{
		Dest:          archive.RedactURL(cfg.Parquet),
		From:          cfg.From,
		To:            cfg.To,
		SegmentBlocks: cfg.segmentBlocks(),
		Options:       decoderOptions(cfg),
		Version:       cfg.Version,
		Logger:        log,
		OnBatch: func(b parquet.BatchStats) {
			c.m.Exported(b.From, b.To, b.Rows, 0, false)
		},
	}
	if _, ok := store.Identity(); ok {
		if _, err := parquet.Check(ctx, b, store, dec.Tables(), j.pcfg); err != nil {
			b.Close()
			return nil, err
		}
	}
	if err := checkWritable(ctx, b, cfg.Parquet); err != nil {
		b.Close()
		return nil, err
	}
	return j, nil
}

// write writes [from, to] and adds what it did to sum.
func (j *parquetJob) write(ctx context.Context, store *staging.Store, from, to uint64, sum *Summary, m *monitor.Monitor) error {
	pc := j.pcfg
	pc.From, pc.To = from, to
	m.ExportStream(from, to, from)
	res, err := parquet.Write(ctx, store, j.dec, j.bucket, pc)
	sum.Parquet.add(res)
	return err
}

// ParquetSummary is what a job with --parquet wrote.
type ParquetSummary struct {
	Dest     string
	Segments int // written
	Skipped  int // already there as they would be written
	Removed  int // files of replaced segments
	Bytes    int64
	Blocks   uint64
	Took     time.Duration
}

func (p *ParquetSummary) add(r parquet.Result) {
	p.Segments += r.Segments
	p.Skipped += r.Skipped
	p.Removed += r.Removed
	p.Bytes += r.Bytes
	p.Blocks += r.Blocks
	p.Took += r.Duration
}

func (p *ParquetSummary) write(out io.Writer) {
	if p == nil || p.Dest == "" {
		return
	}
	fmt.Fprintf(out, "  parquet: %s: %d segments written (%d blocks, %s), %d already there", p.Dest, p.Segments, p.Blocks, byteSize(p.Bytes), p.Skipped)
	if p.Removed > 0 {
		fmt.Fprintf(out, ", %d files of replaced segments removed", p.Removed)
	}
	fmt.Fprintln(out)
}

// runParquetJob runs export, run or follow with --parquet.
func runParquetJob(ctx context.Context, cfg *Job, store *staging.Store, tip func() uint64, log *slog.Logger, sum *Summary, c *counters) error {
	switch cfg.Command {
	case CmdExport:
		return runParquetExport(ctx, cfg, store, log, sum, c)
	case CmdRun:
		return runParquetRun(ctx, cfg, store, tip, log, sum, c)
	case CmdFollow:
		return runParquetFollow(ctx, cfg, store, tip, log, sum, c)
	}
	return fmt.Errorf("pipeline: %s does not write Parquet", cfg.Command)
}

// runParquetExport writes the staged range as Parquet segments: export
// --parquet. It never builds a source and never connects to PostgreSQL.
func runParquetExport(ctx context.Context, cfg *Job, store *staging.Store, log *slog.Logger, sum *Summary, c *counters) error {
	if err := checkDamage(cfg, store); err != nil {
		return err
	}
	if !cfg.ToSet {
		last, ok, err := store.ContiguousFrom(cfg.From, ^uint64(0))
		if err != nil {
			return err
		}
		if !ok {
			return &export.GapError{Height: cfg.From}
		}
		cfg = cfg.withRange(cfg.From, last)
	}
	sum.To = cfg.To
	c.m.SetRange(cfg.From, cfg.To)
	if err := checkStagedRange(cfg, store); err != nil {
		return err
	}
	j, err := openParquetJob(ctx, cfg, store, log, c)
	if err != nil {
		return err
	}
	defer j.bucket.Close()
	sum.Parquet = &ParquetSummary{Dest: archive.RedactURL(cfg.Parquet)}
	c.m.SetReady(true, "")
	if err := j.write(ctx, store, cfg.From, cfg.To, sum, c.m); err != nil {
		return err
	}
	sum.Complete = true
	return nil
}

// runParquetRun fetches the range into staging, then writes it as Parquet
// segments: run --parquet, without PostgreSQL.
func runParquetRun(ctx context.Context, cfg *Job, store *staging.Store, tip func() uint64, log *slog.Logger, sum *Summary, c *counters) error {
	// The destination is checked before anything is fetched.
	j, err := openParquetJob(ctx, cfg, store, log, c)
	if err != nil {
		return err
	}
	defer j.bucket.Close()
	if err := runFetch(ctx, cfg, store, tip, log, sum, c); err != nil {
		return err
	}
	if !sum.Complete {
		return nil
	}
	cfg = cfg.withRange(cfg.From, sum.To) // the end fetch resolved
	if _, err := parquet.Check(ctx, j.bucket, store, j.dec.Tables(), j.pcfg); err != nil {
		return err
	}
	sum.Complete = false
	sum.Parquet = &ParquetSummary{Dest: archive.RedactURL(cfg.Parquet)}
	if err := j.write(ctx, store, cfg.From, cfg.To, sum, c.m); err != nil {
		return err
	}
	sum.Complete = true
	return nil
}

// VerifyParquet checks --parquet against its manifest, and against
// --staging when that holds a store.
func VerifyParquet(ctx context.Context, cfg *Job, out io.Writer) error {
	b, err := openParquetDest(ctx, cfg.Parquet, false)
	if err != nil {
		return err
	}
	defer b.Close()
	vc := parquet.VerifyConfig{Dest: archive.RedactURL(cfg.Parquet), Options: decoderOptions(cfg), Version: cfg.Version}
	if cfg.Staging != "" && staging.HasStore(cfg.Staging) {
		store, err := staging.Open(cfg.Staging, staging.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer store.Close()
		if id, ok := store.Identity(); ok {
			var err error
			if cfg, err = cfg.withFamily(id.Family); err != nil {
				return err
			}
		}
		dec, err := cfg.decoder()
		if err != nil {
			return err
		}
		vc.Store, vc.Decoder = store, dec
	}
	rep, err := parquet.Verify(ctx, b, vc)
	return writeReport(out, cfg.JSON, parquetVerifyText{rep}, err)
}

type parquetVerifyText struct{ *parquet.VerifyReport }

func (r parquetVerifyText) WriteText(out io.Writer) {
	fmt.Fprintf(out, "parquet %s: %d segments, %d files, %d rows, %s\n", r.Dest, r.Segments, r.Files, r.Rows, byteSize(r.Bytes))
	if r.Rebuilt+r.Unrebuilt > 0 {
		fmt.Fprintf(out, "  against staging: %d segments made again and equal to their files", r.Rebuilt-countRebuiltBad(r.VerifyReport))
		if r.Unrebuilt > 0 {
			fmt.Fprintf(out, "; %d written by another version or with other options: their end hashes compared only", r.Unrebuilt)
		}
		fmt.Fprintln(out)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(out, "  PROBLEM %s\n", p)
	}
	for _, u := range r.Unlisted {
		fmt.Fprintf(out, "  not in the manifest: %s\n", u)
	}
	if len(r.Problems) == 0 {
		fmt.Fprintln(out, "  ok")
	}
}

// countRebuiltBad counts the segments whose files staging gives otherwise.
func countRebuiltBad(r *parquet.VerifyReport) int {
	seen := map[[2]uint64]bool{}
	for _, p := range r.Problems {
		if strings.HasPrefix(p.What, "staging gives") {
			seen[[2]uint64{p.From, p.To}] = true
		}
	}
	return len(seen)
}

// byteSize is n bytes for a reader: "512 B", "3.2 MB", "1.40 GB".
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// runParquetFollow follows the chain into staging and writes each segment
// once its last height is --confirmations below the tip (final), and, with
// --to, the last part-segment once --to is final. A signal stops it between
// segments or aborts the one being written (nothing of it is listed).
func runParquetFollow(ctx context.Context, cfg *Job, store *staging.Store, tip func() uint64, log *slog.Logger, sum *Summary, c *counters) error {
	j, err := openParquetJob(ctx, cfg, store, log, c)
	if err != nil {
		return err
	}
	defer j.bucket.Close()
	src, err := newSource(cfg, tip, log)
	if err != nil {
		return err
	}
	defer closeSource(src)
	sum.Parquet = &ParquetSummary{Dest: archive.RedactURL(cfg.Parquet)}
	sum.Export.Rows = map[string]uint64{}
	plog := demoteInfo(log)
	size := cfg.segmentBlocks()
	next := cfg.From // the first height not yet in a written segment
	for {
		if cfg.ToSet && next > cfg.To {
			sum.Complete = true
			return nil
		}
		tipH, err := src.Tip(ctx)
		if err != nil {
			return fmt.Errorf("read chain tip: %w", err)
		}
		final := uint64(0)
		if tipH >= cfg.Confirmations {
			final = tipH - cfg.Confirmations
		}
		if cfg.ToSet {
			final = min(final, cfg.To)
		}
		// The last height of the segments that are whole and final.
		end, ok := uint64(0), false
		if final >= next {
			for _, s := range parquet.Segments(next, final, size) {
				if (s[1]+1)%size == 0 || (cfg.ToSet && s[1] == cfg.To) {
					end, ok = s[1], true
				}
			}
		}
		if ok {
			st, err := loader.Fetch(ctx, src, store, next, end, loaderConfig(cfg, plog, c), nil)
			addFetch(&sum.Fetch, st)
			if err != nil {
				return err
			}
			if err := j.write(ctx, store, next, end, sum, c.m); err != nil {
				return err
			}
			next = end + 1
			continue
		}
		t := time.NewTimer(cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
