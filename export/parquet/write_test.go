package parquet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/export/parquet"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/fault"
)

func TestSegments(t *testing.T) {
	for _, c := range []struct {
		from, to, size uint64
		want           [][2]uint64
	}{
		{1, 250, 100, [][2]uint64{{1, 99}, {100, 199}, {200, 250}}},
		{0, 199, 100, [][2]uint64{{0, 99}, {100, 199}}},
		{150, 160, 100, [][2]uint64{{150, 160}}},
		{5, 5, 1, [][2]uint64{{5, 5}}},
		{1<<64 - 3, 1<<64 - 1, 1 << 63, [][2]uint64{{1<<64 - 3, 1<<64 - 1}}},
	} {
		if got := parquet.Segments(c.from, c.to, c.size); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Segments(%d, %d, %d) = %v, want %v", c.from, c.to, c.size, got, c.want)
		}
	}
	// Names sort by height as strings do.
	if a, b := parquet.FileName("blocks", 999, 999), parquet.FileName("blocks", 1000, 1999); a >= b {
		t.Errorf("%s sorts after %s", a, b)
	}
}

// files reads every file under dir (relative path → bytes).
func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func names(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Two writes of the same staged range into two destinations give the
// same bytes, manifest included; a re-run over a complete destination
// writes nothing.
func TestWriteIsDeterministicAndResumes(t *testing.T) {
	ctx := context.Background()
	c := cometChain()
	tmp := t.TempDir()
	store := stage(t, filepath.Join(tmp, "staging"), c, 1, 250)
	defer store.Close()
	cfg := parquet.Config{From: 1, To: 250, SegmentBlocks: 100, Version: "test", Options: map[string]string{"tables": "all"}}
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	ra, err := parquet.Write(ctx, store, c.dec, dirBucket(t, a), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ra.Segments != 3 || ra.Skipped != 0 {
		t.Fatalf("first write: %d segments written, %d skipped; want 3, 0", ra.Segments, ra.Skipped)
	}
	cfg.RowGroupRows = 50 // small row groups: several per file
	if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, b), cfg); err == nil {
		// b is a new destination: the same config as a's must give a's bytes
	} else {
		t.Fatal(err)
	}
	cfg.RowGroupRows = 0
	if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, filepath.Join(tmp, "c")), cfg); err != nil {
		t.Fatal(err)
	}
	fa, fc := files(t, a), files(t, filepath.Join(tmp, "c"))
	if !reflect.DeepEqual(fa, fc) {
		t.Fatalf("two writes differ: %v vs %v", names(fa), names(fc))
	}
	if want := 1 + 3*len(c.dec.Tables()); len(fa) != want {
		t.Fatalf("%d files, want %d: %v", len(fa), want, names(fa))
	}
	if reflect.DeepEqual(fa, files(t, b)) {
		t.Fatal("files of another row group size are the same bytes: the option changed nothing")
	}

	// Resumed: nothing to do.
	again, err := parquet.Write(ctx, store, c.dec, dirBucket(t, a), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if again.Segments != 0 || again.Skipped != 3 {
		t.Fatalf("re-run: %d written, %d skipped; want 0, 3", again.Segments, again.Skipped)
	}
	// A missing file: only its segment is written again, to the same bytes.
	gone := "transactions/00000000000000000100-00000000000000000199.parquet"
	if err := os.Remove(filepath.Join(a, gone)); err != nil {
		t.Fatal(err)
	}
	again, err = parquet.Write(ctx, store, c.dec, dirBucket(t, a), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if again.Segments != 1 || again.Skipped != 2 {
		t.Fatalf("after removing %s: %d written, %d skipped; want 1, 2", gone, again.Segments, again.Skipped)
	}
	if !reflect.DeepEqual(files(t, a), fc) {
		t.Fatal("the segment written again differs from the first write")
	}
}

// A longer range replaces the partial last segment with the whole one and
// removes the partial one's files once the manifest no longer names them.
func TestWriteExtendsThePartialSegment(t *testing.T) {
	ctx := context.Background()
	c := cometChain()
	tmp := t.TempDir()
	store := stage(t, filepath.Join(tmp, "staging"), c, 1, 350)
	defer store.Close()
	out := filepath.Join(tmp, "out")
	cfg := parquet.Config{From: 1, To: 250, SegmentBlocks: 100, Version: "test"}
	if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, out), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.To = 350
	res, err := parquet.Write(ctx, store, c.dec, dirBucket(t, out), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != 2 || res.Skipped != 2 || res.Removed != len(c.dec.Tables()) {
		t.Fatalf("written %d, skipped %d, removed %d; want 2, 2, %d", res.Segments, res.Skipped, res.Removed, len(c.dec.Tables()))
	}
	fs := files(t, out)
	for n := range fs {
		if strings.Contains(n, "-00000000000000000250.") {
			t.Errorf("%s of the replaced segment is still there", n)
		}
	}
	m, _, err := parquet.ReadManifest(ctx, dirBucket(t, out))
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]uint64
	for i, s := range m.Segments {
		got = append(got, [2]uint64{s.From, s.To})
		if i > 0 && m.Segments[i-1].LastHash != s.ParentHash {
			t.Errorf("segment %d-%d does not chain to the one before", s.From, s.To)
		}
	}
	if want := [][2]uint64{{1, 99}, {100, 199}, {200, 299}, {300, 350}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("manifest segments %v, want %v", got, want)
	}
	if _, err := parquet.Verify(ctx, dirBucket(t, out), parquet.VerifyConfig{Dest: out, Store: store, Decoder: c.dec, Version: "test"}); err != nil {
		t.Fatal(err)
	}
}

// Verify names a flipped byte's file and a missing file; with staging it
// makes every segment again and finds it equal.
func TestVerifyNamesWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	c := evmChain()
	tmp := t.TempDir()
	store := stage(t, filepath.Join(tmp, "staging"), c, 1, 120)
	defer store.Close()
	out := filepath.Join(tmp, "out")
	if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, out), parquet.Config{From: 1, To: 120, SegmentBlocks: 50, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	rep, err := parquet.Verify(ctx, dirBucket(t, out), parquet.VerifyConfig{Dest: out, Store: store, Decoder: c.dec, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Segments != 3 || rep.Rebuilt != 3 || rep.Files != 3*len(c.dec.Tables()) || rep.Rows == 0 {
		t.Fatalf("report %+v", rep)
	}
	flipped := "logs/00000000000000000050-00000000000000000099.parquet"
	p := filepath.Join(out, flipped)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := "blocks/00000000000000000100-00000000000000000120.parquet"
	if err := os.Remove(filepath.Join(out, missing)); err != nil {
		t.Fatal(err)
	}
	rep, err = parquet.Verify(ctx, dirBucket(t, out), parquet.VerifyConfig{Dest: out})
	var ve *parquet.VerifyError
	if !errors.As(err, &ve) || fault.Of(err) != fault.Data {
		t.Fatalf("verify of a damaged destination: %v (class %v), want a *VerifyError of class data", err, fault.Of(err))
	}
	var paths []string
	for _, p := range rep.Problems {
		paths = append(paths, p.Path+": "+p.What)
	}
	if len(rep.Problems) != 2 || rep.Problems[0].Path != flipped || !strings.Contains(rep.Problems[0].What, "SHA-256") ||
		rep.Problems[1].Path != missing || rep.Problems[1].What != "missing" {
		t.Fatalf("problems %q, want %s's SHA-256 and %s missing", paths, flipped, missing)
	}
}

// Bad input is refused before anything is written: a segment size of 0,
// another chain's segments, objects that are not segments, a column type
// with no Parquet form.
func TestWriteRefusals(t *testing.T) {
	ctx := context.Background()
	c := cometChain()
	tmp := t.TempDir()
	store := stage(t, filepath.Join(tmp, "staging"), c, 1, 30)
	defer store.Close()
	cfg := parquet.Config{From: 1, To: 30, SegmentBlocks: 10, Version: "test"}

	empty := filepath.Join(tmp, "zero")
	zero := cfg
	zero.SegmentBlocks = 0
	if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, empty), zero); err == nil || fault.Of(err) != fault.Config || !strings.Contains(err.Error(), "segment size") {
		t.Fatalf("segment size 0: %v", err)
	}
	if n := len(files(t, empty)); n != 0 {
		t.Fatalf("a refused job wrote %d files", n)
	}

	// Another chain's segments.
	other := evmChain()
	ostore := stage(t, filepath.Join(tmp, "ostaging"), other, 1, 30)
	defer ostore.Close()
	dest := filepath.Join(tmp, "dest")
	if _, err := parquet.Write(ctx, ostore, other.dec, dirBucket(t, dest), cfg); err != nil {
		t.Fatal(err)
	}
	before := files(t, dest)
	_, err := parquet.Write(ctx, store, c.dec, dirBucket(t, dest), cfg)
	var fe *parquet.ForeignError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "evm") {
		t.Fatalf("another chain's destination: %v", err)
	}
	if !reflect.DeepEqual(files(t, dest), before) {
		t.Fatal("a refused job changed the destination")
	}
	// Another segment size over this chain's segments.
	own := filepath.Join(tmp, "own")
	if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, own), cfg); err != nil {
		t.Fatal(err)
	}
	resized := cfg
	resized.SegmentBlocks = 20
	if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, own), resized); err == nil || fault.Of(err) != fault.Config {
		t.Fatalf("another segment size: %v", err)
	}

	// An object that is not a segment.
	foreign := filepath.Join(tmp, "foreign")
	if err := os.MkdirAll(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, foreign), cfg); !errors.As(err, &fe) || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("a destination with notes.txt: %v", err)
	}
	if n := len(files(t, foreign)); n != 1 {
		t.Fatalf("a refused job left %d files, want the 1 that was there", n)
	}

	// A column type without a Parquet form.
	bad := filepath.Join(tmp, "badtype")
	if _, err := parquet.Write(ctx, store, oddDecoder{c.dec}, dirBucket(t, bad), cfg); err == nil || fault.Of(err) != fault.Config || !strings.Contains(err.Error(), "point") {
		t.Fatalf("a column of type point: %v", err)
	}
	if n := len(files(t, bad)); n != 0 {
		t.Fatalf("a refused job wrote %d files", n)
	}
}

// oddDecoder adds a column of a type the files cannot hold.
type oddDecoder struct{ export.Decoder }

func (d oddDecoder) Tables() []chain.Table {
	ts := d.Decoder.Tables()
	ts[0].Columns = append(ts[0].Columns[:len(ts[0].Columns):len(ts[0].Columns)], chain.Column{Name: "where", Type: "point", Null: true})
	return ts
}

// A write stopped at each crash point (a file written, every file but no
// manifest) and run again gives the bytes of a write never stopped, and
// a reader never sees a segment in the manifest without its files.
func TestWriteStoppedAndResumed(t *testing.T) {
	ctx := context.Background()
	c := cometChain()
	tmp := t.TempDir()
	store := stage(t, filepath.Join(tmp, "staging"), c, 1, 250)
	defer store.Close()
	cfg := parquet.Config{From: 1, To: 250, SegmentBlocks: 100, Version: "test"}
	whole := filepath.Join(tmp, "whole")
	if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, whole), cfg); err != nil {
		t.Fatal(err)
	}
	want := files(t, whole)
	stop := errors.New("stopped")
	for _, at := range []struct {
		p crashpoint.Point
		n int
	}{{crashpoint.ParquetFile, 1}, {crashpoint.ParquetFile, 6}, {crashpoint.ParquetManifest, 1}, {crashpoint.ParquetManifest, 3}} {
		out := filepath.Join(tmp, string(at.p)+string(rune('0'+at.n)))
		hits := 0
		restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
			if p == at.p {
				if hits++; hits == at.n {
					return stop
				}
			}
			return nil
		})
		_, err := parquet.Write(ctx, store, c.dec, dirBucket(t, out), cfg)
		restore()
		if !errors.Is(err, stop) {
			t.Fatalf("%s #%d: %v, want the stop", at.p, at.n, err)
		}
		// What a reader sees: every segment the manifest lists is whole.
		if _, ok, err := parquet.ReadManifest(ctx, dirBucket(t, out)); err != nil {
			t.Fatal(err)
		} else if ok {
			if _, err := parquet.Verify(ctx, dirBucket(t, out), parquet.VerifyConfig{Dest: out}); err != nil {
				t.Fatalf("%s #%d: the manifest lists a segment that is not whole: %v", at.p, at.n, err)
			}
		}
		if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, out), cfg); err != nil {
			t.Fatal(err)
		}
		if got := files(t, out); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s #%d: resumed files %v differ from a whole write's %v", at.p, at.n, names(got), names(want))
		}
	}
}
