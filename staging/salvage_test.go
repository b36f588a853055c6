package staging

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/cockroachdb/pebble/v2"
)

// salvageFixture stages heights 1-400 over four flushes (tables and blob
// files), deletes 50-59 (a range deletion, flushed), overwrites nothing,
// stages 401-430 into the WAL only, mirrors two checkpoints and closes. It
// returns the directory and every live key's value as the store reads it.
func salvageFixture(t *testing.T) (string, map[uint64][]byte) {
	t.Helper()
	dir := t.TempDir()
	s := openBound(t, dir)
	for h := uint64(1); h <= 400; h += 100 {
		putFlushed(t, s, h, h+99)
		if h == 1 {
			if err := s.Delete(50, 59); err != nil {
				t.Fatal(err)
			}
		}
	}
	putBig(t, s, 401, 430)
	if err := s.Delete(420, 421); err != nil { // a range deletion in the WAL
		t.Fatal(err)
	}
	for _, m := range []string{"db-a", "db-b"} {
		if err := s.SetMirror(m, Checkpoint{Height: 7}); err != nil {
			t.Fatal(err)
		}
	}
	want := storedValues(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, want
}

// openBound opens a store in dir bound to the test chain.
func openBound(t *testing.T, dir string) *Store {
	t.Helper()
	return openBoundWith(t, dir, Options{}, chain.FamilyCometBFT, "test-1")
}

// openBoundWith opens a store in dir with opts, bound to the chain id of
// family fam.
func openBoundWith(t testing.TB, dir string, opts Options, fam chain.Family, id string) *Store {
	t.Helper()
	s := openDirWith(t, dir, opts)
	if err := s.Bind(fam, id); err != nil {
		t.Fatal(err)
	}
	return s
}

func storedValues(t *testing.T, s *Store) map[uint64][]byte {
	t.Helper()
	out := map[uint64][]byte{}
	lo, hi := boundsFor(prefixBlock, 0, ^uint64(0))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		out[keyHeight(it.Key())] = bytes.Clone(it.Value())
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

func salvaged(t *testing.T, dir string) (*FileStore, map[uint64][]byte, []uint64) {
	t.Helper()
	f, err := OpenFiles(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	got := map[uint64][]byte{}
	var bad []uint64
	err = noPanic(t, "salvage", func() error {
		return f.Records(0, ^uint64(0), func(h uint64, rec *SalvageRecord, err error) error {
			if err != nil {
				bad = append(bad, h)
				return nil
			}
			if rec.Block.Height != h || !bytes.Equal(rec.Block.Hash, hashOf(h)) {
				t.Errorf("height %d: salvaged block %d hash %X", h, rec.Block.Height, rec.Block.Hash)
			}
			if !bytes.Equal(rec.Block.Raw, noise(h, recSize)) {
				t.Errorf("height %d: salvaged raw record differs", h)
			}
			got[h] = rec.Encoded.Value
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return f, got, bad
}

func sameValues(t *testing.T, got, want map[uint64][]byte) {
	t.Helper()
	for h, v := range want {
		if !bytes.Equal(got[h], v) {
			t.Errorf("height %d: salvaged value differs (%d bytes, want %d)", h, len(got[h]), len(v))
		}
	}
	for h := range got {
		if _, ok := want[h]; !ok {
			t.Errorf("height %d salvaged, but the store does not hold it", h)
		}
	}
}

func manifestOf(t *testing.T, dir string) string {
	return filepath.Join(dir, storeFile(t, dir, "MANIFEST-"))
}

// The files of a store read without its MANIFEST give every record the
// store holds, byte for byte, its deletions applied, its identity and
// mirrors: with the MANIFEST intact, deleted, truncated or garbled, and with
// its marker gone too.
func TestFileStoreReadsWithoutTheManifest(t *testing.T) {
	for _, damage := range []string{"intact", "deleted", "truncated", "garbled", "marker-and-manifest-gone"} {
		t.Run(damage, func(t *testing.T) {
			dir, want := salvageFixture(t)
			m := manifestOf(t, dir)
			switch damage {
			case "deleted":
				os.Remove(m)
			case "truncated":
				st, _ := os.Stat(m)
				os.Truncate(m, st.Size()/3)
			case "garbled":
				b, _ := os.ReadFile(m)
				for i := len(b) / 4; i < len(b)/4+64 && i < len(b); i++ {
					b[i] ^= 0xa5
				}
				os.WriteFile(m, b, 0o644)
			case "marker-and-manifest-gone":
				os.Remove(m)
				markers, _ := filepath.Glob(filepath.Join(dir, "marker.manifest.*"))
				for _, mk := range markers {
					os.Remove(mk)
				}
			}
			f, got, bad := salvaged(t, dir)
			if len(bad) != 0 || len(f.Damaged()) != 0 {
				t.Fatalf("unreadable heights %v, damaged files %v", bad, f.Damaged())
			}
			sameValues(t, got, want)
			for _, h := range []uint64{50, 59, 420, 421} {
				if _, ok := got[h]; ok {
					t.Errorf("height %d was deleted, yet salvaged", h)
				}
			}
			id, ok := f.Identity()
			if !ok || id.ChainID != "test-1" || id.FirstHeight != 1 || !bytes.Equal(id.FirstHash, hashOf(1)) {
				t.Errorf("identity %+v %v", id, ok)
			}
			ms := f.Mirrors()
			if len(ms) != 2 || ms["db-a"].Height != 7 || ms["db-b"].Height != 7 {
				t.Errorf("mirrors %+v", ms)
			}
			if lo, hi, ok := f.Bounds(); !ok || lo != 1 || hi != 430 {
				t.Errorf("bounds %d-%d %v", lo, hi, ok)
			}
		})
	}
}

// A store never flushed holds its records in the WAL only.
func TestFileStoreReadsTheWAL(t *testing.T) {
	dir := t.TempDir()
	s := openBound(t, dir)
	putBig(t, s, 1, 40)
	want := storedValues(t, s)
	if err := s.Close(); err != nil { // Pebble's Close does not flush
		t.Fatal(err)
	}
	crashed := dir
	os.Remove(manifestOf(t, crashed))
	if ssts, _ := filepath.Glob(filepath.Join(crashed, "*.sst")); len(ssts) != 0 {
		t.Fatalf("the fixture flushed: %v", ssts)
	}
	_, got, bad := salvaged(t, crashed)
	if len(bad) != 0 {
		t.Fatalf("unreadable %v", bad)
	}
	sameValues(t, got, want)
}

// A garbled table loses the heights of its bad blocks only; the rest of
// the table is read past them, and the damage names the file.
func TestFileStoreReadsPastABadTableBlock(t *testing.T) {
	dir, want := salvageFixture(t)
	os.Remove(manifestOf(t, dir))
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	slices.Sort(ssts)
	if len(ssts) == 0 {
		t.Fatalf("no table written")
	}
	victim := ssts[len(ssts)-1]
	flipByte(t, victim, func(n int) int { return n / 10 }) // among the record keys, which come first
	f, got, bad := salvaged(t, dir)
	d := f.Damaged()
	if len(d) == 0 || d[0].File != filepath.Base(victim) {
		t.Fatalf("damaged %v, want %s named", d, filepath.Base(victim))
	}
	lost, firstLost, past := 0, ^uint64(0), 0
	for h, v := range want {
		if g, ok := got[h]; !ok {
			lost++
			firstLost = min(firstLost, h)
		} else if !bytes.Equal(g, v) {
			t.Errorf("height %d differs", h)
		}
	}
	for h := range got {
		if h > firstLost {
			past++
		}
	}
	if lost == 0 || past == 0 {
		t.Fatalf("lost %d heights (unreadable %v), %d read past the first lost: want a bad block's heights lost and the rest of the table read", lost, bad, past)
	}
	t.Logf("lost %d heights of %s: %v", lost, filepath.Base(victim), d)
}

// The flattened range deletions give, for any key, the highest sequence
// number of the deletions covering it, as a scan of them all does.
func TestCoverAgreesWithEveryDeletion(t *testing.T) {
	var ts []tombstone
	for i := uint64(0); i < 60; i++ {
		lo := (i * 37) % 200
		ts = append(ts, tombstone{start: heightKey(prefixBlock, lo), end: heightKey(prefixBlock, lo+1+(i*11)%40), seq: (i * 7919) % 97})
	}
	ts = append(ts, tombstone{start: []byte{prefixBlock}, end: []byte{prefixBlock + 1}, seq: 3}) // a prune of everything
	c := newCover(ts)
	for h := uint64(0); h < 260; h++ {
		k := heightKey(prefixBlock, h)
		var want uint64
		var wok bool
		for _, tb := range ts {
			if bytes.Compare(k, tb.start) >= 0 && bytes.Compare(k, tb.end) < 0 && (!wok || tb.seq > want) {
				want, wok = tb.seq, true
			}
		}
		if got, ok := c.at(k); got != want || ok != wok {
			t.Fatalf("height %d: cover says %d %v, the deletions %d %v", h, got, ok, want, wok)
		}
	}
	if _, ok := c.at(heightKey(prefixIndex, 5)); ok {
		t.Fatalf("an index key is covered by record deletions")
	}
}
