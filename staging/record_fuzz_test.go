package staging

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
)

// FuzzRecordCodec: a block encoded by Store.Encode decodes to itself; any
// one byte of its value changed is a *CorruptRecordError naming the height,
// never a different block; and arbitrary bytes never panic, and decode only
// to a record that is itself consistent.
func FuzzRecordCodec(f *testing.F) {
	f.Add(uint64(1), []byte("hash-1"), []byte("hash-0"), []byte(`{"block":{}}`), 3, byte(1), []byte{})
	f.Add(uint64(1<<40), bytes.Repeat([]byte{7}, 32), []byte{}, bytes.Repeat([]byte("ab"), 300), 20, byte(0x80), []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	s := openBoundWith(f, f.TempDir(), Options{}, chain.FamilyEVM, "fuzz-1")
	defer s.Close()
	f.Fuzz(func(t *testing.T, h uint64, hash, parent, raw []byte, at int, flip byte, arbitrary []byte) {
		// Arbitrary values: no panic; a value that decodes is consistent.
		if b, hdr, err := s.decodeValue(h, arbitrary, nil); err == nil {
			if hdr.Height != h || b.Height != h || len(b.Raw) != int(hdr.RawLen) || !bytes.Equal(b.Hash, hdr.Hash) {
				t.Fatalf("arbitrary value decoded inconsistently: %+v %+v", hdr, b)
			}
		} else {
			var ce *CorruptRecordError
			if !errors.As(err, &ce) || ce.Height != h {
				t.Fatalf("arbitrary value: %v, want a CorruptRecordError at %d", err, h)
			}
		}
		if len(hash) == 0 || len(hash) > 255 || len(parent) > 255 {
			return
		}
		blk := chain.Block{Height: h, Hash: hash, ParentHash: parent, Raw: raw}
		e, err := s.Encode(blk)
		if err != nil {
			t.Fatal(err)
		}
		got, hdr, err := s.decodeValue(h, e.Value, nil)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if !bytes.Equal(got.Raw, raw) || !bytes.Equal(got.Hash, hash) || !bytes.Equal(got.ParentHash, parent) || hdr.Family != chain.FamilyEVM {
			t.Fatalf("round trip changed the block: %+v", got)
		}
		// The same value under another key is corrupt.
		if _, _, err := s.decodeValue(h+1, e.Value, nil); err == nil {
			t.Fatal("a value decoded under another height's key")
		}
		if flip == 0 {
			flip = 1
		}
		bad := bytes.Clone(e.Value)
		i := int(uint(at) % uint(len(bad)))
		bad[i] ^= flip
		if _, _, err := s.decodeValue(h, bad, nil); err == nil {
			t.Fatalf("byte %d of %d xor %02x decoded without error", i, len(bad), flip)
		} else {
			var ce *CorruptRecordError
			if !errors.As(err, &ce) || ce.Height != h {
				t.Fatalf("flipped byte: %v, want a CorruptRecordError at %d", err, h)
			}
		}
		if _, _, err := s.decodeValue(h, bad[:i], nil); err == nil {
			t.Fatalf("value truncated to %d of %d bytes decoded", i, len(bad))
		}
	})
}
