// Package staging is blockhaul's durable local copy of every raw block
// fetched: a Pebble store keyed by height whose values carry a small header
// (height, hash, parent hash, checksum) and the zstd-compressed raw record as
// the node sent it. Fetch writes it in any order; export reads it in height
// order and never needs the network.
//
// A Store is safe for concurrent use. Batches and iterators are not; each
// belongs to one goroutine and must be finished (Commit/Close) before the
// Store is closed.
package staging

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/klauspost/compress/zstd"
)

// ErrNotFound is returned when a height is not staged.
var ErrNotFound = errors.New("staging: block not found")

// Options configures a Store. The zero value is usable: EnsureDefaults fills
// every unset field.
type Options struct {
	// MemTableSize is Pebble's memtable size. Staging is a bulk, append-ordered
	// writer; a large memtable means fewer, larger L0 files, and more memory.
	// Default 16 MiB.
	MemTableSize uint64
	// CacheSize is Pebble's block cache. Scans read each block once, so a
	// large cache buys little. Default 8 MiB.
	CacheSize int64
	// Level is the zstd level for raw records. Default SpeedFastest (≈ zstd 1),
	// the sensible choice on few cores.
	Level zstd.EncoderLevel
	// MaxRecordSize caps the uncompressed size of one record when decoding, so
	// a corrupt header cannot ask for GiBs. Default 256 MiB.
	MaxRecordSize uint64
	// ReadOnly opens the store without write access (status, verify,
	// publish). Any number of read-only opens share a store, in one process
	// or several; none is let in beside a writer, nor a writer beside one
	// (an *InUseError). A read-only open writes nothing into the directory.
	ReadOnly bool
	// KeepDamage keeps records that cannot be read (and, for the export
	// engine, records that fail their checks) where a writer that can
	// fetch them again removes them: a command that only reads staging
	// (export) never deletes from it. Its errors name the damage and send
	// to repair.
	KeepDamage bool
	// Logger receives Pebble's background errors. Default: discard.
	Logger *slog.Logger
	// MinFreeBytes is the free-space reserve: a batch is refused with a
	// *NoSpaceError, before Pebble sees it, when committing it would leave
	// less free space than this on the store's filesystem (room for Pebble
	// to flush its memtable and finish a compaction). Small metadata writes
	// (identity, checkpoint mirrors, deletes) need half of it. Default
	// 64 MiB plus four memtables; negative disables the check.
	MinFreeBytes int64

	// fs replaces the filesystem (tests inject full disks with it).
	fs vfs.FS
}

// EnsureDefaults fills unset fields with their defaults.
func (o *Options) EnsureDefaults() {
	o.MemTableSize = cmp.Or(o.MemTableSize, 16<<20)
	o.CacheSize = cmp.Or(o.CacheSize, 8<<20)
	o.Level = cmp.Or(o.Level, zstd.SpeedFastest)
	o.MaxRecordSize = cmp.Or(o.MaxRecordSize, 256<<20)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.MinFreeBytes = cmp.Or(o.MinFreeBytes, 64<<20+4*int64(o.MemTableSize))
	if o.fs == nil {
		o.fs = vfs.Default
	}
}

// Store is an open staging store.
type Store struct {
	dir    string
	db     *pebble.DB
	lock   io.Closer // blockhaul's lock on dir (see lock.go), released after db closes
	opts   Options
	fs     vfs.FS
	faults *faults
	blobs  *blobPolicy
	enc    *zstd.Encoder // EncodeAll is safe for concurrent use
	dec    *zstd.Decoder // DecodeAll is safe for concurrent use

	closed atomic.Bool

	mu    sync.Mutex // guards ident
	ident Identity
	bound bool

	ledgerMu  sync.Mutex // guards records, durable, damage; see ledger.go
	records   uint64     // records staged: counted by Open, kept by commits and deletes
	high      uint64     // highest height staged (not lowered by deletes)
	ledgerOff bool       // Open could not count the records: keep the ledger as it is
	// indexHigh bounds the heights of the index from above: set by Open's
	// count, raised before each batch commits (never lowered), the
	// largest height when the count could not be made. A height above it
	// is not staged, which a batch knows without looking (mayBeStaged).
	indexHigh atomic.Uint64
	durable   ledger
	damage    *CorruptStoreError

	// held are the staged runs of a read-only store, walked once by Open
	// (nil when not kept: a store open for writing, or too many runs).
	held []Range
	// indexWalks counts the walks of the index keyspace (for tests: what
	// a read-only store answers from held costs none).
	indexWalks atomic.Int64

	droppedMu sync.Mutex           // guards dropped
	dropped   []*CorruptStoreError // unreadable runs this process removed; see DroppedAt
}

// Open opens (creating if needed) the staging store in dir.
func Open(dir string, opts Options) (_ *Store, err error) {
	opts.EnsureDefaults()
	if dir == "" {
		return nil, errors.New("staging: no directory given")
	}
	if opts.ReadOnly {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("staging: open %s: %w", dir, err)
		}
	}
	// Pebble would make a new, empty store beside the files of one whose
	// MANIFEST is gone, and delete them as obsolete.
	if err := checkManifest(dir); err != nil {
		return nil, err
	}
	// Pebble would write its LOCK into a directory that holds no store.
	if opts.ReadOnly && !HasStore(dir) {
		return nil, &NoStoreError{Dir: dir}
	}
	f := &faults{dir: dir, failed: make(chan struct{})}
	// A read-write open flushes what the WAL holds; on a full disk that
	// flush fails and is retried forever, so Open would never return.
	// Refuse it while there is room to say so (status opens read-only).
	pre := &Store{dir: dir, opts: opts, fs: opts.fs, faults: f}
	if !opts.ReadOnly {
		made, merr := mkdirAll(opts.fs, dir)
		if merr != nil {
			return nil, fmt.Errorf("staging: open %s: %w", dir, merr)
		}
		// An open that fails leaves nothing it made.
		defer func() {
			if err != nil && made != "" {
				opts.fs.RemoveAll(made)
			}
		}()
		if err := pre.reserve(0, true); err != nil {
			return nil, err
		}
	}
	lock, err := lockDir(dir, opts.ReadOnly)
	if err != nil {
		if lockRefused(err) {
			return nil, lockedBy(opts.fs, dir, err)
		}
		return nil, fmt.Errorf("staging: open %s: %w", dir, err)
	}
	defer func() {
		if lock != nil { // not handed to the Store
			lock.Close()
		}
	}()
	fs := vfs.FS(noPreallocFS{opts.fs})
	if opts.ReadOnly && sharedReaders {
		// Pebble's lock is a writer's alone; a writer of an older
		// blockhaul takes no other.
		if pid, held, _ := pebbleHolder(dir); held {
			return nil, &InUseError{Dir: dir, PID: pid, Err: &os.PathError{Op: "lock", Path: filepath.Join(dir, "LOCK"), Err: syscall.EAGAIN}}
		}
		fs = readerFS{fs}
	}
	defer pre.contain("open", false, &err)
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref()
	po := &pebble.Options{
		Cache:                 cache,
		MemTableSize:          opts.MemTableSize,
		FormatMajorVersion:    pebble.FormatNewest,
		L0CompactionThreshold: 4,
		L0StopWritesThreshold: 64,
		ReadOnly:              opts.ReadOnly,
		Logger:                pebbleLogger{opts.Logger, f},
		FS:                    fs,
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) {
				opts.Logger.Error("pebble background error", "component", "pebble", "err", err)
				f.backgroundError(err)
			},
			// A stall that does not end is how a flush that keeps failing
			// shows to the writer: say so when it starts.
			WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
				opts.Logger.Warn("pebble write stall", "component", "pebble", "dir", dir, "reason", info.Reason)
			},
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				opts.Logger.Error("pebble: on-disk corruption", "component", "pebble", "path", info.Path, "err", info.Details)
				f.dataCorruption(info)
			},
		},
	}
	// Values are already zstd; compressing them again costs CPU for nothing.
	// Every write first looks up the height's index key, which is usually
	// absent; a flush spans both keyspaces, so without filters that miss
	// would search every L0 table.
	for i := range po.Levels {
		po.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	po.TargetFileSizes[0] = 64 << 20
	// Records (kilobytes each) go to blob files at flush and stay there:
	// compactions move only keys and references. Without it every record is
	// rewritten at each level it passes, and ingest slows as the store grows
	// (measured at 100,000 CometBFT blocks: 21% less time, 44% less system
	// time, 10% instead of 22% more time per block than at 10,000; a full
	// scan no slower).
	//
	// A blob file's space comes back only when no sstable refers to it: a
	// prune that deletes some of the records in it leaves it whole, and one
	// compaction over many blob files (the reference depth) puts every
	// record of a store into one. Pebble rewrites a file's live records
	// into a new one when the store's garbage passes TargetGarbageRatio;
	// Prune lowers that target while it runs (blobs.reclaim), and
	// RewriteMinimumAge is 0 so that a store just fetched can be pruned too.
	// Staged records are written once, so without a prune or a repair
	// there is no garbage and nothing is rewritten.
	blobs := &blobPolicy{}
	po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           1 << 10,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     0,
			TargetGarbageRatio:    blobs.target(),
		}
	}
	po.EnsureDefaults()
	db, err := pebble.Open(dir, po)
	if err == nil {
		err = f.broken()
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		if lockRefused(err) {
			return nil, inUse(opts.fs, dir, err)
		}
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			return nil, &NoStoreError{Dir: dir}
		}
		if damagedOnOpen(err) {
			file, heights := f.corruption()
			if file == "" {
				file = pre.fileNamed(err)
			}
			return nil, &CorruptStoreError{Dir: dir, File: file, Heights: heights, Err: err}
		}
		return nil, fmt.Errorf("staging: open %s: %w", dir, err)
	}
	// The value's CRC-32C already covers the frame; zstd's own checksum
	// would hash every record a second time on both sides.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(opts.Level), zstd.WithEncoderCRC(false))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("staging: zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(opts.MaxRecordSize),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		enc.Close()
		db.Close()
		return nil, fmt.Errorf("staging: zstd decoder: %w", err)
	}
	s := &Store{dir: dir, db: db, lock: lock, opts: opts, fs: opts.fs, faults: f, blobs: blobs, enc: enc, dec: dec}
	s.indexHigh.Store(math.MaxUint64) // until openLedger counts
	// The lock is the Store's now: Close releases it.
	lock = nil
	if !opts.ReadOnly {
		s.writePID()
	}
	if id, ok, err := s.loadIdentity(); err != nil {
		s.Close()
		return nil, err
	} else if ok {
		s.ident, s.bound = id, true
	}
	if err := s.openLedger(); err != nil {
		s.Close()
		return nil, err
	}
	if d := s.Damage(); d != nil {
		opts.Logger.Error("staging: store damaged", "dir", dir, "err", d)
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close flushes and closes the store. Every batch and iterator must be
// finished first. A broken store (see BrokenStoreError) is not closed
// cleanly: its Pebble may be unable to, and Close must not hang; the
// process's exit releases what it holds.
func (s *Store) Close() (err error) {
	if s.closed.Swap(true) {
		return nil
	}
	s.enc.Close()
	s.dec.Close()
	if s.faults.isWedged() {
		return s.faults.broken() // the lock too stays held until the process exits
	}
	defer s.contain("close", true, &err)
	if err := s.faults.broken(); err != nil {
		s.db.Close()
		s.lock.Close()
		return err
	}
	// Sync and record what is staged while Pebble is open.
	lerr := s.syncLedger()
	if !s.opts.ReadOnly {
		s.removePID()
	}
	cerr := s.db.Close()
	s.lock.Close()
	if cerr != nil {
		return fmt.Errorf("staging: close: %w", s.corruptErr(cerr, nil))
	}
	if err := s.faults.broken(); err != nil {
		return err
	}
	return lerr
}

// Flush makes every committed batch durable (block data is written without
// sync; see Batch.Commit).
func (s *Store) Flush() (err error) {
	if err := s.faults.broken(); err != nil {
		return err
	}
	defer s.contain("sync", true, &err)
	if s.opts.ReadOnly {
		return nil
	}
	return s.syncLedger()
}

// Get returns the staged block at height h, decompressed and verified. A
// record that cannot be read is removed (see dropUnreadable): the error
// names it, and a fetch of the height stages it again.
func (s *Store) Get(h uint64) (chain.Block, error) {
	b, err := s.get(h)
	if err != nil && unreadable(err) {
		return chain.Block{}, s.dropUnreadable(h, err)
	}
	return b, err
}

func (s *Store) get(h uint64) (_ chain.Block, err error) {
	if err := s.faults.broken(); err != nil {
		return chain.Block{}, err
	}
	defer s.contain(fmt.Sprintf("get %d", h), false, &err)
	v, closer, err := s.db.Get(heightKey(prefixBlock, h))
	if errors.Is(err, pebble.ErrNotFound) {
		return chain.Block{}, fmt.Errorf("height %d: %w", h, ErrNotFound)
	}
	if err != nil {
		return chain.Block{}, fmt.Errorf("staging: get %d: %w", h, s.corruptErr(err, &h))
	}
	defer closer.Close()
	b, _, err := s.decodeValue(h, v, nil)
	var cr *CorruptRecordError
	if errors.As(err, &cr) && len(v) == 0 {
		// Pebble's Get loses the error of a blob value it could not read
		// and returns it empty; an iterator reports it, naming the file.
		if perr := s.readThroughIter(h); perr != nil {
			return chain.Block{}, perr
		}
	}
	return b, err
}

// readThroughIter reads the record at h with an iterator and returns the
// error Pebble reports, if any.
func (s *Store) readThroughIter(h uint64) (err error) {
	defer s.contain(fmt.Sprintf("get %d", h), false, &err)
	lo, hi := boundsFor(prefixBlock, h, h)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("staging: get %d: %w", h, s.corruptErr(err, &h))
	}
	defer it.Close()
	if it.First() {
		_, err = it.ValueAndErr()
	} else {
		err = it.Error()
	}
	if err != nil {
		return fmt.Errorf("staging: get %d: %w", h, s.corruptErr(err, &h))
	}
	return nil
}

// Header returns the hash and parent hash of the staged block at h from the
// index, without reading the record.
func (s *Store) Header(h uint64) (hash, parent []byte, err error) {
	if err := s.faults.broken(); err != nil {
		return nil, nil, err
	}
	defer s.contain(fmt.Sprintf("get index %d", h), false, &err)
	v, closer, err := s.db.Get(heightKey(prefixIndex, h))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil, fmt.Errorf("height %d: %w", h, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("staging: get index %d: %w", h, s.corruptErr(err, &h))
	}
	defer closer.Close()
	hash, parent, ok := parseIndexValue(v)
	if !ok {
		return nil, nil, &CorruptRecordError{Height: h, Reason: "index entry malformed"}
	}
	return bytes.Clone(hash), bytes.Clone(parent), nil
}

// Delete removes the blocks at heights [from, to] (record and index), e.g. a
// corrupt record so that fetch stages it again, or a reorged height.
func (s *Store) Delete(from, to uint64) (err error) {
	if err := s.faults.broken(); err != nil {
		return err
	}
	if err := s.reserve(1<<10, true); err != nil {
		return err
	}
	n, err := s.lowerLedger(from, to)
	if err != nil {
		return err
	}
	defer s.contain(fmt.Sprintf("delete %d-%d", from, to), true, &err)
	b := s.db.NewBatch()
	defer b.Close()
	lo, hi := boundsFor(prefixBlock, from, to)
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return err
	}
	lo, hi = boundsFor(prefixIndex, from, to)
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("staging: delete %d-%d: %w", from, to, err)
	}
	if err := s.faults.broken(); err != nil {
		return err
	}
	s.removedRecords(n)
	return nil
}

// decodeValue verifies and decompresses a staged value into dst (reused when
// large enough) and returns the block, whose Raw aliases dst.
func (s *Store) decodeValue(h uint64, v []byte, dst []byte) (chain.Block, Header, error) {
	return decodeRecord(s.dec, s.opts.MaxRecordSize, h, v, dst)
}

// decodeRecord is decodeValue with its decoder and size limit given.
func decodeRecord(dec *zstd.Decoder, maxSize uint64, h uint64, v []byte, dst []byte) (chain.Block, Header, error) {
	hdr, payload, err := parseValue(h, v)
	if err != nil {
		return chain.Block{}, hdr, err
	}
	if uint64(hdr.RawLen) > maxSize {
		return chain.Block{}, hdr, &CorruptRecordError{Height: h, Reason: fmt.Sprintf("raw length %d exceeds the %d-byte limit", hdr.RawLen, maxSize)}
	}
	if cap(dst) < int(hdr.RawLen) {
		dst = make([]byte, 0, hdr.RawLen+hdr.RawLen/4) // headroom for the next, larger one
	}
	raw, err := dec.DecodeAll(payload, dst[:0])
	if err != nil {
		return chain.Block{}, hdr, &CorruptRecordError{Height: h, Reason: "zstd: " + err.Error()}
	}
	if len(raw) != int(hdr.RawLen) {
		return chain.Block{}, hdr, &CorruptRecordError{Height: h, Reason: fmt.Sprintf("decompressed %d bytes, header says %d", len(raw), hdr.RawLen)}
	}
	return chain.Block{Height: h, Hash: bytes.Clone(hdr.Hash), ParentHash: bytes.Clone(hdr.ParentHash), Raw: raw}, hdr, nil
}
