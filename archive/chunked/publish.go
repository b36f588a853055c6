package chunked

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"
)

// PublishConfig configures Publish.
type PublishConfig struct {
	// Family is the chain family's name, written in the manifest.
	Family string
	// Genesis is the family's first height: the first chunk starts there.
	Genesis uint64
	// ChunkBlocks is the chunk size; 0: the archive's own, else
	// DefaultChunkBlocks. An archive with another size is refused.
	ChunkBlocks uint64
	// From and To bound the heights published (inclusive).
	From, To uint64
	// Shards and ShardIndex make this publish shard ShardIndex of Shards:
	// it writes its chunks and its manifest part, not the manifest.
	Shards, ShardIndex int
	// Verify, if set, recomputes each record's block hash (the family's
	// verifier) before it is published: a store is never trusted to hold
	// only sound records.
	Verify func(raw []byte) ([]byte, error)
	// Workers is how many chunks are built and uploaded at once. Default 4.
	Workers int
	// Dest names the destination in reports and errors (no credentials).
	Dest string
	// Logger is told of each chunk. Default: discard.
	Logger *slog.Logger
}

// Skipped is a range of staged heights Publish did not publish, and why.
type Skipped struct {
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Reason string `json:"reason"`
}

// PublishReport is what Publish did.
type PublishReport struct {
	Dest        string `json:"dest"`
	ChainID     string `json:"chain_id"`
	ChunkBlocks uint64 `json:"chunk_blocks"`
	// Published counts the chunks uploaded by this publish, Bytes their size.
	Published int   `json:"published"`
	Bytes     int64 `json:"bytes"`
	// Present counts the chunks already in the archive with the staged
	// blocks' hashes and their listed size: not uploaded again.
	Present int `json:"present"`
	// Replaced counts chunks found in the archive but not as listed (cut
	// short, other bytes, not listed yet): uploaded again.
	Replaced int `json:"replaced"`
	// Skipped are the staged heights of the range that make no full chunk.
	Skipped []Skipped `json:"skipped"`
	// Part is the manifest part written; Manifest tells whether the
	// manifest was (not by a shard), with Chunks chunks and Gaps between
	// them.
	Part     string        `json:"part"`
	Manifest bool          `json:"manifest"`
	Chunks   int           `json:"chunks"`
	Gaps     [][2]uint64   `json:"gaps"`
	Duration time.Duration `json:"duration_ns"`
}

// ArchiveMismatchError is a destination holding an archive this publish
// cannot add to: another family, chunk size or format.
type ArchiveMismatchError struct{ Dest, Reason string }

func (e *ArchiveMismatchError) Error() string {
	return fmt.Sprintf("archive: publish: %s: %s", e.Dest, e.Reason)
}

// Fault marks the error as a configuration error (exit 2).
func (e *ArchiveMismatchError) Fault() fault.Class { return fault.Config }

// BrokenLinkError is a chunk whose parent hash is not the last hash of
// the chunk before it, or a staged block whose parent hash is not the hash
// of the block before it: nothing of it is published.
type BrokenLinkError struct{ Reason string }

func (e *BrokenLinkError) Error() string { return "archive: publish: " + e.Reason }

// Fault marks the error as data that is wrong (exit 4).
func (e *BrokenLinkError) Fault() fault.Class { return fault.Data }

// partEvery is how many chunks a publish uploads between two writes of
// its manifest part: a killed publish uploads at most this many again.
const partEvery = 16

// Publish writes the full chunks of store's staged heights in
// cfg.From..cfg.To into bucket, under the prefix of the store's chain, and
// then its manifest part and (unless it is a shard) the manifest, merged
// from the earlier manifest, every part and this publish's chunks. Chunks
// already there as listed are not uploaded again. Publish takes bucket
// over: it is closed when Publish returns.
func Publish(ctx context.Context, store *staging.Store, bucket *blob.Bucket, cfg PublishConfig) (*PublishReport, error) {
	start := time.Now()
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	id, ok := store.Identity()
	if !ok {
		bucket.Close()
		return nil, fault.Errorf(fault.Config, "archive: publish: %s holds no chain yet: nothing to publish", store.Dir())
	}
	b := blob.PrefixedBucket(bucket, ChainPrefix(id.ChainID))
	defer b.Close()
	dest := cfg.Dest + "/" + ChainPrefix(id.ChainID)
	r := &PublishReport{Dest: dest, ChainID: id.ChainID, Skipped: []Skipped{}, Gaps: [][2]uint64{}}

	old, parts, err := readArchive(ctx, b, dest)
	if err != nil {
		return nil, err
	}
	size := cfg.ChunkBlocks
	for _, m := range append([]*Manifest{old}, parts...) {
		if m == nil {
			continue
		}
		if size == 0 {
			size = m.ChunkBlocks
		}
		var why string
		switch {
		case m.Family != cfg.Family || m.ChainID != id.ChainID:
			why = fmt.Sprintf("holds an archive of %s chain %q, the store %s chain %q", m.Family, m.ChainID, cfg.Family, id.ChainID)
		case m.ChunkBlocks != size:
			why = fmt.Sprintf("holds chunks of %d blocks, not %d: give --chunk-blocks %d (or another destination)", m.ChunkBlocks, size, m.ChunkBlocks)
		case m.Genesis != cfg.Genesis:
			why = fmt.Sprintf("holds chunks from height %d, not %d", m.Genesis, cfg.Genesis)
		}
		if why != "" {
			return nil, &ArchiveMismatchError{Dest: dest, Reason: why}
		}
	}
	if size == 0 {
		size = DefaultChunkBlocks
	}
	r.ChunkBlocks = size
	known := map[string]Chunk{}
	if old != nil {
		for _, c := range old.Chunks {
			known[c.Name] = c
		}
	}
	for _, p := range parts {
		for _, c := range p.Chunks {
			known[c.Name] = c
		}
	}

	// The full chunks of the staged runs.
	runs, err := store.Staged(cfg.From, cfg.To)
	if err != nil {
		return nil, err
	}
	var todo [][2]uint64
	for _, run := range runs {
		for h := run.From; h <= run.To; {
			lo, hi := chunkRange(h, size, cfg.Genesis)
			switch {
			case lo < run.From || lo < cfg.From:
				r.Skipped = append(r.Skipped, Skipped{h, min(hi, run.To), fmt.Sprintf("chunk %d-%d: heights %d-%d are not staged or not in the range", lo, hi, lo, h-1)})
			case hi > run.To || hi > cfg.To:
				r.Skipped = append(r.Skipped, Skipped{h, min(hi, run.To), fmt.Sprintf("chunk %d-%d: heights %d-%d are not staged or not in the range", lo, hi, min(hi, run.To)+1, hi)})
			default:
				todo = append(todo, [2]uint64{lo, hi})
			}
			if hi >= run.To {
				break
			}
			h = hi + 1
		}
	}

	part := &Manifest{Format: Format, Encoding: Encoding, Family: cfg.Family, ChainID: id.ChainID, ChunkBlocks: size, Genesis: cfg.Genesis}
	r.Part = PartName(cfg.Shards, cfg.ShardIndex)
	var mu sync.Mutex
	sincePart := 0
	writePart := func(ctx context.Context) error {
		p := *part
		p.Chunks = append([]Chunk(nil), part.Chunks...)
		sortChunks(p.Chunks)
		p.Updated = time.Now().UTC()
		return writeJSON(ctx, b, r.Part, &p)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Workers)
	for _, c := range todo {
		g.Go(func() error {
			lo, hi := c[0], c[1]
			name := ChunkName(lo, hi)
			ch, state, err := publishChunk(gctx, store, b, known[name], lo, hi, cfg.Verify)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			part.Chunks = append(part.Chunks, ch)
			switch state {
			case chunkPresent:
				r.Present++
				return nil
			case chunkReplaced:
				r.Replaced++
			}
			r.Published++
			r.Bytes += ch.Size
			cfg.Logger.Debug("published chunk", "chunk", name, "bytes", ch.Size)
			if sincePart++; sincePart >= partEvery {
				sincePart = 0
				return writePart(gctx)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		// What was uploaded is listed, so that the next publish skips it.
		if len(part.Chunks) > 0 {
			if perr := writePart(context.WithoutCancel(ctx)); perr != nil {
				cfg.Logger.Warn("archive: the manifest part of the chunks uploaded is not written", "err", perr)
			}
		}
		return r, err
	}
	if err := writePart(ctx); err != nil {
		return r, err
	}
	if cfg.Shards > 0 {
		r.Chunks = len(part.Chunks)
		r.Duration = time.Since(start)
		return r, nil
	}

	// The manifest: the earlier one, every part (this one last, so that
	// what this publish wrote wins), checked for links, written last.
	m, err := writeMerged(ctx, b, dest, part, old, append(parts, part))
	if err != nil {
		return r, err
	}
	r.Manifest = true
	r.Chunks, r.Gaps = len(m.Chunks), m.gapList()
	r.Duration = time.Since(start)
	return r, nil
}

// writeMerged writes the manifest of the chunks of old (nil: none) and of
// parts, a later part's listing of a chunk winning over an earlier one's,
// with head's family, chain, size and genesis, after checking it and its
// links; it returns what it wrote.
func writeMerged(ctx context.Context, b *blob.Bucket, dest string, head *Manifest, old *Manifest, parts []*Manifest) (*Manifest, error) {
	merged := map[string]Chunk{}
	for _, p := range append([]*Manifest{old}, parts...) {
		if p == nil {
			continue
		}
		for _, c := range p.Chunks {
			merged[c.Name] = c
		}
	}
	m := Manifest{Format: Format, Encoding: Encoding, Family: head.Family, ChainID: head.ChainID, ChunkBlocks: head.ChunkBlocks, Genesis: head.Genesis, Updated: time.Now().UTC()}
	for _, c := range merged {
		m.Chunks = append(m.Chunks, c)
	}
	sortChunks(m.Chunks)
	if err := m.check(head.Family); err != nil {
		return nil, &BrokenLinkError{Reason: fmt.Sprintf("the merged manifest of %s: %v", dest, err)}
	}
	if why := m.links(); why != "" {
		return nil, &BrokenLinkError{Reason: fmt.Sprintf("%s: %s: the manifest is not written", dest, why)}
	}
	if err := writeJSON(ctx, b, ManifestName, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// gapList is the gaps between m's first and last chunk, never nil.
func (m *Manifest) gapList() [][2]uint64 {
	if len(m.Chunks) == 0 {
		return [][2]uint64{}
	}
	return append([][2]uint64{}, m.Gaps(m.Chunks[0].From, m.Chunks[len(m.Chunks)-1].To)...)
}

// MergeReport is what Merge did.
type MergeReport struct {
	Dest    string `json:"dest"`
	ChainID string `json:"chain_id"`
	// Parts are the manifest parts merged, by name under the chain's
	// folder; Earlier tells whether a manifest was there already (its
	// chunks are kept).
	Parts       []string      `json:"parts"`
	Earlier     bool          `json:"earlier_manifest"`
	ChunkBlocks uint64        `json:"chunk_blocks"`
	Chunks      int           `json:"chunks"`
	Gaps        [][2]uint64   `json:"gaps"`
	Duration    time.Duration `json:"duration_ns"`
}

// Merge writes the manifest of the archive at bucket from its manifest
// parts (the shards' of sharded publishes, each listing the chunks it
// uploaded) and its earlier manifest, if any: what a publish without
// shards does after its own chunks, with no staging store: the archive is
// all it reads. bucket is the chain's folder (it holds parts/ or
// manifest.json) or a folder holding one chain's. Merge takes bucket
// over: it is closed when Merge returns.
func Merge(ctx context.Context, bucket *blob.Bucket, dest string) (*MergeReport, error) {
	start := time.Now()
	b, prefix, err := chainFolder(ctx, bucket, dest)
	if err != nil {
		bucket.Close()
		return nil, err
	}
	defer b.Close()
	dest += "/" + prefix
	old, parts, names, err := readArchiveNamed(ctx, b, dest)
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, &ArchiveMismatchError{Dest: dest, Reason: "no manifest part under " + partDir + ": nothing to merge (a publish writes its part once it has uploaded its chunks)"}
	}
	head := parts[0]
	for i, m := range append([]*Manifest{old}, parts...) {
		if m == nil {
			continue
		}
		name := ManifestName
		if i > 0 {
			name = names[i-1]
		}
		var why string
		switch {
		case m.Family != head.Family || m.ChainID != head.ChainID:
			why = fmt.Sprintf("%s is of %s chain %q, %s of %s chain %q", name, m.Family, m.ChainID, names[0], head.Family, head.ChainID)
		case m.ChunkBlocks != head.ChunkBlocks:
			why = fmt.Sprintf("%s lists chunks of %d blocks, %s of %d", name, m.ChunkBlocks, names[0], head.ChunkBlocks)
		case m.Genesis != head.Genesis:
			why = fmt.Sprintf("%s lists chunks from height %d, %s from %d", name, m.Genesis, names[0], head.Genesis)
		}
		if why != "" {
			return nil, &ArchiveMismatchError{Dest: dest, Reason: why}
		}
	}
	m, err := writeMerged(ctx, b, dest, head, old, parts)
	if err != nil {
		return nil, err
	}
	return &MergeReport{Dest: dest, ChainID: m.ChainID, Parts: names, Earlier: old != nil, ChunkBlocks: m.ChunkBlocks,
		Chunks: len(m.Chunks), Gaps: m.gapList(), Duration: time.Since(start)}, nil
}

// chainFolders lists the folders right under b for which holds is true.
func chainFolders(ctx context.Context, b *blob.Bucket, holds func(prefix string) (bool, error)) ([]string, error) {
	var out []string
	it := b.List(&blob.ListOptions{Delimiter: "/"})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		if !o.IsDir {
			continue
		}
		if ok, err := holds(o.Key); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Key, err)
		} else if ok {
			out = append(out, o.Key)
		}
	}
}

// chainFolder returns the chain's folder of an archive location: bucket
// itself when it holds a manifest or parts, else the one folder under it
// that does (named by its prefix).
func chainFolder(ctx context.Context, bucket *blob.Bucket, dest string) (*blob.Bucket, string, error) {
	holds := func(prefix string) (bool, error) {
		if ok, err := bucket.Exists(ctx, prefix+ManifestName); err != nil || ok {
			return ok, err
		}
		it := bucket.List(&blob.ListOptions{Prefix: prefix + partDir})
		_, err := it.Next(ctx)
		if err == io.EOF {
			return false, nil
		}
		return err == nil, err
	}
	if ok, err := holds(""); err != nil {
		return nil, "", fmt.Errorf("archive: %s: %w", dest, err)
	} else if ok {
		return blob.PrefixedBucket(bucket, ""), "", nil
	}
	chains, err := chainFolders(ctx, bucket, holds)
	if err != nil {
		return nil, "", fmt.Errorf("archive: %s: %w", dest, err)
	}
	switch len(chains) {
	case 0:
		return nil, "", &ArchiveMismatchError{Dest: dest, Reason: "no " + ManifestName + " nor " + partDir + " there nor in a chain's folder under it: nothing to merge"}
	case 1:
		return blob.PrefixedBucket(bucket, chains[0]), chains[0], nil
	}
	return nil, "", &ArchiveMismatchError{Dest: dest, Reason: fmt.Sprintf("holds the archives of %d chains (%s): give the chain's folder", len(chains), strings.Join(chains, ", "))}
}

type chunkState int

const (
	chunkUploaded chunkState = iota // new
	chunkPresent                    // there as listed: not uploaded
	chunkReplaced                   // there, not as listed: uploaded again
)

// publishChunk publishes the chunk lo..hi: when listed (was.Name set) with
// the staged blocks' first and last hashes and its object has the listed
// size, it is left; otherwise it is built from the store (each record
// verified, each parent link checked) and uploaded.
func publishChunk(ctx context.Context, store *staging.Store, b *blob.Bucket, was Chunk, lo, hi uint64, verify func([]byte) ([]byte, error)) (Chunk, chunkState, error) {
	name := ChunkName(lo, hi)
	state := chunkUploaded
	attrs, err := b.Attributes(ctx, name)
	switch {
	case err == nil:
		state = chunkReplaced
		if was.Name == name && attrs.Size == was.Size {
			first, _, ferr := store.Header(lo)
			last, _, lerr := store.Header(hi)
			if ferr == nil && lerr == nil && bytes.Equal(first, was.FirstHash) && bytes.Equal(last, was.LastHash) {
				return was, chunkPresent, nil
			}
		}
	case gcerrors.Code(err) != gcerrors.NotFound:
		return Chunk{}, 0, fmt.Errorf("archive: publish: look up %s: %w", name, err)
	}
	it, err := store.Scan(lo, hi)
	if err != nil {
		return Chunk{}, 0, err
	}
	defer it.Close()
	it.ReuseBuffer()
	var buf []byte
	c := Chunk{From: lo, To: hi, Name: name}
	next := lo
	for it.Next() {
		blk := it.Block()
		if blk.Height != next {
			return Chunk{}, 0, fmt.Errorf("archive: publish: chunk %s: height %d is no longer staged", name, next)
		}
		if verify != nil {
			got, err := verify(blk.Raw)
			if err != nil {
				return Chunk{}, 0, fault.Errorf(fault.Data, "archive: publish: staged block %d does not verify: %w", blk.Height, err)
			}
			if !bytes.Equal(got, blk.Hash) {
				return Chunk{}, 0, fault.Errorf(fault.Data, "archive: publish: staged block %d hashes to %x, staged as %x", blk.Height, got, blk.Hash)
			}
		}
		if blk.Height == lo {
			c.ParentHash = append([]byte(nil), blk.ParentHash...)
			c.FirstHash = append([]byte(nil), blk.Hash...)
		} else if !bytes.Equal(blk.ParentHash, c.LastHash) {
			return Chunk{}, 0, &BrokenLinkError{Reason: fmt.Sprintf("staged block %d's parent hash %x is not the hash %x of block %d", blk.Height, blk.ParentHash, []byte(c.LastHash), blk.Height-1)}
		}
		c.LastHash = append(c.LastHash[:0], blk.Hash...)
		buf = appendFrame(buf, blk.Height, blk.Raw)
		next++
		if err := ctx.Err(); err != nil {
			return Chunk{}, 0, err
		}
	}
	if err := it.Err(); err != nil {
		return Chunk{}, 0, err
	}
	if next != hi+1 {
		return Chunk{}, 0, fmt.Errorf("archive: publish: chunk %s: height %d is no longer staged", name, next)
	}
	c.RecordBytes = int64(len(buf))
	z := encoder.EncodeAll(buf, make([]byte, 0, len(buf)/4))
	c.Size, c.SHA256 = int64(len(z)), digest(z)
	if err := b.WriteAll(ctx, name, z, nil); err != nil {
		return Chunk{}, 0, fmt.Errorf("archive: publish: upload %s: %w", name, err)
	}
	return c, state, nil
}

// readArchive reads what a chain's prefix holds already: its manifest (nil:
// none) and every manifest part.
func readArchive(ctx context.Context, b *blob.Bucket, dest string) (*Manifest, []*Manifest, error) {
	old, parts, _, err := readArchiveNamed(ctx, b, dest)
	return old, parts, err
}

// readArchiveNamed is readArchive, with the parts' names.
func readArchiveNamed(ctx context.Context, b *blob.Bucket, dest string) (*Manifest, []*Manifest, []string, error) {
	old, err := readManifest(ctx, b, ManifestName, dest)
	if err != nil {
		return nil, nil, nil, err
	}
	var parts []*Manifest
	var names []string
	it := b.List(&blob.ListOptions{Prefix: partDir})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("archive: list %s%s: %w", dest, partDir, err)
		}
		if o.IsDir || !strings.HasSuffix(o.Key, ".json") {
			continue
		}
		p, err := readManifest(ctx, b, o.Key, dest)
		if err != nil {
			return nil, nil, nil, err
		}
		if p != nil {
			parts = append(parts, p)
			names = append(names, o.Key)
		}
	}
	return old, parts, names, nil
}

// readManifest reads the manifest (or part) name; nil when there is none.
func readManifest(ctx context.Context, b *blob.Bucket, name, dest string) (*Manifest, error) {
	mb, err := b.ReadAll(ctx, name)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("archive: read %s%s: %w", dest, name, err)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, &ArchiveMismatchError{Dest: dest, Reason: fmt.Sprintf("%s is not an archive manifest: %v", name, err)}
	}
	if err := m.check(""); err != nil {
		return nil, &ArchiveMismatchError{Dest: dest, Reason: fmt.Sprintf("%s: %v", name, err)}
	}
	return &m, nil
}

func writeJSON(ctx context.Context, b *blob.Bucket, name string, v any) error {
	j, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	if err := b.WriteAll(ctx, name, append(j, '\n'), nil); err != nil {
		return fmt.Errorf("archive: write %s: %w", name, err)
	}
	return nil
}
