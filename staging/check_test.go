package staging

import (
	"bytes"
	"errors"
	"testing"
)

// TestCheckRecordsNamesEachBadRecord damages records under the store's
// feet — a flipped payload byte, a flipped header byte, an index entry
// naming another hash, a record without its index entry and the reverse —
// and expects CheckRecords to report exactly those heights and read every
// other record, decompressed when asked.
func TestCheckRecordsNamesEachBadRecord(t *testing.T) {
	s := openTest(t)
	for h := uint64(1); h <= 20; h++ {
		put(t, s, h)
	}
	value := func(h uint64) []byte {
		v, closer, err := s.db.Get(heightKey(prefixBlock, h))
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		return bytes.Clone(v)
	}
	set := func(k, v []byte) {
		if err := s.db.Set(k, v, nil); err != nil {
			t.Fatal(err)
		}
	}
	v := value(3)
	v[len(v)-1] ^= 1 // payload
	set(heightKey(prefixBlock, 3), v)
	v = value(5)
	v[12] ^= 1 // inside the hash, in the header
	set(heightKey(prefixBlock, 5), v)
	set(heightKey(prefixIndex, 8), indexValue(hashOf(999), hashOf(7)))
	if err := s.db.Delete(heightKey(prefixIndex, 11), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Delete(heightKey(prefixBlock, 14), nil); err != nil {
		t.Fatal(err)
	}
	for _, decompress := range []bool{false, true} {
		bad := map[uint64]string{}
		var seen []uint64
		err := s.CheckRecords(1, 20, decompress, func(st RecordState) error {
			seen = append(seen, st.Height)
			if st.Err != nil {
				var ce *CorruptRecordError
				if !errors.As(st.Err, &ce) || ce.Height != st.Height {
					t.Errorf("height %d: %v is not a CorruptRecordError naming it", st.Height, st.Err)
				}
				bad[st.Height] = st.Err.Error()
				return nil
			}
			if decompress && !bytes.Equal(st.Raw, testBlock(st.Height).Raw) {
				t.Errorf("height %d: raw %q", st.Height, st.Raw)
			}
			if !bytes.Equal(st.Header.Hash, hashOf(st.Height)) {
				t.Errorf("height %d: header hash %x", st.Height, st.Header.Hash)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != 20 {
			t.Fatalf("saw heights %v, want 1-20", seen)
		}
		for _, h := range []uint64{3, 5, 8, 11, 14} {
			if bad[h] == "" {
				t.Errorf("decompress=%v: height %d not reported", decompress, h)
			}
		}
		if len(bad) != 5 {
			t.Errorf("decompress=%v: reported %v, want 3, 5, 8, 11, 14", decompress, bad)
		}
	}
}
