package staging

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/blockhaul/blockhaul/chain/chaintest"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/cockroachdb/pebble/v2"
	"github.com/klauspost/compress/zstd"
)

func testBlock(h uint64) chain.Block {
	raw := []byte(fmt.Sprintf(`{"height":"%d","payload":"%s"}`, h, bytes.Repeat([]byte("ab"), int(h%50))))
	return chain.Block{Height: h, Hash: hashOf(h), ParentHash: hashOf(h - 1), Raw: raw}
}

// openDir opens the store in dir with default options or fails the test;
// the caller closes it.
func openDir(t *testing.T, dir string) *Store {
	t.Helper()
	return openDirWith(t, dir, Options{})
}

// openDirWith opens the store in dir with opts or fails the test; the
// caller closes it.
func openDirWith(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openTest(t *testing.T) *Store {
	t.Helper()
	s := openDir(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	if err := s.Bind(chain.FamilyCometBFT, "test-1"); err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t *testing.T, s *Store, heights ...uint64) {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	for _, h := range heights {
		if err := b.Put(testBlock(h)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	s := openTest(t)
	put(t, s, 7, 3, 5)
	for _, h := range []uint64{3, 5, 7} {
		got, err := s.Get(h)
		if err != nil {
			t.Fatal(err)
		}
		want := testBlock(h)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("height %d: got %+v want %+v", h, got, want)
		}
	}
	if _, err := s.Get(4); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(4) = %v, want ErrNotFound", err)
	}
}

func TestCodecDetectsEveryFlippedByte(t *testing.T) {
	b := testBlock(42)
	s := openTest(t)
	comp := s.enc.EncodeAll(b.Raw, nil)
	v, err := appendValue(nil, chain.FamilyCometBFT, &b, comp)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.decodeValue(42, v, nil); err != nil {
		t.Fatalf("intact value: %v", err)
	}
	for i := range v {
		c := bytes.Clone(v)
		c[i] ^= 0x10
		_, _, err := s.decodeValue(42, c, nil)
		var ce *CorruptRecordError
		if !errors.As(err, &ce) || ce.Height != 42 {
			t.Fatalf("flip at byte %d: err = %v, want *CorruptRecordError at height 42", i, err)
		}
	}
	// Truncations too.
	for n := 0; n < len(v); n += 7 {
		var ce *CorruptRecordError
		if _, _, err := s.decodeValue(42, v[:n], nil); !errors.As(err, &ce) {
			t.Fatalf("truncated to %d: err = %v", n, err)
		}
	}
}

// Values staged before frames dropped zstd's own checksum still decode.
func TestFramesWithContentChecksumDecode(t *testing.T) {
	s := openTest(t)
	b := testBlock(9)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	with := enc.EncodeAll(b.Raw, nil)
	if without := s.enc.EncodeAll(b.Raw, nil); len(with) != len(without)+4 {
		t.Fatalf("frames of %d and %d bytes: want exactly the 4-byte checksum between them", len(with), len(without))
	}
	v, err := appendValue(nil, chain.FamilyCometBFT, &b, with)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.decodeValue(9, v, nil)
	if err != nil || !bytes.Equal(got.Raw, b.Raw) {
		t.Fatalf("decode of a frame with a checksum: %v, raw equal %v", err, bytes.Equal(got.Raw, b.Raw))
	}
}

// noise is n bytes of hex that do not compress below half their size.
func noise(seed uint64, n int) []byte {
	out := make([]byte, 0, n+64)
	sum := sha256.Sum256(binary.BigEndian.AppendUint64(nil, seed))
	for len(out) < n {
		out = hex.AppendEncode(out, sum[:])
		sum = sha256.Sum256(sum[:])
	}
	return out[:n]
}

// putNoise stages heights 1-n in one batch, each record 8 KiB of noise
// (kilobytes even compressed, as real records are), and flushes them: one
// blob file. It returns the raw bytes staged.
func putNoise(t *testing.T, s *Store, n uint64) (raw uint64) {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	for h := uint64(1); h <= n; h++ {
		blk := testBlock(h)
		blk.Raw = noise(h, 8<<10)
		raw += uint64(len(blk.Raw))
		if err := b.Put(blk); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	return raw
}

// Records leave the LSM for blob files when flushed, so that compactions
// do not rewrite them; small index values stay inline.
func TestRecordsFlushToBlobFiles(t *testing.T) {
	s := openTest(t)
	raw := putNoise(t, s, 200)
	m := s.db.Metrics()
	if m.BlobFiles.LiveCount == 0 || m.BlobFiles.ValueSize == 0 {
		t.Fatalf("no blob file after a flush of 200 records (%d raw bytes): %+v", raw, m.BlobFiles)
	}
	got, err := s.Get(150)
	if err != nil || !bytes.Equal(got.Raw, noise(150, 8<<10)) {
		t.Fatalf("read back through the blob file: %v", err)
	}
}

func TestCorruptValueOnDiskNamesHeight(t *testing.T) {
	s := openTest(t)
	put(t, s, 1, 2, 3)
	k := heightKey(prefixBlock, 2)
	v, closer, err := s.db.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	c := bytes.Clone(v)
	closer.Close()
	c[len(c)/2] ^= 1
	if err := s.db.Set(k, c, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	it, err := s.Scan(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var seen []uint64
	for it.Next() {
		seen = append(seen, it.Block().Height)
	}
	var ce *CorruptRecordError
	if !errors.As(it.Err(), &ce) || ce.Height != 2 {
		t.Fatalf("scan err = %v, want corrupt record at 2", it.Err())
	}
	if !reflect.DeepEqual(seen, []uint64{1}) {
		t.Fatalf("scan yielded %v before the corrupt record, want [1]", seen)
	}
}

func TestKeyOrderIsNumericOrder(t *testing.T) {
	hs := []uint64{0, 1, 255, 256, 65535, 65536, 1 << 32, 1<<63 + 5, ^uint64(0)}
	keys := make([][]byte, len(hs))
	for i, h := range hs {
		keys[len(hs)-1-i] = heightKey(prefixBlock, h)
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	for i, k := range keys {
		if keyHeight(k) != hs[i] {
			t.Fatalf("position %d holds %d, want %d", i, keyHeight(k), hs[i])
		}
	}
}

func TestMissingAndStaged(t *testing.T) {
	s := openTest(t)
	put(t, s, 3, 4, 5, 9, 12, 13)
	tests := []struct {
		from, to      uint64
		missing, have []Range
	}{
		{1, 15, []Range{{1, 2}, {6, 8}, {10, 11}, {14, 15}}, []Range{{3, 5}, {9, 9}, {12, 13}}},
		{3, 5, nil, []Range{{3, 5}}},
		{6, 8, []Range{{6, 8}}, nil},
		{4, 12, []Range{{6, 8}, {10, 11}}, []Range{{4, 5}, {9, 9}, {12, 12}}},
		{13, 13, nil, []Range{{13, 13}}},
		{0, 3, []Range{{0, 2}}, []Range{{3, 3}}},
	}
	for _, tc := range tests {
		m, err := s.Missing(tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m, tc.missing) {
			t.Errorf("Missing(%d,%d) = %v, want %v", tc.from, tc.to, m, tc.missing)
		}
		st, err := s.Staged(tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(st, tc.have) {
			t.Errorf("Staged(%d,%d) = %v, want %v", tc.from, tc.to, st, tc.have)
		}
	}
	if h, ok, _ := s.ContiguousFrom(3, 100); !ok || h != 5 {
		t.Errorf("ContiguousFrom(3) = %d,%v want 5,true", h, ok)
	}
	if _, ok, _ := s.ContiguousFrom(6, 100); ok {
		t.Errorf("ContiguousFrom(6) ok, want not staged")
	}
}

func TestMissingScanLarge(t *testing.T) {
	s := openTest(t)
	b := s.NewBatch()
	const n = 200_000
	for h := uint64(1); h <= n; h++ {
		if h%1000 == 0 {
			continue // a hole every 1000 heights
		}
		if err := b.Put(chain.Block{Height: h, Hash: hashOf(h), ParentHash: hashOf(h - 1), Raw: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if b.Len() == 10_000 {
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	m, err := s.Missing(1, n+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != n/1000 || m[0] != (Range{1000, 1000}) || m[len(m)-1] != (Range{n, n + 10}) {
		t.Fatalf("missing: %d ranges, first %v last %v", len(m), m[0], m[len(m)-1])
	}
}

func TestRefusesAnotherChain(t *testing.T) {
	s := openTest(t)
	var wc *WrongChainError
	if err := s.Bind(chain.FamilyCometBFT, "other-2"); !errors.As(err, &wc) {
		t.Fatalf("Bind other chain id: %v", err)
	}
	if err := s.Bind(chain.FamilyEVM, "test-1"); !errors.As(err, &wc) {
		t.Fatalf("Bind other family: %v", err)
	}
	put(t, s, 10)
	b := s.NewBatch()
	defer b.Close()
	other := testBlock(10)
	other.Hash = hashOf(999)
	if err := b.Put(other); !errors.As(err, &wc) {
		t.Fatalf("Put of another block 10: %v, want *WrongChainError", err)
	}
	other = testBlock(11)
	put(t, s, 11)
	other.Hash = hashOf(12345)
	var ce *ConflictError
	if err := b.Put(other); !errors.As(err, &ce) || ce.Height != 11 {
		t.Fatalf("Put of conflicting block 11: %v", err)
	}
	// Identity survives reopening.
	dir := s.Dir()
	s.Close()
	s2 := openDir(t, dir)
	defer s2.Close()
	id, ok := s2.Identity()
	if !ok || id.ChainID != "test-1" || id.FirstHeight != 10 || !bytes.Equal(id.FirstHash, hashOf(10)) {
		t.Fatalf("identity after reopen: %+v %v", id, ok)
	}
	if err := s2.Bind(chain.FamilyCometBFT, "zzz"); !errors.As(err, &wc) {
		t.Fatalf("Bind after reopen: %v", err)
	}
}

func TestMirror(t *testing.T) {
	s := openTest(t)
	if _, ok, err := s.Mirror("db/a"); ok || err != nil {
		t.Fatalf("empty mirror: %v %v", ok, err)
	}
	if err := s.SetMirror("db/a", Checkpoint{Height: 5, Hash: hashOf(5)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMirror("db/b", Checkpoint{Height: 9}); err != nil {
		t.Fatal(err)
	}
	cp, ok, err := s.Mirror("db/a")
	if err != nil || !ok || cp.Height != 5 || !bytes.Equal(cp.Hash, hashOf(5)) {
		t.Fatalf("mirror a: %+v %v %v", cp, ok, err)
	}
	all, err := s.Mirrors()
	if err != nil || len(all) != 2 || all["db/b"].Height != 9 {
		t.Fatalf("mirrors: %v %v", all, err)
	}
}

func TestDelete(t *testing.T) {
	s := openTest(t)
	put(t, s, 1, 2, 3, 4)
	if err := s.Delete(2, 3); err != nil {
		t.Fatal(err)
	}
	m, _ := s.Missing(1, 4)
	if !reflect.DeepEqual(m, []Range{{2, 3}}) {
		t.Fatalf("after delete missing = %v", m)
	}
	if lo, hi, ok, _ := s.Bounds(); !ok || lo != 1 || hi != 4 {
		t.Fatalf("bounds %d %d %v", lo, hi, ok)
	}
}

func TestFirstBreak(t *testing.T) {
	s := openTest(t)
	put(t, s, 1, 2, 3, 4, 5, 7, 8)
	if h, ok, err := s.FirstBreak(1, 8); ok || err != nil {
		t.Fatalf("linked chain reported a break at %d (%v)", h, err)
	}
	s.Delete(4, 4)
	b := s.NewBatch()
	defer b.Close()
	if err := b.Put(chain.Block{Height: 4, Hash: hashOf(4), ParentHash: hashOf(77), Raw: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if h, ok, _ := s.FirstBreak(1, 8); !ok || h != 4 {
		t.Fatalf("break at %d %v, want 4", h, ok)
	}
	if _, ok, _ := s.FirstBreak(5, 8); ok {
		t.Fatal("break reported outside the scanned range")
	}
}

func TestMergeFrom(t *testing.T) {
	a, b := openTest(t), openTest(t)
	put(t, a, 1, 2, 3, 4, 5)
	put(t, b, 4, 5, 6, 7, 8)
	n, err := a.MergeFrom(b, 0, ^uint64(0))
	if err != nil || n != 3 {
		t.Fatalf("merge added %d (%v), want 3 (6-8; 4 and 5 are the same blocks)", n, err)
	}
	if m, _ := a.Missing(1, 8); len(m) != 0 {
		t.Fatalf("missing after merge: %v", m)
	}
	for h := uint64(1); h <= 8; h++ {
		got, err := a.Get(h)
		if err != nil || !reflect.DeepEqual(got, testBlock(h)) {
			t.Fatalf("block %d after merge: %v", h, err)
		}
	}
	// Another chain is refused.
	c := openBoundWith(t, t.TempDir(), Options{}, chain.FamilyCometBFT, "other-9")
	defer c.Close()
	put(t, c, 20)
	var wc *WrongChainError
	if _, err := a.MergeFrom(c, 0, ^uint64(0)); !errors.As(err, &wc) {
		t.Fatalf("merge of another chain: %v", err)
	}
	// A different block at a height both hold is a conflict.
	d := openTest(t)
	bt := d.NewBatch()
	defer bt.Close()
	if err := bt.Put(chain.Block{Height: 30, Hash: hashOf(300), ParentHash: hashOf(29), Raw: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := bt.Put(chain.Block{Height: 31, Hash: hashOf(31), ParentHash: hashOf(300), Raw: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	put(t, a, 30)
	var ce *ConflictError
	if _, err := a.MergeFrom(d, 0, ^uint64(0)); !errors.As(err, &ce) || ce.Height != 30 {
		t.Fatalf("merge of a conflicting block: %v", err)
	}
}

var hashOf = chaintest.HashOf

// TestConflictsFoundAfterReopenAndDelete: a batch skips the lookup of a
// height only above every height staged, so a different block at a staged
// height is a conflict after the store is reopened too, and a deleted
// height can be staged again.
func TestConflictsFoundAfterReopenAndDelete(t *testing.T) {
	s := openTest(t)
	for h := uint64(1); h <= 5; h++ {
		put(t, s, h)
	}
	dir := s.Dir()
	s.Close()
	s = openDir(t, dir)
	defer s.Close()
	other := testBlock(3)
	other.Hash = hashOf(333)
	b := s.NewBatch()
	defer b.Close()
	var ce *ConflictError
	if err := b.Put(other); !errors.As(err, &ce) || ce.Height != 3 {
		t.Fatalf("Put of another block 3 after reopening: %v, want *ConflictError", err)
	}
	if err := b.Put(testBlock(6)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	other = testBlock(6)
	other.Hash = hashOf(666)
	if err := b.Put(other); !errors.As(err, &ce) || ce.Height != 6 {
		t.Fatalf("Put of another block 6 after its commit: %v, want *ConflictError", err)
	}
	if err := s.Delete(5, 6); err != nil {
		t.Fatal(err)
	}
	other = testBlock(5)
	other.Hash = hashOf(555)
	if err := b.Put(other); err != nil {
		t.Fatalf("Put at deleted height 5: %v", err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if hash, _, err := s.Header(5); err != nil || !bytes.Equal(hash, hashOf(555)) {
		t.Fatalf("height 5 after staging it again: %x, %v", hash, err)
	}
}
