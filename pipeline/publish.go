package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/archive/chunked"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/staging"
)

// validateArchiveSource checks --archive against the other flags: one
// source at a time, a family that has the kind, a command that ends.
func (c *Config) validateArchiveSource(fam *family.Family) []*FieldError {
	var fs []*FieldError
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	if c.Command == CmdPublish && c.ChunkBlocks > chunked.MaxChunkBlocks {
		bad("chunk-blocks", "want 1 to %d blocks a chunk (0: the archive's own, else %d), got %d", chunked.MaxChunkBlocks, chunked.DefaultChunkBlocks, c.ChunkBlocks)
	}
	if c.MergeParts {
		for _, f := range []struct {
			flag  string
			given bool
		}{{"shards", c.Shards > 0}, {"from", c.FromSet}, {"to", c.ToSet}, {"chunk-blocks", c.ChunkBlocks > 0}} {
			if f.given {
				bad(f.flag, "publish --merge-parts merges the manifest parts DEST holds, publishing nothing of a store: not with --%s", f.flag)
			}
		}
	}
	if c.Archive == "" {
		return fs
	}
	if len(c.RPC) > 0 {
		bad("archive", "--archive and --rpc name two sources; give one")
	}
	if c.NodeHome != "" {
		bad("archive", "--archive and --node-home name two sources; give one")
	}
	if fam != nil && !fam.Has(family.SourceArchive) {
		_, err := fam.Source(family.SourceArchive, family.SourceOptions{}) // names the kinds it has
		bad("archive", "%v", err)
	}
	if c.Command == CmdFollow {
		bad("archive", "follow waits for new blocks, and a published archive gets none: fetch or run its range")
	}
	return fs
}

// sourceFirst is the kind and options of a source opened before the
// staging store (openNodeHome): --node-home or --archive.
func (c *Config) sourceFirst() (family.SourceKind, family.SourceOptions) {
	if c.Archive != "" {
		return family.SourceArchive, family.SourceOptions{Archive: c.Archive}
	}
	return family.SourceNodeHome, family.SourceOptions{NodeHome: c.NodeHome, Verify: c.VerifyBlocks}
}

// Publish writes the full chunks of --staging's staged heights (--from,
// --to) to the archive at DEST (archive/chunked), then the manifest part
// and, unless it is a shard (--shards), the manifest.
func Publish(ctx context.Context, cfg *Job, out io.Writer, log *slog.Logger) error {
	dest := cfg.Args[0]
	if cfg.MergeParts {
		return mergeParts(ctx, cfg, dest, out)
	}
	if err := needStore("staging", cfg.Staging); err != nil {
		return err
	}
	store, err := staging.Open(cfg.Staging, staging.Options{ReadOnly: true, Logger: log})
	if held := (*staging.InUseError)(nil); errors.As(err, &held) {
		return &ConfigError{Fields: []*FieldError{{Flag: "staging", Env: EnvName("staging"), Msg: fmt.Sprintf("%v: publish reads a store no job holds (stop the job, or publish a snapshot of it restored elsewhere)", err)}}}
	}
	if err != nil {
		return err
	}
	defer store.Close()
	id, ok := store.Identity()
	held, ferr := cfg.withFamily(id.Family)
	if !ok || ferr != nil {
		return &ConfigError{Fields: []*FieldError{{Flag: "staging", Env: EnvName("staging"), Msg: fmt.Sprintf("%s holds no chain yet: nothing to publish", cfg.Staging)}}}
	}
	fam := held.Family
	bucket, err := archive.OpenBucket(ctx, dest, true)
	if err != nil {
		return &ConfigError{Fields: []*FieldError{{Arg: "DEST", Msg: fmt.Sprintf("%s: %v", archive.RedactURL(dest), err)}}}
	}
	from, to, _ := cfg.archiveRange()
	pcfg := chunked.PublishConfig{
		Family: fam.Name, Genesis: fam.Genesis, ChunkBlocks: cfg.ChunkBlocks,
		From: from, To: to, Verify: fam.Verifier(cfg.VerifyBlocks),
		Dest: strings.TrimSuffix(archive.RedactURL(dest), "/"), Logger: log,
	}
	if cfg.Shards > 0 {
		pcfg.Shards, pcfg.ShardIndex = cfg.Shards, cfg.ShardIndex
	}
	r, err := chunked.Publish(ctx, store, bucket, pcfg)
	if r == nil {
		return err
	}
	return writeReport(out, cfg.JSON, publishText{r, cfg.Staging, err != nil}, err)
}

// publishText is publish's report as text (as JSON: the report's own
// fields); failed leaves out the manifest line of a publish that failed.
type publishText struct {
	*chunked.PublishReport
	staging string
	failed  bool
}

func (p publishText) WriteText(out io.Writer) {
	r := p.PublishReport
	fmt.Fprintf(out, "publish of %s to %s: chunks of %d blocks: %s uploaded (%.1f MB), %s already there",
		p.staging, r.Dest, r.ChunkBlocks, archive.Quantity(r.Published, "chunk"), float64(r.Bytes)/1e6, archive.Quantity(r.Present, "chunk"))
	if r.Replaced > 0 {
		fmt.Fprintf(out, " (%s found not as listed, uploaded again)", archive.Quantity(r.Replaced, "chunk"))
	}
	fmt.Fprintf(out, ", in %.1fs\n", r.Duration.Seconds())
	for i, s := range r.Skipped {
		if i == 10 {
			fmt.Fprintf(out, "  … and %d more ranges not published\n", len(r.Skipped)-10)
			break
		}
		fmt.Fprintf(out, "  not published: staged heights %d-%d (%s)\n", s.From, s.To, s.Reason)
	}
	switch {
	case p.failed:
	case r.Manifest:
		fmt.Fprintf(out, "  manifest: %s, %s between them\n", archive.Quantity(r.Chunks, "chunk"), archive.Quantity(len(r.Gaps), "gap"))
	default:
		fmt.Fprintf(out, "  manifest part %s written (%s); the manifest is written by a publish without --shards once every shard is done\n", r.Part, archive.Quantity(r.Chunks, "chunk"))
	}
}

// mergeParts writes the manifest of the archive at DEST from the manifest
// parts under it (publish --shards writes one per shard) and its earlier
// manifest: publish --merge-parts, which reads no staging store.
func mergeParts(ctx context.Context, cfg *Job, dest string, out io.Writer) error {
	bucket, err := archive.OpenBucket(ctx, dest, false)
	if err != nil {
		return &ConfigError{Fields: []*FieldError{{Arg: "DEST", Msg: fmt.Sprintf("%s: %v", archive.RedactURL(dest), err)}}}
	}
	r, err := chunked.Merge(ctx, bucket, strings.TrimSuffix(archive.RedactURL(dest), "/"))
	if r == nil {
		return err
	}
	return writeReport(out, cfg.JSON, mergeText{r}, err)
}

// mergeText is publish --merge-parts's report as text.
type mergeText struct{ *chunked.MergeReport }

func (m mergeText) WriteText(out io.Writer) {
	r := m.MergeReport
	earlier := ""
	if r.Earlier {
		earlier = " and the earlier manifest"
	}
	fmt.Fprintf(out, "merge of %s at %s%s: manifest: %s of %d blocks, %s between them\n",
		archive.Quantity(len(r.Parts), "manifest part"), r.Dest, earlier, archive.Quantity(r.Chunks, "chunk"), r.ChunkBlocks, archive.Quantity(len(r.Gaps), "gap"))
	for i, g := range r.Gaps {
		if i == 10 {
			fmt.Fprintf(out, "  … and %d more gaps\n", len(r.Gaps)-10)
			break
		}
		fmt.Fprintf(out, "  gap: %d-%d (no part lists a chunk of it)\n", g[0], g[1])
	}
}
