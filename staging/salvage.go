package staging

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
	"github.com/klauspost/compress/zstd"
)

// A store whose MANIFEST is damaged or gone cannot be opened by Pebble (or
// opens without the tables the lost part named), yet its tables, blob files
// and WAL still hold the records. FileStore reads them straight from those
// files, without the MANIFEST: every table (.sst) and WAL (.log) of the
// directory is read, each version of each key kept with its sequence
// number, and the newest version of a key wins unless a newer point or
// range deletion covers it, as Pebble itself would resolve them. Values
// separated into blob files are found without the MANIFEST's map from a
// table's blob references to blob files: each reference is tried against
// the blob files and kept where the value read back passes the record's own
// checks (its CRC-32C names its height). Nothing of the directory is
// written.
//
// Limits: a file the MANIFEST no longer named but Pebble had not deleted yet
// (an obsolete table or WAL) is read like the others, so a record deleted
// before the damage can come back when the tombstone that deleted it was
// compacted away; a record that comes back is still a verified record of
// the store's chain. Range keys and merges are not read (staging writes
// none).

// SalvageRecord is one record read from a store's files: its block
// (decompressed) and the value exactly as it was staged.
type SalvageRecord struct {
	Block   chain.Block
	Encoded Encoded
}

// FileDamage is a file FileStore could not read in full, and why.
type FileDamage struct {
	File string `json:"file"`
	Err  string `json:"error"`
}

// FileStore is a staging store's files read without Pebble's MANIFEST. It
// is not safe for concurrent use.
type FileStore struct {
	dir  string
	fs   vfs.FS
	dec  *zstd.Decoder
	max  uint64
	ctx  context.Context
	blob *blobReaders

	tables  []*salvageTable
	blobs   []uint64 // blob file numbers, ascending
	firsts  map[uint64]uint64
	blocks  map[uint64]entry // newest version of each record key, by height
	index   map[uint64]entry // newest version of each index key (no value)
	others  map[string]entry // newest version of every other key (identity, mirrors)
	tombs   []tombstone
	cover   cover // tombs, flattened for lookups
	damaged []FileDamage
}

type salvageTable struct {
	num  uint64
	name string
	r    *sstable.Reader
	refs map[blob.ReferenceID]uint64 // resolved blob file numbers
	miss map[blob.ReferenceID]int    // failed resolutions
}

// entry is one version of a key. Its value is inline (val) or in a blob file
// (table's reference ref at block/value).
type entry struct {
	seq    uint64
	kind   pebble.InternalKeyKind
	val    []byte
	table  int32 // index into tables; -1 for the WAL
	isBlob bool
	ref    blob.ReferenceID
	len    uint32
	block  blob.BlockID
	value  blob.BlockValueID
}

type tombstone struct {
	start, end []byte
	seq        uint64
}

// OpenFiles reads the keys of every table and WAL of the store in dir (but
// not yet the records' values: see Records). Files that cannot be read, or
// read only in part, are listed by Damaged; OpenFiles fails only when the
// directory itself cannot be read.
func OpenFiles(dir string, opts Options) (_ *FileStore, err error) {
	opts.EnsureDefaults()
	names, err := opts.fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("staging: salvage %s: %w", dir, err)
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(opts.MaxRecordSize),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil, fmt.Errorf("staging: zstd decoder: %w", err)
	}
	f := &FileStore{dir: dir, fs: opts.fs, dec: dec, max: opts.MaxRecordSize, ctx: context.Background(),
		firsts: map[uint64]uint64{}, blocks: map[uint64]entry{}, index: map[uint64]entry{}, others: map[string]entry{}}
	if f.blob, err = newBlobReaders(f); err != nil {
		dec.Close()
		return nil, err
	}
	slices.Sort(names)
	var tables []uint64
	for _, n := range names {
		if num, ok := fileNum(n, ".sst"); ok {
			tables = append(tables, num)
		} else if num, ok := fileNum(n, ".blob"); ok {
			f.blobs = append(f.blobs, num)
		}
	}
	slices.Sort(tables)
	slices.Sort(f.blobs)
	for _, num := range tables {
		f.readTable(num)
	}
	f.readWAL()
	f.cover = newCover(f.tombs)
	for _, num := range f.blobs {
		f.indexBlob(num)
	}
	return f, nil
}

func fileNum(name, ext string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, ext)
	if !ok || base == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 10, 64)
	return n, err == nil
}

func tableName(num uint64) string { return fmt.Sprintf("%06d.sst", num) }
func blobName(num uint64) string  { return fmt.Sprintf("%06d.blob", num) }

func (f *FileStore) damage(file string, err error) {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	f.damaged = append(f.damaged, FileDamage{File: file, Err: msg})
}

// guard runs fn, turning a Pebble panic (a reader meeting bytes it cannot
// make sense of) into an error.
func guard(op string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pebble panicked in %s: %v", op, r)
		}
	}()
	return fn()
}

// newer reports whether e replaces old as a key's version: a higher
// sequence number, or the same one read from a later table (a key moved to
// the bottom level has its sequence number zeroed, in the newer file). A
// WAL entry of the same sequence number as a table's is the same write,
// already flushed: the table's is kept.
func newer(e, old entry) bool {
	return e.seq > old.seq || e.seq == old.seq && e.table >= 0
}

// add keeps e as key's version if it is newer than the one kept (see
// newer). An inline value is copied only then.
func (f *FileStore) add(key []byte, e entry) {
	keep := func(old entry, ok bool) bool {
		if ok && !newer(e, old) {
			return false
		}
		e.val = bytes.Clone(e.val)
		return true
	}
	if len(key) == 9 && key[0] == prefixBlock {
		h := keyHeight(key)
		if old, ok := f.blocks[h]; keep(old, ok) {
			f.blocks[h] = e
		}
		return
	}
	if len(key) == 9 && key[0] == prefixIndex {
		// The index is rebuilt from the records; its keys say which
		// heights were staged where a record's own key is unreadable.
		h := keyHeight(key)
		if old, ok := f.index[h]; !ok || newer(e, old) {
			e.val = nil
			f.index[h] = e
		}
		return
	}
	if len(key) == 0 || (key[0] != prefixIdent && key[0] != prefixMirror && key[0] != prefixTrust) {
		return
	}
	if old, ok := f.others[string(key)]; keep(old, ok) {
		f.others[string(key)] = e
	}
}

// readTable reads the keys of one table, its inline values and its blob
// handles, and its range deletions. Where a data block cannot be read, the
// rest of the table is found by seeking past it.
func (f *FileStore) readTable(num uint64) {
	name := tableName(num)
	var r *sstable.Reader
	err := guard("open "+name, func() error {
		file, err := f.fs.Open(f.fs.PathJoin(f.dir, name))
		if err != nil {
			return err
		}
		readable, err := sstable.NewSimpleReadable(file)
		if err != nil {
			file.Close()
			return err
		}
		r, err = sstable.NewReader(f.ctx, readable, sstable.ReaderOptions{})
		if err != nil {
			readable.Close()
		}
		return err
	})
	if err != nil {
		f.damage(name, err)
		return
	}
	t := &salvageTable{num: num, name: name, r: r, refs: map[blob.ReferenceID]uint64{}, miss: map[blob.ReferenceID]int{}}
	idx := int32(len(f.tables))
	f.tables = append(f.tables, t)

	if err := guard("read range deletions of "+name, func() error {
		it, err := r.NewRawRangeDelIter(f.ctx, sstable.NoFragmentTransforms, sstable.NoReadEnv)
		if err != nil || it == nil {
			return err
		}
		defer it.Close()
		s, err := it.First()
		for ; s != nil; s, err = it.Next() {
			for _, k := range s.Keys {
				if k.Kind() == pebble.InternalKeyKindRangeDelete {
					f.tombs = append(f.tombs, tombstone{start: bytes.Clone(s.Start), end: bytes.Clone(s.End), seq: uint64(k.SeqNum())})
				}
			}
		}
		return err
	}); err != nil {
		f.damage(name, fmt.Errorf("range deletions: %w", err))
	}

	var seek []byte // nil: from the first key
	var reported bool
	for {
		last, err := f.scanTable(t, idx, seek)
		if err == nil {
			return
		}
		if !reported {
			f.damage(name, err)
			reported = true
		}
		from := seek
		if last != nil {
			from = last
		}
		if seek = f.resumePast(t, from); seek == nil {
			return
		}
	}
}

// handleSink receives the blob handle of the key an iterator is on (see
// capture).
type handleSink struct {
	set    bool
	ref    blob.ReferenceID
	len    uint32
	suffix blob.HandleSuffix
}

// capture wraps the debug blob-handle hook of a table iterator so that the
// handle of each separated value is recorded rather than fetched: the
// MANIFEST's map from the table's references to blob files is not there to
// fetch it with. Generic so that the hook's result type, internal to
// Pebble, need not be named.
func capture[V any](debugFn func(blob.InlineHandlePreface, []byte) V, sink *handleSink) func(blob.InlineHandlePreface, []byte) V {
	return func(p blob.InlineHandlePreface, rest []byte) V {
		sink.set, sink.ref, sink.len, sink.suffix = true, p.ReferenceID, p.ValueLen, blob.DecodeHandleSuffix(rest)
		return debugFn(p, rest)
	}
}

// scanTable reads t's point keys from seek (or the first), and returns the
// last key read and the error that stopped it, if any.
func (f *FileStore) scanTable(t *salvageTable, idx int32, seek []byte) (last []byte, err error) {
	err = guard("read "+t.name, func() error {
		var sink handleSink
		bc := sstable.DebugHandlesBlobContext
		bc.BlobHandleFn = capture(bc.BlobHandleFn, &sink)
		it, err := t.r.NewIter(sstable.NoTransforms, nil, nil, bc)
		if err != nil {
			return err
		}
		defer it.Close()
		kv := it.SeekGE(seek, 0) // nil: the first key
		for kv != nil {
			key := kv.K.UserKey
			e := entry{seq: uint64(kv.K.SeqNum()), kind: kv.K.Kind(), table: idx}
			switch {
			case e.kind == pebble.InternalKeyKindSet || e.kind == pebble.InternalKeyKindSetWithDelete:
				e.kind = pebble.InternalKeyKindSet
				if sink.set {
					e.isBlob, e.ref, e.len, e.block, e.value = true, sink.ref, sink.len, sink.suffix.BlockID, sink.suffix.ValueID
				} else {
					v, _, err := kv.Value(nil)
					if err != nil {
						return err
					}
					e.val = v // copied by add when kept
				}
			case e.kind == pebble.InternalKeyKindDelete || e.kind == pebble.InternalKeyKindSingleDelete || e.kind == pebble.InternalKeyKindDeleteSized:
				e.kind = pebble.InternalKeyKindDelete
			default:
				e.kind = 0 // not a kind staging writes: ignored
			}
			if e.kind != 0 {
				f.add(key, e)
			}
			last = append(last[:0], key...)
			sink.set = false
			kv = it.Next()
		}
		return it.Error()
	})
	return last, err
}

// resumePast finds where reading t can go on after a failure past key from
// (nil: at the table's start): the first height key past the unreadable
// block, found by galloping and bisection (a seek into the bad block fails,
// one past it does not), or the start of a later keyspace. It returns nil
// when nothing readable is left.
func (f *FileStore) resumePast(t *salvageTable, from []byte) []byte {
	seeks := func(k []byte) bool {
		return guard("seek "+t.name, func() error {
			it, err := t.r.NewIter(sstable.NoTransforms, nil, nil, sstable.DebugHandlesBlobContext)
			if err != nil {
				return err
			}
			defer it.Close()
			it.SeekGE(k, 0)
			return it.Error()
		}) == nil
	}
	// gallop returns the first key of prefix p above height h that a seek
	// reaches without error.
	gallop := func(p byte, h uint64) []byte {
		ok := func(d uint64) bool { return h+d > h && seeks(heightKey(p, h+d)) }
		lo, hi := uint64(0), uint64(1) // the key at lo fails; hi is probed
		for hi < 1<<40 && !ok(hi) {
			if h+hi*2 <= h {
				return nil
			}
			lo, hi = hi, hi*2
		}
		if hi >= 1<<40 {
			return nil
		}
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if ok(mid) {
				hi = mid
			} else {
				lo = mid
			}
		}
		return heightKey(p, h+hi)
	}
	isHeight := func(p byte) bool { return p == prefixBlock || p == prefixIndex }
	if len(from) == 9 && isHeight(from[0]) {
		if k := gallop(from[0], keyHeight(from)); k != nil {
			return k
		}
	}
	for _, p := range []byte{prefixBlock, prefixIndex, prefixIdent, prefixMirror, prefixTrust} {
		if from != nil && p <= from[0] {
			continue
		}
		if k := []byte{p}; seeks(k) {
			return k
		}
		if !isHeight(p) {
			continue
		}
		if k := heightKey(p, 0); seeks(k) {
			return k
		}
		if k := gallop(p, 0); k != nil {
			return k
		}
	}
	return nil
}

// readWAL replays every batch of every WAL file.
func (f *FileStore) readWAL() {
	logs, err := wal.Scan(wal.Dir{FS: f.fs, Dirname: f.dir})
	if err != nil {
		f.damage("WAL", err)
		return
	}
	for _, ll := range logs {
		name := ll.String()
		if n, path := ll.NumSegments(), ""; n > 0 {
			_, path = ll.SegmentLocation(n - 1)
			name = f.fs.PathBase(path)
		}
		if err := guard("read "+name, func() error { return f.replayLog(ll) }); err != nil {
			f.damage(name, err)
		}
	}
}

func (f *FileStore) replayLog(ll wal.LogicalLog) error {
	r := ll.OpenForRead()
	defer r.Close()
	for {
		rec, _, err := r.NextRecord()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		repr, err := io.ReadAll(rec)
		if err != nil {
			return err
		}
		h, ok := batchrepr.ReadHeader(repr)
		if !ok {
			return fmt.Errorf("a batch of %d bytes is shorter than its header", len(repr))
		}
		seq := uint64(h.SeqNum)
		br := batchrepr.Read(repr)
		for {
			kind, ukey, value, ok, err := br.Next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			switch kind {
			case pebble.InternalKeyKindLogData:
				continue // takes no sequence number
			case pebble.InternalKeyKindSet, pebble.InternalKeyKindSetWithDelete:
				f.add(ukey, entry{seq: seq, kind: pebble.InternalKeyKindSet, val: value, table: -1})
			case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindDeleteSized:
				f.add(ukey, entry{seq: seq, kind: pebble.InternalKeyKindDelete, table: -1})
			case pebble.InternalKeyKindRangeDelete:
				f.tombs = append(f.tombs, tombstone{start: bytes.Clone(ukey), end: bytes.Clone(value), seq: seq})
			}
			seq++
		}
	}
}

// indexBlob records the height of a blob file's first record, so that a
// table's references are tried first against the blob files that can
// hold them.
func (f *FileStore) indexBlob(num uint64) {
	v, err := f.blob.fetch(num, 0, 0)
	if err != nil {
		f.damage(blobName(num), err)
		return
	}
	if len(v) >= fixedHeaderLen && v[0] == FormatVersion {
		h := binary.BigEndian.Uint64(v[2:10])
		if _, _, err := parseValue(h, v); err == nil {
			f.firsts[num] = h
		}
	}
}

// Damaged lists the files OpenFiles could not read in full, and why. A
// record whose value cannot be read is reported by Records.
func (f *FileStore) Damaged() []FileDamage { return slices.Clone(f.damaged) }

// live reports whether e, the newest version of key, is a value that no
// newer range deletion covers.
func (f *FileStore) live(key []byte, e entry) bool {
	if e.kind != pebble.InternalKeyKindSet {
		return false
	}
	seq, ok := f.cover.at(key)
	return !ok || seq <= e.seq
}

// cover is the range deletions read, flattened: the key space cut at
// every deletion's bounds, each piece [bounds[i], bounds[i+1]) with the
// highest sequence number of the deletions covering it (has[i] when any
// does), so that a key is looked up in O(log n) however many deletions
// the files hold (a follow that met many reorgs holds many).
type cover struct {
	bounds [][]byte
	seq    []uint64
	has    []bool
}

func newCover(ts []tombstone) cover {
	var c cover
	for _, t := range ts {
		if bytes.Compare(t.start, t.end) < 0 {
			c.bounds = append(c.bounds, t.start, t.end)
		}
	}
	slices.SortFunc(c.bounds, bytes.Compare)
	c.bounds = slices.CompactFunc(c.bounds, bytes.Equal)
	c.seq = make([]uint64, len(c.bounds))
	c.has = make([]bool, len(c.bounds))
	for _, t := range ts {
		if bytes.Compare(t.start, t.end) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(c.bounds, t.start, bytes.Compare)
		j, _ := slices.BinarySearchFunc(c.bounds, t.end, bytes.Compare)
		for k := i; k < j; k++ {
			if !c.has[k] || t.seq > c.seq[k] {
				c.seq[k], c.has[k] = t.seq, true
			}
		}
	}
	return c
}

// at returns the highest sequence number of the deletions covering key.
func (c cover) at(key []byte) (uint64, bool) {
	// The piece starting at the last bound <= key.
	i := sort.Search(len(c.bounds), func(i int) bool { return bytes.Compare(c.bounds[i], key) > 0 }) - 1
	if i < 0 || i >= len(c.bounds)-1 || !c.has[i] {
		return 0, false
	}
	return c.seq[i], true
}

// value reads e's value: inline, or from the blob file its table's
// reference resolves to (h is the record's height, which a value read from
// the right blob file names in its checked header; 0 for other keys).
func (f *FileStore) value(e entry, h uint64, isRecord bool) ([]byte, error) {
	if !e.isBlob {
		return e.val, nil
	}
	t := f.tables[e.table]
	if num, ok := t.refs[e.ref]; ok {
		v, err := f.blob.fetch(num, e.block, e.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", blobName(num), err)
		}
		if len(v) != int(e.len) {
			return nil, fmt.Errorf("%s: value of %d bytes, the table says %d", blobName(num), len(v), e.len)
		}
		return v, nil
	}
	if !isRecord {
		// A value that is not a record (the chain of trust's checkpoint is
		// large enough to be separated) carries no height to check it by:
		// the first blob file that gives back a value of its length is
		// taken, without resolving the reference for the records. Its
		// reader checks it (the trust checkpoint must hash to the next
		// header's validators when proving resumes from it).
		for _, num := range f.blobs {
			if v, err := f.blob.fetch(num, e.block, e.value); err == nil && len(v) == int(e.len) {
				return v, nil
			}
		}
		return nil, fmt.Errorf("%s: blob reference %d not resolved", t.name, e.ref)
	}
	// A reference is resolved by the first record whose value one blob
	// file gives back whole; a reference that fails for several records is
	// given up (its blob file is gone or unreadable).
	if t.miss[e.ref] >= 8 {
		return nil, fmt.Errorf("%s: no blob file holds the values of its reference %d", t.name, e.ref)
	}
	for _, num := range f.candidates(h) {
		v, err := f.blob.fetch(num, e.block, e.value)
		if err != nil || len(v) != int(e.len) {
			continue
		}
		if _, _, err := parseValue(h, v); err == nil {
			t.refs[e.ref] = num
			return v, nil
		}
	}
	t.miss[e.ref]++
	return nil, fmt.Errorf("%s: no blob file holds the value of height %d (reference %d)", t.name, h, e.ref)
}

// candidates orders the blob files for a record at height h: those whose
// first record is at or below h, nearest first, then the others.
func (f *FileStore) candidates(h uint64) []uint64 {
	out := slices.Clone(f.blobs)
	sort.SliceStable(out, func(i, j int) bool {
		fi, iok := f.firsts[out[i]]
		fj, jok := f.firsts[out[j]]
		iok, jok = iok && fi <= h, jok && fj <= h
		switch {
		case iok && jok:
			return fi > fj
		case iok != jok:
			return iok
		}
		return out[i] > out[j]
	})
	return out
}

// Identity returns the identity the files record, if any.
func (f *FileStore) Identity() (Identity, bool) {
	e, ok := f.others[string(identKey)]
	if !ok || !f.live(identKey, e) {
		return Identity{}, false
	}
	v, err := f.value(e, 0, false)
	if err != nil {
		return Identity{}, false
	}
	var id Identity
	if json.Unmarshal(v, &id) != nil {
		return Identity{}, false
	}
	return id, true
}

// Trust returns the chain of trust's checkpoint the files record, if they
// hold a readable one.
func (f *FileStore) Trust() ([]byte, bool) {
	e, ok := f.others[string(trustKey)]
	if !ok || !f.live(trustKey, e) {
		return nil, false
	}
	v, err := f.value(e, 0, false)
	if err != nil {
		return nil, false
	}
	return append([]byte(nil), v...), true
}

// Mirrors returns the target checkpoints the files record. A mirror whose
// value cannot be read or parsed is left out.
func (f *FileStore) Mirrors() map[string]Checkpoint {
	out := map[string]Checkpoint{}
	for k, e := range f.others {
		key := []byte(k)
		if key[0] != prefixMirror || !f.live(key, e) {
			continue
		}
		v, err := f.value(e, 0, false)
		if err != nil {
			continue
		}
		var cp Checkpoint
		if json.Unmarshal(v, &cp) == nil {
			out[k[1:]] = cp
		}
	}
	return out
}

// Bounds returns the lowest and highest heights the files hold a live
// record or index entry for (its value read or not); ok is false when they
// hold none.
func (f *FileStore) Bounds() (lo, hi uint64, ok bool) {
	for _, keys := range []struct {
		prefix byte
		m      map[uint64]entry
	}{{prefixBlock, f.blocks}, {prefixIndex, f.index}} {
		for h, e := range keys.m {
			if !f.live(heightKey(keys.prefix, h), e) {
				continue
			}
			if !ok || h < lo {
				lo = h
			}
			if !ok || h > hi {
				hi = h
			}
			ok = true
		}
	}
	return lo, hi, ok
}

// Ledger returns what the store's ledger (blockhaul-staged.json) says was
// durably staged, when it can be read.
func (f *FileStore) Ledger() (records, high uint64, ok bool) {
	s := &Store{dir: f.dir, fs: f.fs}
	l, ok, err := s.readLedger()
	if err != nil || !ok {
		return 0, 0, false
	}
	return l.Records, l.High, true
}

// Records calls fn for every live record of [from, to] in height order,
// each read from its file and verified as any read is (header, CRC-32C,
// decompression to its recorded length); rec is nil and err says why for a
// record that fails. An error from fn stops the walk and is returned.
func (f *FileStore) Records(from, to uint64, fn func(h uint64, rec *SalvageRecord, err error) error) error {
	heights := make([]uint64, 0, len(f.blocks))
	for h := range f.blocks {
		if h >= from && h <= to {
			heights = append(heights, h)
		}
	}
	slices.Sort(heights)
	var buf []byte
	for _, h := range heights {
		e := f.blocks[h]
		if !f.live(heightKey(prefixBlock, h), e) {
			continue
		}
		var rec *SalvageRecord
		err := guard(fmt.Sprintf("read %d", h), func() error {
			v, err := f.value(e, h, true)
			if err != nil {
				return err
			}
			b, hdr, err := decodeRecord(f.dec, f.max, h, v, buf)
			if err != nil {
				return err
			}
			buf = b.Raw[:0]
			b.Raw = bytes.Clone(b.Raw)
			rec = &SalvageRecord{Block: b, Encoded: Encoded{Height: h, Hash: b.Hash, ParentHash: b.ParentHash,
				Value: bytes.Clone(v), RawLen: int(hdr.RawLen)}}
			return nil
		})
		if err != nil {
			rec = nil
			if errors.As(err, new(*CorruptRecordError)) {
				err = fmt.Errorf("staging: salvage height %d: %w", h, err)
			} else {
				err = &CorruptStoreError{Dir: f.dir, Heights: &Range{From: h, To: h}, Err: err}
			}
		}
		if ferr := fn(h, rec, err); ferr != nil {
			return ferr
		}
	}
	return nil
}

// Close releases the files.
func (f *FileStore) Close() error {
	var errs []error
	errs = append(errs, guard("close blob files", f.blob.close))
	for _, t := range f.tables {
		errs = append(errs, guard("close "+t.name, t.r.Close))
	}
	f.dec.Close()
	return errors.Join(errs...)
}

// blobReaders reads values from blob files by file number, through
// Pebble's blob.ValueFetcher with an identity mapping from blob file IDs to
// file numbers: FileStore has no MANIFEST to map them, and asks for files
// by number.
type blobReaders struct {
	f   *FileStore
	vf  *blob.ValueFetcher
	fm  blob.FileMapping
	rp  blob.ReaderProvider
	ctx context.Context
}

func newBlobReaders(f *FileStore) (*blobReaders, error) {
	// Pebble's BlobFileID and DiskFileNum are internal types: inferred
	// from sample values rather than named.
	m := newBlobFiles(blob.Handle{}.BlobFileID, sstable.ReaderOptions{}.CacheOpts.FileNum, f)
	fm, ok1 := m.(blob.FileMapping)
	rp, ok2 := m.(blob.ReaderProvider)
	if !ok1 || !ok2 {
		return nil, errors.New("staging: salvage: this Pebble's blob file interfaces are not the ones built against")
	}
	r := &blobReaders{f: f, fm: fm, rp: rp, ctx: context.Background()}
	r.reset()
	return r, nil
}

func (r *blobReaders) reset() {
	r.vf = &blob.ValueFetcher{}
	r.vf.Init(r.fm, r.rp, block.ReadEnv{})
}

// fetch returns a copy of value val of block blk of blob file num.
func (r *blobReaders) fetch(num uint64, blk blob.BlockID, val blob.BlockValueID) (v []byte, err error) {
	var id blob.Handle
	setUint(&id.BlobFileID, num)
	err = guard("read "+blobName(num), func() error {
		got, _, err := r.vf.Fetch(r.ctx, id.BlobFileID, blk, val)
		v = got
		return err
	})
	if err != nil {
		// A panic or an error may leave the fetcher's cached block half
		// replaced: start again with a fresh one.
		guard("close blob reader", r.vf.Close)
		r.reset()
		return nil, err
	}
	return bytes.Clone(v), nil
}

func (r *blobReaders) close() error { return r.vf.Close() }

func setUint[T ~uint64](dst *T, v uint64) { *dst = T(v) }

// blobFiles implements blob.FileMapping and blob.ReaderProvider once B and
// D are Pebble's BlobFileID and DiskFileNum.
type blobFiles[B, D ~uint64] struct{ f *FileStore }

func newBlobFiles[B, D ~uint64](_ B, _ D, f *FileStore) any { return &blobFiles[B, D]{f: f} }

// Lookup maps a blob file ID to the file of that number.
func (m *blobFiles[B, D]) Lookup(id B) (D, bool) { return D(id), true }

// GetValueReader opens blob file num, without a cache.
func (m *blobFiles[B, D]) GetValueReader(ctx context.Context, num D) (blob.ValueReader, func(), error) {
	file, err := m.f.fs.Open(m.f.fs.PathJoin(m.f.dir, blobName(uint64(num))))
	if err != nil {
		return nil, nil, err
	}
	readable, err := sstable.NewSimpleReadable(file)
	if err != nil {
		file.Close()
		return nil, nil, err
	}
	fr, err := blob.NewFileReader(ctx, readable, blob.FileReaderOptions{})
	if err != nil {
		readable.Close()
		return nil, nil, err
	}
	return fr, func() { fr.Close() }, nil
}
