package chunked

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/klauspost/compress/zstd"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// SourceConfig configures a Source.
type SourceConfig struct {
	// URL is the archive: a chain's prefix (the folder holding
	// manifest.json) or a root holding one chain's, as a directory, a
	// gocloud.dev/blob URL (file://, s3://, gs://, azblob://) or plain
	// http(s):// (a public bucket; the chain's prefix, or its manifest.json).
	URL string
	// Family is the chain family's ID and Name; a manifest of another
	// family is refused.
	Family     chain.Family
	FamilyName string
	// Identity reads a raw record's block hash, parent hash and height
	// (the family's own reading, as its RPC source does).
	Identity func(raw []byte) (hash, parent []byte, height uint64, err error)
	// Ahead is how many chunks past the one being read are downloaded at
	// the same time (held compressed; only the chunk being read and the
	// next are held decompressed). Default 3.
	Ahead int
	// HTTPClient reads http(s):// archives. Default: http.DefaultClient.
	HTTPClient *http.Client
	// Attempts bounds the tries of one http(s) request. Default 5.
	Attempts int
	// Logger is told of each chunk read. Default: discard.
	Logger *slog.Logger
}

// Source reads the blocks of a published archive: it is a loader.Source
// (and a loader.RangeChecker). Each chunk is downloaded once and checked
// against the manifest's size and digest; the chunks after the one being
// read are downloaded meanwhile and held compressed, and a chunk is
// decompressed (and its records checked) when it is read, or when the one
// before it is, and kept until its heights are served. Safe for concurrent
// use; Close waits for its downloads.
type Source struct {
	cfg    SourceConfig
	shown  string // the URL, without credentials
	loadMu sync.Mutex
	m      *Manifest // nil until read
	objs   objects

	ctx    context.Context // the downloads ahead; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	cache map[int]*chunkEntry
	order []int // cache keys, oldest first
	// read marks the chunks whose every height was served: they are not
	// downloaded ahead again (only when asked for).
	read []bool
	// upTo is the highest height a CheckRange asked about (0: none): no
	// chunk above it is downloaded ahead.
	upTo uint64
}

// chunkEntry is one chunk being downloaded or held. Its goroutine
// downloads it, then waits until it is wanted (its records asked for) to
// decompress it, or until it is let go (gone) unwanted: downloads run
// ahead, but only the chunks being read are held decompressed (a chunk of
// 1,000 CometBFT blocks is ≈2.5 MB compressed, ≈25 MB not), which keeps
// the process under its heap limit beside the export.
type chunkEntry struct {
	wanted chan struct{} // closed by want, under Source.mu
	gone   chan struct{} // closed when let go, under Source.mu
	done   chan struct{} // closed when recs or err is set
	recs   []record
	err    error
	served int
}

// objects reads an archive's objects by name under its chain prefix.
type objects interface {
	ReadAll(ctx context.Context, name string) ([]byte, error)
	Close() error
}

// errNotFound is an object that is not there.
var errNotFound = errors.New("not found")

// RefusedError is an archive that cannot serve the job: no manifest, a
// manifest of another family, heights no chunk holds. It matches
// chain.ErrSourceRefused (exit 2), and names what it lacks before
// anything is staged.
type RefusedError struct{ URL, Reason string }

func (e *RefusedError) Error() string        { return fmt.Sprintf("archive %s: %s", e.URL, e.Reason) }
func (e *RefusedError) Is(target error) bool { return target == chain.ErrSourceRefused }

// Fault marks the error as configuration (exit 2).
func (e *RefusedError) Fault() fault.Class { return fault.Config }

// ChunkError is a chunk that is not what its manifest says: another
// digest or size, records that do not decode, or blocks other than the
// manifest's. It names the chunk; the job exits 4.
type ChunkError struct {
	URL, Name string
	Reason    string
}

func (e *ChunkError) Error() string {
	return fmt.Sprintf("archive %s: chunk %s: %s", e.URL, e.Name, e.Reason)
}

// Fault marks the error as data that is wrong (exit 4).
func (e *ChunkError) Fault() fault.Class { return fault.Data }

// New returns the source of the archive at cfg.URL. It contacts nothing:
// the manifest is read by the first call that needs it (ChainID, Tip,
// CheckRange, Fetch), and read again after a failure.
func New(cfg SourceConfig) (*Source, error) {
	if cfg.URL == "" {
		return nil, &RefusedError{URL: "(none)", Reason: "no archive URL"}
	}
	if cfg.Identity == nil {
		return nil, fmt.Errorf("archive: %s has no reading of its records' identity", cfg.FamilyName)
	}
	if cfg.Ahead <= 0 {
		cfg.Ahead = 3
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	sctx, cancel := context.WithCancel(context.Background())
	return &Source{cfg: cfg, shown: archive.RedactURL(cfg.URL), ctx: sctx, cancel: cancel, cache: map[int]*chunkEntry{}}, nil
}

// Open is New and the manifest read at once.
func Open(ctx context.Context, cfg SourceConfig) (*Source, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := s.manifest(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// manifest returns the archive's manifest, reading it the first time.
func (s *Source) manifest(ctx context.Context) (*Manifest, error) {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.m != nil {
		return s.m, nil
	}
	objs, err := openObjects(ctx, s.cfg)
	if err != nil {
		return nil, err
	}
	mb, err := objs.ReadAll(ctx, ManifestName)
	if err != nil {
		objs.Close()
		if errors.Is(err, errNotFound) {
			return nil, &RefusedError{URL: s.shown, Reason: "no " + ManifestName + ": not a published archive (publish writes it last)"}
		}
		return nil, fmt.Errorf("archive %s: read %s: %w", s.shown, ManifestName, err)
	}
	m, err := parseManifest(mb)
	if err == nil {
		err = m.check(s.cfg.FamilyName)
	}
	if err != nil {
		objs.Close()
		return nil, &RefusedError{URL: s.shown, Reason: "manifest: " + err.Error()}
	}
	if why := m.links(); why != "" {
		objs.Close()
		return nil, &ChunkError{URL: s.shown, Name: ManifestName, Reason: why}
	}
	s.m, s.objs = m, objs
	return m, nil
}

// Manifest returns the archive's manifest, reading it the first time.
func (s *Source) Manifest(ctx context.Context) (*Manifest, error) { return s.manifest(ctx) }

// Family is the chain family of the archive's blocks.
func (s *Source) Family() chain.Family { return s.cfg.Family }

// ChainID is the manifest's chain id.
func (s *Source) ChainID(ctx context.Context) (string, error) {
	m, err := s.manifest(ctx)
	if err != nil {
		return "", err
	}
	return m.ChainID, nil
}

// Tip is the last height of the archive's last chunk (0: none).
func (s *Source) Tip(ctx context.Context) (uint64, error) {
	if _, err := s.manifest(ctx); err != nil {
		return 0, err
	}
	if len(s.m.Chunks) == 0 {
		return 0, &RefusedError{URL: s.shown, Reason: "the manifest lists no chunk"}
	}
	return s.m.Chunks[len(s.m.Chunks)-1].To, nil
}

// CheckRange refuses a range some heights of which no chunk holds, listing
// every gap.
func (s *Source) CheckRange(ctx context.Context, from, to uint64) error {
	if _, err := s.manifest(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.upTo = max(s.upTo, to)
	s.mu.Unlock()
	gaps := s.m.Gaps(from, to)
	if len(gaps) == 0 {
		return nil
	}
	var n uint64
	list := make([]string, 0, len(gaps))
	for i, g := range gaps {
		n += g[1] - g[0] + 1
		if i < 20 {
			list = append(list, rangeString(g[0], g[1]))
		}
	}
	if len(gaps) > 20 {
		list = append(list, fmt.Sprintf("and %d more", len(gaps)-20))
	}
	return &RefusedError{URL: s.shown, Reason: fmt.Sprintf("no chunk holds %d heights of %d-%d, in %d gaps: %s", n, from, to, len(gaps), strings.Join(list, ", "))}
}

func rangeString(a, b uint64) string {
	if a == b {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d-%d", a, b)
}

// Fetch returns the blocks of from..to from the chunks that hold them.
func (s *Source) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if to < from {
		return nil, fmt.Errorf("archive: fetch: empty range %d-%d", from, to)
	}
	if _, err := s.manifest(ctx); err != nil {
		return nil, err
	}
	out := make([]chain.Block, 0, to-from+1)
	for h := from; h <= to; {
		i := s.chunkOf(h)
		if i < 0 {
			return nil, s.CheckRange(ctx, h, to)
		}
		c := s.m.Chunks[i]
		e, err := s.chunk(ctx, i)
		if err != nil {
			return nil, err
		}
		end := min(to, c.To)
		for _, r := range e.recs[h-c.From : end-c.From+1] {
			out = append(out, chain.Block{Height: r.Height, Hash: r.Hash, ParentHash: r.Parent, Raw: r.Raw})
		}
		s.served(i, e, int(end-h+1))
		h = end + 1
		if end == ^uint64(0) {
			break
		}
	}
	return out, nil
}

// Close stops the downloads ahead, waits for them and releases the archive.
func (s *Source) Close() {
	s.cancel()
	s.wg.Wait()
	if s.objs != nil {
		s.objs.Close()
	}
}

// chunkOf is the index of the chunk holding h, or -1.
func (s *Source) chunkOf(h uint64) int {
	cs := s.m.Chunks
	lo, hi := 0, len(cs)
	for lo < hi {
		mid := (lo + hi) / 2
		if cs[mid].To < h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(cs) && cs[lo].From <= h {
		return lo
	}
	return -1
}

// cacheCap bounds the chunks held: the ones being served and those ahead.
func (s *Source) cacheCap() int { return s.cfg.Ahead + 4 }

// chunk returns chunk i's records, downloading it (once, whoever asks)
// and starting the downloads of the chunks after it; the next chunk is
// decompressed meanwhile.
func (s *Source) chunk(ctx context.Context, i int) (*chunkEntry, error) {
	e := s.want(i)
	for j := i + 1; j <= i+s.cfg.Ahead && s.ahead(j); j++ {
		if j == i+1 {
			s.want(j)
		} else {
			s.start(j)
		}
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e, e.err
}

// ahead tells whether chunk j is worth downloading ahead: there is one,
// the job's range reaches it, and it was not read already.
func (s *Source) ahead(j int) bool {
	if j >= len(s.m.Chunks) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return (s.upTo == 0 || s.m.Chunks[j].From <= s.upTo) && (s.read == nil || !s.read[j])
}

// want starts chunk i (unless it is on its way) and asks for its records.
func (s *Source) want(i int) *chunkEntry {
	e := s.start(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-e.wanted:
	default:
		close(e.wanted)
	}
	return e
}

// start begins downloading chunk i unless it is held or on its way.
func (s *Source) start(i int) *chunkEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.cache[i]; e != nil {
		return e
	}
	e := &chunkEntry{wanted: make(chan struct{}), gone: make(chan struct{}), done: make(chan struct{})}
	s.cache[i] = e
	s.order = append(s.order, i)
	for len(s.order) > s.cacheCap() {
		s.dropLocked(s.order[0], s.cache[s.order[0]])
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(e.done)
		c := s.m.Chunks[i]
		z, err := s.download(s.ctx, c)
		if err == nil {
			select {
			case <-e.wanted:
			case <-e.gone:
				// Let go before anyone asked: unless it was asked for
				// first, nobody waits for it.
				select {
				case <-e.wanted:
				default:
					e.err = errors.New("archive: chunk let go unread")
					return
				}
			case <-s.ctx.Done():
				err = s.ctx.Err()
			}
		}
		if err == nil {
			e.recs, err = s.decode(z, c)
		}
		if e.err = err; err != nil {
			s.drop(i, e) // asked again, it is downloaded again
		}
	}()
	return e
}

// served notes that n heights of chunk i were served; a chunk whose every
// height was is let go.
func (s *Source) served(i int, e *chunkEntry, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.served += n; e.served >= len(e.recs) {
		if s.read == nil {
			s.read = make([]bool, len(s.m.Chunks))
		}
		s.read[i] = true
		s.dropLocked(i, e)
	}
}

func (s *Source) drop(i int, e *chunkEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(i, e)
}

func (s *Source) dropLocked(i int, e *chunkEntry) {
	if s.cache[i] != e {
		return
	}
	close(e.gone)
	delete(s.cache, i)
	for k, j := range s.order {
		if j == i {
			s.order = append(s.order[:k], s.order[k+1:]...)
			break
		}
	}
}

// download reads chunk c and checks its size and digest against the
// manifest.
func (s *Source) download(ctx context.Context, c Chunk) ([]byte, error) {
	z, err := s.objs.ReadAll(ctx, c.Name)
	if errors.Is(err, errNotFound) {
		return nil, s.bad(c, "missing: the manifest lists it, the archive does not hold it")
	}
	if err != nil {
		return nil, fmt.Errorf("archive %s: read chunk %s: %w", s.shown, c.Name, err)
	}
	if int64(len(z)) != c.Size {
		return nil, s.bad(c, "%d bytes, the manifest says %d (cut short or replaced)", len(z), c.Size)
	}
	if d := digest(z); d != c.SHA256 {
		return nil, s.bad(c, "SHA-256 %s, the manifest says %s", d, c.SHA256)
	}
	s.cfg.Logger.Debug("read chunk", "chunk", c.Name, "bytes", len(z))
	return z, nil
}

// decode decompresses chunk c's bytes z and checks them against the
// manifest (framing, its first block's parent and its first and last
// hashes, the links between its blocks, each record's height); it returns
// its records with their hashes.
func (s *Source) decode(z []byte, c Chunk) ([]record, error) {
	dec := decoders.Get().(*zstd.Decoder)
	defer func() {
		dec.Reset(nil) // lets z go
		decoders.Put(dec)
	}()
	if err := dec.Reset(bytes.NewReader(z)); err != nil {
		return nil, s.bad(c, "does not decompress: %v", err)
	}
	recs, err := readChunk(dec, c.From, c.To, c.RecordBytes)
	if err != nil {
		return nil, s.bad(c, "%v", err)
	}
	var prev []byte
	for k := range recs {
		r := &recs[k]
		hash, parent, height, err := s.cfg.Identity(r.Raw)
		if err == nil && height != r.Height {
			err = fmt.Errorf("the record framed as height %d is block %d", r.Height, height)
		}
		if err != nil {
			return nil, s.bad(c, "height %d: %v", r.Height, err)
		}
		switch {
		case k == 0 && !bytes.Equal(parent, c.ParentHash):
			return nil, s.bad(c, "block %d's parent hash %x is not the manifest's %x", r.Height, parent, []byte(c.ParentHash))
		case k == 0 && !bytes.Equal(hash, c.FirstHash):
			return nil, s.bad(c, "block %d's hash %x is not the manifest's first hash %x", r.Height, hash, []byte(c.FirstHash))
		case k > 0 && !bytes.Equal(parent, prev):
			return nil, s.bad(c, "block %d's parent hash %x is not the hash %x of block %d", r.Height, parent, prev, r.Height-1)
		}
		r.Hash, r.Parent = hash, parent
		prev = hash
	}
	if !bytes.Equal(prev, c.LastHash) {
		return nil, s.bad(c, "block %d's hash %x is not the manifest's last hash %x", c.To, prev, []byte(c.LastHash))
	}
	return recs, nil
}

// bad is a *ChunkError naming chunk c.
func (s *Source) bad(c Chunk, format string, args ...any) error {
	return &ChunkError{URL: s.shown, Name: c.Name, Reason: fmt.Sprintf(format, args...)}
}

// openObjects opens the archive's chain prefix: over http(s), the URL (or
// the folder of its manifest.json); elsewhere, the URL when it holds a
// manifest, else the one chain folder under it that does.
func openObjects(ctx context.Context, cfg SourceConfig) (objects, error) {
	shown := archive.RedactURL(cfg.URL)
	if l := strings.ToLower(cfg.URL); strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") {
		base, _, _ := strings.Cut(cfg.URL, "?")
		base = strings.TrimSuffix(strings.TrimSuffix(base, ManifestName), "/")
		return &httpObjects{base: base, shown: shown, client: cfg.HTTPClient, attempts: cfg.Attempts}, nil
	}
	b, err := archive.OpenBucket(ctx, cfg.URL, false)
	if err != nil {
		return nil, &RefusedError{URL: shown, Reason: err.Error()}
	}
	ok, err := b.Exists(ctx, ManifestName)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("archive %s: %w", shown, err)
	}
	if ok {
		return bucketObjects{b}, nil
	}
	chains, err := chainFolders(ctx, b, func(prefix string) (bool, error) {
		ok, err := b.Exists(ctx, prefix+ManifestName)
		return ok && err == nil, nil
	})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("archive %s: %w", shown, err)
	}
	switch len(chains) {
	case 0:
		b.Close()
		return nil, &RefusedError{URL: shown, Reason: "no " + ManifestName + " there nor in a chain's folder under it: not a published archive"}
	case 1:
		return bucketObjects{blob.PrefixedBucket(b, chains[0])}, nil
	}
	b.Close()
	return nil, &RefusedError{URL: shown, Reason: fmt.Sprintf("holds the archives of %d chains (%s): give the chain's folder", len(chains), strings.Join(chains, ", "))}
}

// bucketObjects reads a gocloud.dev/blob bucket.
type bucketObjects struct{ b *blob.Bucket }

func (o bucketObjects) ReadAll(ctx context.Context, name string) ([]byte, error) {
	v, err := o.b.ReadAll(ctx, name)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%s: %w", name, errNotFound)
	}
	return v, err
}

func (o bucketObjects) Close() error { return o.b.Close() }
