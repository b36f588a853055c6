package archive

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/blockhaul/blockhaul/chain/chaintest"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

// TestSnapshotWhileWritingRestoresAndVerifies takes a snapshot while
// another goroutine keeps staging blocks, through a plain directory and a
// file:// URL, and restores each: the restored store verifies clean and
// holds exactly the heights the manifest says, a prefix of what was
// written.
func TestSnapshotWhileWritingRestoresAndVerifies(t *testing.T) {
	f := families()[0]
	s := stage(t, filepath.Join(t.TempDir(), "s"), f, 1, 200)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for h := uint64(201); h < 5000; h += 50 {
			select {
			case <-stop:
				return
			default:
			}
			blocks, err := f.src.Fetch(ctx, h, h+49)
			if err != nil {
				werr = err
				return
			}
			b := s.NewBatch()
			for _, blk := range blocks {
				if err := b.Put(blk); err != nil {
					werr = err
				}
			}
			if err := b.Commit(); err != nil {
				werr = err
			}
			b.Close()
		}
	}()
	base := t.TempDir()
	dests := []string{filepath.Join(base, "plain"), "file://" + filepath.ToSlash(filepath.Join(base, "url"))}
	var reps []*SnapshotReport
	for _, d := range dests {
		bucket, err := OpenBucket(ctx, d, true) // neither directory exists yet
		if err != nil {
			t.Fatal(err)
		}
		r, err := Snapshot(ctx, s, bucket, d)
		bucket.Close()
		if err != nil {
			t.Fatalf("snapshot to %s: %v", d, err)
		}
		reps = append(reps, r)
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	for i, d := range dests {
		bucket, err := OpenBucket(ctx, d, false)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "restored")
		rr, err := Restore(ctx, bucket, d, dir)
		bucket.Close()
		if err != nil {
			t.Fatalf("restore from %s: %v", d, err)
		}
		if rr.Verify.Problems() != 0 || len(reps[i].Staged) != 1 || reps[i].Staged[0].From != 1 {
			t.Fatalf("restored from %s: %s, manifest staged %v", d, summary(rr.Verify), reps[i].Staged)
		}
		got := stagingtest.Open(t, dir, staging.Options{ReadOnly: true})
		rs, err := got.Staged(0, 1<<40)
		got.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].From != reps[i].Staged[0].From || rs[0].To != reps[i].Staged[0].To || rs[0].To < 200 {
			t.Fatalf("restored %v, manifest %v", rs, reps[i].Staged)
		}
		t.Logf("%s: snapshot held 1-%d", d, rs[0].To)
	}
}

// TestRestoreRefusesABadSnapshot: a flipped byte in one file, a missing
// file and a missing manifest are refused by name, and nothing is left at
// the destination.
func TestRestoreRefusesABadSnapshot(t *testing.T) {
	f := families()[0]
	s := stage(t, filepath.Join(t.TempDir(), "s"), f, 1, 300)
	ctx := context.Background()
	dest := filepath.Join(t.TempDir(), "snap")
	bucket, err := OpenBucket(ctx, dest, true)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	if _, err := Snapshot(ctx, s, bucket, dest); err != nil {
		t.Fatal(err)
	}
	restore := func() error {
		dir := filepath.Join(t.TempDir(), "restored")
		_, err := Restore(ctx, bucket, dest, dir)
		if _, serr := os.Stat(dir); serr == nil {
			t.Errorf("a refused restore left %s", dir)
		}
		if _, serr := os.Stat(dir + ".restoring"); serr == nil {
			t.Errorf("a refused restore left %s.restoring", dir)
		}
		return err
	}
	var victim string
	for _, n := range []string{"MANIFEST", ".log", ".sst"} {
		for _, f := range mustManifest(t, dest).Files {
			if strings.Contains(f.Name, n) && f.Size > 0 {
				victim = f.Name
			}
		}
		if victim != "" {
			break
		}
	}
	path := filepath.Join(dest, victim)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var re *RestoreError
	if err := restore(); !errors.As(err, &re) || !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("flipped byte in %s: %v", victim, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := restore(); !errors.As(err, &re) || !strings.Contains(err.Error(), victim+" is missing") {
		t.Fatalf("missing %s: %v", victim, err)
	}
	if err := os.Remove(filepath.Join(dest, ManifestName)); err != nil {
		t.Fatal(err)
	}
	if err := restore(); !errors.As(err, &re) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing manifest: %v", err)
	}
}

func mustManifest(t *testing.T, dir string) Manifest {
	t.Helper()
	return chaintest.ReadJSON[Manifest](t, filepath.Join(dir, ManifestName))
}

// TestSnapshotReplacesAnEarlierOneAndRefusesAForeignDestination: a second
// snapshot into the same destination leaves exactly its own files there
// (one MANIFEST; before, the first snapshot's stayed beside it: two), and
// restores whole; a destination holding another file is refused by name
// and nothing is written into it.
func TestSnapshotReplacesAnEarlierOneAndRefusesAForeignDestination(t *testing.T) {
	f := families()[0]
	dir := filepath.Join(t.TempDir(), "s")
	s := stage(t, dir, f, 1, 300)
	ctx := context.Background()
	dest := filepath.Join(t.TempDir(), "snap")
	snap := func(dest string) (*SnapshotReport, error) {
		bucket, err := OpenBucket(ctx, dest, true)
		if err != nil {
			t.Fatal(err)
		}
		defer bucket.Close()
		return Snapshot(ctx, s, bucket, dest)
	}
	if r, err := snap(dest); err != nil || r.Replaced {
		t.Fatalf("first snapshot: %+v, %v", r, err)
	}
	first := mustManifest(t, dest)
	// The store opened again (a new log and MANIFEST) and more blocks,
	// flushed: the second checkpoint has other files.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var err error
	if s, err = staging.Open(dir, staging.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	blocks, err := f.src.Fetch(ctx, 301, 900)
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, s, blocks...)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := snap(dest)
	if err != nil || !r.Replaced || r.Removed == 0 {
		t.Fatalf("second snapshot: %+v, %v", r, err)
	}
	second := mustManifest(t, dest)
	if len(second.Staged) != 1 || second.Staged[0] != (Gap{From: 1, To: 900}) {
		t.Fatalf("second snapshot staged %v", second.Staged)
	}
	var want, got []string
	for _, f := range second.Files {
		want = append(want, f.Name)
	}
	want = append(want, ManifestName)
	ents, err := os.ReadDir(dest)
	if err != nil {
		t.Fatal(err)
	}
	manifests := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".attrs") {
			continue
		}
		got = append(got, e.Name())
		if strings.HasPrefix(e.Name(), "MANIFEST-") {
			manifests++
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) || manifests != 1 {
		t.Errorf("after a second snapshot the destination holds %v, want its files %v (first snapshot's: %d files)", got, want, len(first.Files))
	}
	bucket, err := OpenBucket(ctx, dest, false)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := Restore(ctx, bucket, dest, filepath.Join(t.TempDir(), "restored"))
	bucket.Close()
	if err != nil || rr.Verify.Problems() != 0 || rr.Verify.Records != 900 {
		t.Fatalf("restore of the second snapshot: %v", err)
	}

	foreign := filepath.Join(t.TempDir(), "notes")
	if err := os.Mkdir(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	var fe *ForeignDestError
	if _, err := snap(foreign); !errors.As(err, &fe) || fe.Object != "notes.txt" {
		t.Fatalf("snapshot into a directory holding notes.txt: %v, want a *ForeignDestError naming it", err)
	}
	if ents, err := os.ReadDir(foreign); err != nil || len(ents) != 1 {
		t.Errorf("a refused snapshot wrote into %s: %d entries, %v", foreign, len(ents), err)
	}
}
