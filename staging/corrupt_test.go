package staging

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/storetest"
)

// Byte flips and truncations in every kind of file a staging store holds,
// on real Pebble stores: no panic escapes any operation, each failure is a
// named *CorruptStoreError, unreadable records count as missing, and what
// was lost can be fetched again and read back.

const recSize = 8 << 10

// corruptFixture stages heights 1-200 into a flushed table and blob file
// and 201-220 into the WAL only, mirrors a checkpoint, and closes the store.
func corruptFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := openBound(t, dir)
	putFlushed(t, s, 1, 200)
	putBig(t, s, 201, 220)
	if err := s.SetMirror("t", Checkpoint{Height: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// putFlushed stages heights from-to (putBig) and flushes them into a table
// of their own.
func putFlushed(t *testing.T, s *Store, from, to uint64) {
	t.Helper()
	putBig(t, s, from, to)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
}

func putBig(t *testing.T, s *Store, from, to uint64) {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	for h := from; h <= to; h++ {
		if err := b.Put(bigBlock(h, recSize)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

// storeFile returns the one file of dir whose name ends (or starts) with
// part.
func storeFile(t *testing.T, dir, part string) string {
	t.Helper()
	var out []string
	for _, name := range names(t, dir) {
		if strings.HasSuffix(name, part) || strings.HasPrefix(name, part) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatalf("no %s file in %s", part, dir)
	}
	return out[len(out)-1]
}

func flipByte(t *testing.T, path string, at func(n int) int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at(len(b))] ^= 0x5a
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// noPanic runs fn and fails the test if a panic escapes it.
func noPanic(t *testing.T, op string, fn func() error) error {
	t.Helper()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s: panic escaped the staging store: %v", op, r)
			}
		}()
		err = fn()
	}()
	return err
}

// wantDamaged asserts err is a *CorruptStoreError naming file (if given).
func wantDamaged(t *testing.T, op string, err error, file string) *CorruptStoreError {
	t.Helper()
	var ce *CorruptStoreError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: %v, want a *CorruptStoreError", op, err)
	}
	if file != "" && (ce.File != file || !strings.Contains(err.Error(), file)) {
		t.Fatalf("%s: %v: names file %q, want %q", op, err, ce.File, file)
	}
	return ce
}

// readAll reads every height of [from, to] with Get and returns the heights
// that failed, and the first error.
func readAll(t *testing.T, s *Store, from, to uint64) (bad []uint64, first error) {
	t.Helper()
	for h := from; h <= to; h++ {
		err := noPanic(t, fmt.Sprintf("get %d", h), func() error {
			b, err := s.Get(h)
			if err == nil && !bytes.Equal(b.Raw, bigBlock(h, recSize).Raw) {
				return fmt.Errorf("height %d reads back wrong bytes", h)
			}
			return err
		})
		if err != nil {
			bad = append(bad, h)
			if first == nil {
				first = err
			}
		}
	}
	return bad, first
}

// refetchAndCheck stages again what Missing reports in [1, 220], as fetch
// would, and checks every height then reads back intact.
func refetchAndCheck(t *testing.T, s *Store) {
	t.Helper()
	missing, err := s.Missing(1, 220)
	if err != nil {
		t.Fatalf("missing after the damage was found: %v", err)
	}
	for _, r := range missing {
		putBig(t, s, r.From, r.To)
	}
	if bad, err := readAll(t, s, 1, 220); len(bad) > 0 {
		t.Fatalf("after refetching %v: %d heights still fail: %v", missing, len(bad), err)
	}
}

// storeWithCorruptBlob opens the corrupt fixture's store with a byte of its
// blob file flipped a third of the way in; blob names that file.
func storeWithCorruptBlob(t *testing.T) (s *Store, blob string) {
	t.Helper()
	dir := corruptFixture(t)
	blob = storeFile(t, dir, ".blob")
	flipByte(t, filepath.Join(dir, blob), func(n int) int { return n / 3 })
	return openDir(t, dir), blob
}

// A flipped byte in a blob file: the record(s) of that block fail Pebble's
// checksum on every read. The read names the blob file and the height; the
// record is removed, so that the missing-heights query reports it, and a
// fetch of that height replaces it instead of being refused as staged.
func TestCorruptBlobBlockIsNamedAndReplaceable(t *testing.T) {
	s, blob := storeWithCorruptBlob(t)
	defer s.Close()
	if m, err := s.Missing(1, 220); err != nil || len(m) != 0 {
		t.Fatalf("before any read: missing %v, %v (the index is intact)", m, err)
	}
	it, err := s.Scan(1, 220)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for noPanic(t, "scan", func() error {
		if it.Next() {
			return nil
		}
		return errors.New("end")
	}) == nil {
		n++
	}
	it.Close()
	ce := wantDamaged(t, "scan", it.Err(), blob)
	if ce.Heights == nil || ce.Heights.From != uint64(n+1) || !ce.Dropped {
		t.Fatalf("scan: %v: heights %v dropped %v, want the height after the %d read", it.Err(), ce.Heights, ce.Dropped, n)
	}
	var cr *CorruptRecordError
	if !errors.As(it.Err(), &cr) && !strings.Contains(it.Err().Error(), "checksum") {
		t.Logf("scan error: %v", it.Err())
	}
	t.Logf("scan: %v", it.Err())
	missing, err := s.Missing(1, 220)
	if err != nil || len(missing) != 1 || missing[0] != *ce.Heights {
		t.Fatalf("missing = %v, %v; want the unreadable %v", missing, err, ce.Heights)
	}
	// A reread of the height is now "not staged", not a checksum error.
	if _, err := s.Get(ce.Heights.From); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get %d after the drop: %v, want not found", ce.Heights.From, err)
	}
	refetchAndCheck(t, s)
}

// The same through Get: the first read of the bad height is the named
// error; every other height reads.
func TestCorruptBlobBlockThroughGet(t *testing.T) {
	s, blob := storeWithCorruptBlob(t)
	defer s.Close()
	bad, first := readAll(t, s, 1, 220)
	if len(bad) == 0 || len(bad) > 4 {
		t.Fatalf("%d heights unreadable (%v): want the few of one blob block", len(bad), bad)
	}
	wantDamaged(t, "get", first, blob)
	t.Logf("get: %v", first)
	refetchAndCheck(t, s)
}

// A truncated blob file: every record in it is unreadable (its footer is
// gone), which inside Pebble is a panic ("unknown metadata type"). It is
// contained: a named error, the whole run of unreadable heights removed —
// those before the height read too (a read at 10 removed 10-200 and named
// them, and heights 1-9 failed the next run: following the message once
// was not enough) — and the store still answers and takes the refetch.
func TestTruncatedBlobFile(t *testing.T) {
	dir := corruptFixture(t)
	blob := filepath.Join(dir, storeFile(t, dir, ".blob"))
	st, err := os.Stat(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blob, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	s := openDir(t, dir)
	defer func() { noPanic(t, "close", s.Close) }()
	err = noPanic(t, "get", func() error { _, err := s.Get(10); return err })
	ce := wantDamaged(t, "get 10", err, "")
	if ce.Heights == nil || ce.Heights.From != 1 || ce.Heights.To != 200 || !ce.Dropped || !strings.Contains(err.Error(), "fetch heights 1-200 again") {
		t.Fatalf("get 10: %v: want heights 1-200, all the file held, removed and named", err)
	}
	if m, _ := s.Mirrors(); m["t"].Height != 5 {
		t.Fatalf("mirrors after the damage: %v", m)
	}
	// A reader that then finds 150 missing learns why; 201 was never lost.
	var dropped *CorruptStoreError
	if err := s.DroppedAt(150); !errors.As(err, &dropped) || dropped != ce {
		t.Fatalf("DroppedAt(150) = %v, want the damage that removed 1-200", err)
	}
	if err := s.DroppedAt(201); err != nil {
		t.Fatalf("DroppedAt(201) = %v, want nil: 201 was not removed", err)
	}
	// Exactly what was named is missing; everything else reads.
	if missing, err := s.Missing(1, 220); err != nil || len(missing) != 1 || missing[0] != (Range{From: 1, To: 200}) {
		t.Fatalf("missing after the damage was named: %v, %v; want 1-200", missing, err)
	}
	if bad, err := readAll(t, s, 201, 220); len(bad) != 0 {
		t.Fatalf("heights 201-220 (the WAL's) after the damage: %d unreadable (%v)", len(bad), err)
	}
	refetchAndCheck(t, s)
}

// A truncated blob file holding heights apart (1-100 and 301-400, flushed
// together; 101-300 in a file of their own): a read at 350 names and
// removes both runs at once (before: 301-400 only, and the next run met
// 1-100), and nothing readable; every height then reads once fetched
// again.
func TestTruncatedBlobFileOfApartHeights(t *testing.T) {
	dir := t.TempDir()
	s := openBound(t, dir)
	putBig(t, s, 1, 100)
	putBig(t, s, 301, 400)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	first := storeFile(t, dir, ".blob")
	putFlushed(t, s, 101, 300)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(dir, first)
	st, err := os.Stat(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blob, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer func() { noPanic(t, "close", s.Close) }()
	err = noPanic(t, "get", func() error { _, err := s.Get(350); return err })
	ce := wantDamaged(t, "get 350", err, "")
	if !ce.Dropped || ce.Unchecked || *ce.Heights != (Range{From: 301, To: 400}) || len(ce.Other) != 1 || ce.Other[0] != (Range{From: 1, To: 100}) ||
		!strings.Contains(err.Error(), "fetch heights 1-100, 301-400 again") {
		t.Fatalf("get 350: %v (heights %v, other %v, unchecked %v): want 1-100 and 301-400 named and removed", err, ce.Heights, ce.Other, ce.Unchecked)
	}
	missing, err := s.Missing(1, 400)
	if err != nil || !reflect.DeepEqual(missing, []Range{{From: 1, To: 100}, {From: 301, To: 400}}) {
		t.Fatalf("missing after the damage was named: %v, %v", missing, err)
	}
	if bad, err := readAll(t, s, 101, 300); len(bad) != 0 {
		t.Fatalf("heights 101-300 (another file) after the damage: %d unreadable (%v)", len(bad), err)
	}
	for _, r := range missing {
		putBig(t, s, r.From, r.To)
	}
	if bad, err := readAll(t, s, 1, 400); len(bad) != 0 {
		t.Fatalf("after fetching the named heights again: %d unreadable (%v)", len(bad), err)
	}
}

// A flipped byte in a table's data block: the keys of that block cannot be
// read. Scans and reads name the table; the records are removed and can be
// fetched again.
func TestCorruptTableDataBlock(t *testing.T) {
	dir := corruptFixture(t)
	sst := storeFile(t, dir, ".sst")
	flipByte(t, filepath.Join(dir, sst), func(int) int { return 40 })
	s := openDir(t, dir)
	defer func() { noPanic(t, "close", s.Close) }()
	err := noPanic(t, "missing", func() error { _, err := s.Missing(1, 220); return err })
	wantDamaged(t, "missing", err, sst)
	err = noPanic(t, "bounds", func() error { _, _, _, err := s.Bounds(); return err })
	wantDamaged(t, "bounds", err, sst)
	err = noPanic(t, "get", func() error { _, err := s.Get(1); return err })
	ce := wantDamaged(t, "get 1", err, sst)
	t.Logf("get 1: %v", err)
	if !ce.Dropped {
		t.Fatalf("get 1: %v: the unreadable records were not removed", err)
	}
	refetchAndCheck(t, s)
}

// A truncated table: Pebble's consistency check at Open finds its size is
// not the MANIFEST's and says so with an error it does not mark as
// corruption. Open (read-write and read-only) reports it as damage naming
// the table.
func TestTruncatedTableFile(t *testing.T) {
	dir := corruptFixture(t)
	sst := storeFile(t, dir, ".sst")
	st, err := os.Stat(filepath.Join(dir, sst))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, sst), st.Size()/2); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		err := noPanic(t, "open", func() error {
			s, err := Open(dir, Options{ReadOnly: ro})
			if err == nil {
				s.Close()
			}
			return err
		})
		wantDamaged(t, fmt.Sprintf("open (read-only %v)", ro), err, sst)
	}
}

// A flipped byte in a table's footer: Pebble cannot open the table, and
// Open says which file.
func TestCorruptTableFooter(t *testing.T) {
	dir := corruptFixture(t)
	sst := storeFile(t, dir, ".sst")
	flipByte(t, filepath.Join(dir, sst), func(n int) int { return n - 20 })
	err := noPanic(t, "open", func() error {
		s, err := Open(dir, Options{})
		if err == nil {
			s.Close()
		}
		return err
	})
	wantDamaged(t, "open", err, sst)
	err = noPanic(t, "open read-only", func() error {
		s, err := Open(dir, Options{ReadOnly: true})
		if err == nil {
			s.Close()
		}
		return err
	})
	wantDamaged(t, "open read-only", err, sst)
}

// A flipped byte in the last WAL: Pebble replays up to it and drops the
// rest without an error. The ledger says how many records were durably
// staged: the loss is reported (Damage), shows as gaps, and is repaired by
// fetching them again.
func TestDamagedWALIsReported(t *testing.T) {
	dir := corruptFixture(t)
	flipByte(t, filepath.Join(dir, storeFile(t, dir, ".log")), func(n int) int { return n / 2 })
	s := openDir(t, dir)
	defer s.Close()
	missing, err := s.Missing(1, 220)
	if err != nil || len(missing) == 0 {
		t.Fatalf("missing = %v, %v: want the heights the flipped WAL lost", missing, err)
	}
	wantDamaged(t, "damage", s.Damage(), "")
	t.Logf("lost %v: %v", missing, s.Damage())
	refetchAndCheck(t, s)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Damage(); err != nil {
		t.Fatalf("after the lost heights were staged again: %v", err)
	}
}

// Flipped MANIFEST bytes: wherever the flip lands, the store either refuses
// to open with a named error or opens with every record, or reports the
// records it lost. Never a silent loss (the issue saw one: status showed
// the lost heights as gaps with exit 0).
func TestDamagedManifestIsNeverSilent(t *testing.T) {
	base := t.TempDir()
	s := openBound(t, base)
	for h := uint64(1); h <= 400; h += 50 {
		putFlushed(t, s, h, h+49)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	manifest := storeFile(t, base, "MANIFEST-")
	orig, err := os.ReadFile(filepath.Join(base, manifest))
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for at := 0; at < len(orig); at += 11 {
		dir := t.TempDir()
		storetest.CopyFiles(t, base, dir)
		flipByte(t, filepath.Join(dir, manifest), func(int) int { return at })
		err := noPanic(t, fmt.Sprintf("open with byte %d flipped", at), func() error {
			s, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				wantDamaged(t, fmt.Sprintf("open with byte %d flipped", at), err, "")
				outcomes["open refused"]++
				return nil
			}
			defer s.Close()
			missing, err := s.Missing(1, 400)
			if err != nil {
				return err
			}
			switch {
			case len(missing) == 0 && s.Damage() == nil:
				outcomes["intact"]++
			case len(missing) > 0 && s.Damage() != nil:
				outcomes["loss reported"]++
			default:
				return fmt.Errorf("missing %v, damage %v", missing, s.Damage())
			}
			return nil
		})
		if err != nil {
			t.Fatalf("byte %d of %s flipped: %v", at, manifest, err)
		}
	}
	t.Logf("%s of %d bytes, every 11th flipped: %v", manifest, len(orig), outcomes)
	if outcomes["loss reported"] == 0 {
		t.Fatalf("no flip lost records: the test does not reach the silent case (%v)", outcomes)
	}
}

// Pebble's Logger.Fatalf (it reports some corruption so, on its own
// goroutines too) must not panic: the store records it, and every later
// call fails with the corruption, which exits 4.
func TestFatalfDoesNotPanic(t *testing.T) {
	s := openTest(t)
	put(t, s, 1)
	l := pebbleLogger{slog.New(slog.DiscardHandler), s.faults}
	noPanic(t, "fatalf", func() error {
		l.Fatalf("pebble: on-disk corruption: %s", "000012.sst")
		return nil
	})
	_, err := s.Get(1)
	var be *BrokenStoreError
	var ce *CorruptStoreError
	if !errors.As(err, &be) || !errors.As(err, &ce) || !strings.Contains(err.Error(), "000012.sst") {
		t.Fatalf("get after Fatalf: %v, want a *BrokenStoreError wrapping the corruption", err)
	}
	if err := noPanic(t, "close", s.Close); !errors.As(err, &ce) {
		t.Fatalf("close after Fatalf: %v", err)
	}
}

// Nothing of the corruption path costs an intact store its records: the
// ledger of a store closed cleanly matches what it holds, reopened.
func TestLedgerOfAnIntactStore(t *testing.T) {
	dir := corruptFixture(t)
	s := openDir(t, dir)
	if err := s.Damage(); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(100, 120); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDirWith(t, dir, Options{ReadOnly: true})
	defer s.Close()
	if err := s.Damage(); err != nil {
		t.Fatalf("after a Delete: %v", err)
	}
	st, _ := s.Staged(1, 220)
	if want := []Range{{1, 99}, {121, 220}}; !reflect.DeepEqual(st, want) {
		t.Fatalf("staged %v, want %v", st, want)
	}
}

// DiskUsage counts the blob files, where the records are: status printed
// 17.6 MB for a 386 MB directory when it did not.
func TestDiskUsageCountsBlobFiles(t *testing.T) {
	dir := corruptFixture(t)
	for _, ro := range []bool{false, true} {
		s, err := Open(dir, Options{ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		var blob, all int64
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // an obsolete file Pebble deleted after opening
			}
			if err != nil {
				t.Fatal(err)
			}
			all += fi.Size()
			if strings.HasSuffix(e.Name(), ".blob") {
				blob += fi.Size()
			}
		}
		got := s.DiskUsage().Bytes
		s.Close()
		if blob < 1<<20 || got < uint64(blob) || got > uint64(all) {
			t.Fatalf("read-only %v: DiskUsage %d, blob files %d bytes, directory %d", ro, got, blob, all)
		}
	}
}

// The ledger's count is kept by commits: a height put twice in one batch
// counts once (so a clean store is never reported damaged), and with
// another hash it is a conflict.
func TestBatchCountsAHeightOnce(t *testing.T) {
	dir := t.TempDir()
	s := openBound(t, dir)
	b := s.NewBatch()
	for _, h := range []uint64{1, 2, 2, 3} {
		if err := b.Put(testBlock(h)); err != nil {
			t.Fatal(err)
		}
	}
	other := testBlock(3)
	other.Hash = hashOf(1000)
	var ce *ConflictError
	if err := b.Put(other); !errors.As(err, &ce) || ce.Height != 3 {
		t.Fatalf("another block at height 3 in the same batch: %v, want a conflict", err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDirWith(t, dir, Options{ReadOnly: true})
	defer s.Close()
	l, ok, err := s.readLedger()
	if err != nil || !ok || l.Records != 3 || l.High != 3 || s.Damage() != nil {
		t.Fatalf("ledger %+v (%v, %v), damage %v: want 3 records up to 3", l, ok, err, s.Damage())
	}
}

// A store opened to keep damage (the export command's: it only reads
// staging) names the same damage — the file, every run of unreadable
// heights, repair — and removes nothing; it once removed them as a fetch's
// store does.
func TestKeepDamageNamesAndRemovesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openBound(t, dir)
	putBig(t, s, 1, 100)
	putBig(t, s, 301, 400)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	first := storeFile(t, dir, ".blob")
	putFlushed(t, s, 101, 300)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(dir, first)
	st, err := os.Stat(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blob, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Options{KeepDamage: true}); err != nil {
		t.Fatal(err)
	}
	defer func() { noPanic(t, "close", s.Close) }()
	err = noPanic(t, "get", func() error { _, err := s.Get(350); return err })
	ce := wantDamaged(t, "get 350", err, "")
	msg := err.Error()
	if ce.Dropped || !ce.Kept || *ce.Heights != (Range{From: 301, To: 400}) || len(ce.Other) != 1 || ce.Other[0] != (Range{From: 1, To: 100}) ||
		!strings.Contains(msg, "heights 1-100, 301-400") || !strings.Contains(msg, "blockhaul repair --staging "+dir) || strings.Contains(msg, "removed:") {
		t.Fatalf("get 350: %v (heights %v, other %v): want 1-100 and 301-400 named, kept, and repair named", err, ce.Heights, ce.Other)
	}
	if missing, err := s.Missing(1, 400); err != nil || len(missing) != 0 {
		t.Fatalf("a store that keeps damage removed records: missing %v, %v", missing, err)
	}
	if ce.File == "" && !strings.Contains(msg, ".blob") {
		t.Logf("the damaged file is not named: %v", err)
	}
}
