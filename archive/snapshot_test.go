package archive

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/blockhaul/blockhaul/staging"
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
		got, err := staging.Open(dir, staging.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
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
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
