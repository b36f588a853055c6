package chunked_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/archive/chunked"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

// stage writes heights from..to of fam's synthetic chain (seed) into a new
// store in dir, closed when the test ends.
func stage(t *testing.T, dir string, fam *family.Family, seed int64, from, to uint64) *staging.Store {
	t.Helper()
	src, err := fam.Source(family.SourceSynthetic, family.SourceOptions{Synthetic: family.SyntheticOptions{Seed: seed, TxPerBlock: 2}})
	if err != nil {
		t.Fatal(err)
	}
	s := stagingtest.Open(t, dir, staging.Options{})
	t.Cleanup(func() { s.Close() })
	if _, err := loader.Fetch(context.Background(), src, s, from, to, loader.Config{Verify: fam.Verifier(chain.VerifyFull)}, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// publish publishes store's from..to to url in chunks of size.
func publish(t *testing.T, store *staging.Store, fam *family.Family, url string, size, from, to uint64) *chunked.PublishReport {
	t.Helper()
	b, err := archive.OpenBucket(context.Background(), url, true)
	if err != nil {
		t.Fatal(err)
	}
	r, err := chunked.Publish(context.Background(), store, b, chunked.PublishConfig{Family: fam.Name, Genesis: fam.Genesis,
		ChunkBlocks: size, From: from, To: to, Verify: fam.Verifier(chain.VerifyFull), Dest: archive.RedactURL(url)})
	if err != nil {
		t.Fatalf("publish to %s: %v", archive.RedactURL(url), err)
	}
	return r
}

// rebuild fetches from..to from the archive at url into a new store in
// dir, through the loader and the family's verification, as --archive does.
func rebuild(t *testing.T, dir string, fam *family.Family, url string, from, to uint64) (*staging.Store, error) {
	t.Helper()
	src, err := fam.Source(family.SourceArchive, family.SourceOptions{Archive: url})
	if err != nil {
		t.Fatal(err)
	}
	defer src.(interface{ Close() }).Close()
	s := stagingtest.Open(t, dir, staging.Options{})
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := src.(loader.RangeChecker).CheckRange(ctx, from, to); err != nil {
		return s, err
	}
	_, err = loader.Fetch(ctx, src, s, from, to, loader.Config{Verify: fam.Verifier(chain.VerifyFull), MaxRetries: 1}, nil)
	return s, err
}

// sameRecords fails unless a and b hold the same records, byte for byte,
// at every height of from..to.
func sameRecords(t *testing.T, a, b *staging.Store, from, to uint64) {
	t.Helper()
	for h := from; h <= to; h++ {
		x, err := a.Get(h)
		if err != nil {
			t.Fatalf("height %d: %v", h, err)
		}
		y, err := b.Get(h)
		if err != nil {
			t.Fatalf("rebuilt store, height %d: %v", h, err)
		}
		if !bytes.Equal(x.Raw, y.Raw) || !bytes.Equal(x.Hash, y.Hash) || !bytes.Equal(x.ParentHash, y.ParentHash) {
			t.Fatalf("height %d: the rebuilt record differs", h)
		}
	}
}

// roundTrip publishes fam's heights genesis..599 to url in chunks of 200,
// rebuilds them into an empty store from the archive alone (url itself:
// the chain's folder is found under it) and compares every record.
func roundTrip(t *testing.T, url, server string, fam *family.Family) {
	t.Helper()
	from, to := fam.Genesis, uint64(599)
	orig := stage(t, filepath.Join(t.TempDir(), "orig"), fam, 7, from, to)
	r := publish(t, orig, fam, url, 200, from, to)
	if r.Published != 3 || !r.Manifest || r.Chunks != 3 || len(r.Gaps) != 0 {
		t.Fatalf("%s: published %+v", server, r)
	}
	got, err := rebuild(t, filepath.Join(t.TempDir(), "rebuilt"), fam, url, from, to)
	if err != nil {
		t.Fatalf("%s: rebuild: %v", server, err)
	}
	sameRecords(t, orig, got, from, to)
}

// TestPublishRebuildDirectory: a plain directory, read back through the
// root (one chain's folder found under it) and through http://.
func TestPublishRebuildDirectory(t *testing.T) {
	dir := t.TempDir()
	roundTrip(t, dir, "a directory", family.EVM)

	// Over plain HTTP (a static server over the same directory): the
	// chain's folder, and its manifest.json.
	ts := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer ts.Close()
	fam := family.CometBFT
	orig := stage(t, filepath.Join(t.TempDir(), "orig"), fam, 7, 1, 599)
	publish(t, orig, fam, dir, 200, 1, 599)
	id, _ := orig.Identity()
	for _, u := range []string{ts.URL + "/" + chunked.ChainPrefix(id.ChainID), ts.URL + "/" + chunked.ChainPrefix(id.ChainID) + chunked.ManifestName} {
		got, err := rebuild(t, filepath.Join(t.TempDir(), "http"), fam, u, 1, 599)
		if err != nil {
			t.Fatalf("rebuild over http from %s: %v", u, err)
		}
		sameRecords(t, orig, got, 1, 599)
	}

	// The root holds two chains: --archive must name one.
	_, err := rebuild(t, filepath.Join(t.TempDir(), "root"), fam, dir, 1, 10)
	if !errors.Is(err, chain.ErrSourceRefused) || !strings.Contains(err.Error(), "2 chains") {
		t.Fatalf("the root of two chains' archives: %v", err)
	}
}

// TestRepublishIsIdempotentAndResumes: a second publish uploads nothing;
// a publish whose chunks were partly uploaded and not listed (killed
// before its manifest part) uploads the rest and replaces what is not as
// listed; a chunk cut short in the archive is uploaded again.
func TestRepublishIsIdempotentAndResumes(t *testing.T) {
	fam := family.CometBFT
	dir := t.TempDir()
	orig := stage(t, filepath.Join(t.TempDir(), "orig"), fam, 7, 1, 1250)
	r := publish(t, orig, fam, dir, 250, 1, 1250)
	if r.Published != 5 || r.Chunks != 5 {
		t.Fatalf("first publish: %+v", r)
	}
	if len(r.Skipped) != 1 || r.Skipped[0].From != 1250 || r.Skipped[0].To != 1250 {
		t.Fatalf("the staged height 1250 makes no full chunk of 1250-1499: skipped %+v", r.Skipped)
	}
	r = publish(t, orig, fam, dir, 0, 1, 1250)
	if r.Published != 0 || r.Present != 5 || r.ChunkBlocks != 250 {
		t.Fatalf("publish again (chunk size from the archive): %+v", r)
	}
	id, _ := orig.Identity()
	root := filepath.Join(dir, chunked.ChainPrefix(id.ChainID))

	// Killed after two chunks: no manifest, no part (as a publish killed
	// before it listed anything leaves it).
	for _, n := range []string{chunked.ManifestName, "parts/publish.json", "chunks/750-999.rec.zst", "chunks/1000-1249.rec.zst"} {
		if err := os.Remove(filepath.Join(root, n)); err != nil {
			t.Fatal(err)
		}
	}
	// and one chunk cut short by hand.
	victim := filepath.Join(root, "chunks/250-499.rec.zst")
	cut(t, victim)
	r = publish(t, orig, fam, dir, 250, 1, 1250)
	if r.Published != 5 || r.Replaced != 3 || r.Present != 0 {
		t.Fatalf("resumed publish: %+v", r)
	}
	got, err := rebuild(t, filepath.Join(t.TempDir(), "rebuilt"), fam, root, 1, 1249)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, orig, got, 1, 1249)

	// The part lists chunks as they are uploaded: cut one after it is
	// listed, and the next publish finds it not as listed.
	cut(t, victim)
	r = publish(t, orig, fam, dir, 250, 1, 1250)
	if r.Published != 1 || r.Replaced != 1 || r.Present != 4 {
		t.Fatalf("publish over a chunk cut short: %+v", r)
	}
}

// TestShardedPublishMergedFromTheArchiveAlone: two shards, each from a
// store of its own slice (as the pods of an Indexed Job), write their
// chunks and manifest parts and no manifest; Merge writes the manifest
// from the archive alone, with no store, and the rebuild from it is the
// chain.
func TestShardedPublishMergedFromTheArchiveAlone(t *testing.T) {
	fam := family.CometBFT
	dir := t.TempDir()
	whole := stage(t, filepath.Join(t.TempDir(), "whole"), fam, 7, 1, 999)
	for i, r := range [][2]uint64{{1, 499}, {500, 999}} {
		s := stage(t, filepath.Join(t.TempDir(), fmt.Sprint("shard", i)), fam, 7, r[0], r[1])
		b, err := archive.OpenBucket(context.Background(), dir, true)
		if err != nil {
			t.Fatal(err)
		}
		p, err := chunked.Publish(context.Background(), s, b, chunked.PublishConfig{Family: fam.Name, Genesis: fam.Genesis,
			ChunkBlocks: 250, From: r[0], To: r[1], Shards: 2, ShardIndex: i, Dest: dir})
		if err != nil || p.Manifest || p.Chunks != 2 || p.Part != fmt.Sprintf("parts/shard-%d-of-2.json", i) {
			t.Fatalf("shard %d: %+v, %v", i, p, err)
		}
	}
	if _, err := rebuild(t, filepath.Join(t.TempDir(), "early"), fam, dir, 1, 999); !errors.Is(err, chain.ErrSourceRefused) || !strings.Contains(err.Error(), "not a published archive") {
		t.Fatalf("before the merge, the shards' parts alone are read as an archive: %v", err)
	}
	merge := func() (*chunked.MergeReport, error) {
		b, err := archive.OpenBucket(context.Background(), dir, false)
		if err != nil {
			t.Fatal(err)
		}
		return chunked.Merge(context.Background(), b, dir)
	}
	m, err := merge()
	if err != nil || len(m.Parts) != 2 || m.Earlier || m.Chunks != 4 || len(m.Gaps) != 0 || m.ChunkBlocks != 250 {
		t.Fatalf("merge: %+v, %v", m, err)
	}
	got, err := rebuild(t, filepath.Join(t.TempDir(), "rebuilt"), fam, dir, 1, 999)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, whole, got, 1, 999)

	// A part of another chain is refused, naming both; the manifest
	// written before stays.
	id, _ := whole.Identity()
	root := filepath.Join(dir, chunked.ChainPrefix(id.ChainID))
	part, err := os.ReadFile(filepath.Join(root, "parts/shard-1-of-2.json"))
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.Replace(part, []byte(`"chain_id": "`+id.ChainID+`"`), []byte(`"chain_id": "another-chain"`), 1)
	if err := os.WriteFile(filepath.Join(root, "parts/shard-1-of-2.json"), other, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := merge(); fault.Of(err) != fault.Config || !strings.Contains(err.Error(), `chain "another-chain"`) || !strings.Contains(err.Error(), id.ChainID) {
		t.Fatalf("merge of a part of another chain: %v", err)
	}
	if _, err := rebuild(t, filepath.Join(t.TempDir(), "after"), fam, dir, 1, 999); err != nil {
		t.Fatalf("the manifest merged before: %v", err)
	}
}

func cut(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedArchiveIsRefusedByName: a flipped byte in a chunk, a missing
// chunk, a chunk cut short, a gap, a manifest of another chain or
// family (or copied over this archive's chunks), and a record_bytes short
// of a chunk's frames are each refused, naming the chunk or the
// heights, and nothing of the damaged chunk is staged.
func TestDamagedArchiveIsRefusedByName(t *testing.T) {
	fam := family.CometBFT
	dir := t.TempDir()
	orig := stage(t, filepath.Join(t.TempDir(), "orig"), fam, 7, 1, 999)
	publish(t, orig, fam, dir, 250, 1, 999)
	id, _ := orig.Identity()
	root := filepath.Join(dir, chunked.ChainPrefix(id.ChainID))
	chunk := filepath.Join(root, "chunks/500-749.rec.zst")
	good, err := os.ReadFile(chunk)
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := os.WriteFile(chunk, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		damage func()
		want   string
		class  fault.Class
	}{
		{"flipped byte", func() {
			b := bytes.Clone(good)
			b[len(b)/2] ^= 0x40
			os.WriteFile(chunk, b, 0o644)
		}, "chunk chunks/500-749.rec.zst: SHA-256", fault.Data},
		{"cut short", func() { os.WriteFile(chunk, good[:len(good)-100], 0o644) }, "chunk chunks/500-749.rec.zst: " + fmt.Sprint(len(good)-100) + " bytes, the manifest says", fault.Data},
		{"missing", func() { os.Remove(chunk) }, "chunk chunks/500-749.rec.zst: missing", fault.Data},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.damage()
			defer restore()
			got, err := rebuild(t, filepath.Join(t.TempDir(), "rebuilt"), fam, root, 1, 999)
			if err == nil || !strings.Contains(err.Error(), c.want) || fault.Of(err) != c.class {
				t.Fatalf("rebuild from an archive with a chunk %s: %v (class %v); want %q, %v", c.name, err, fault.Of(err), c.want, c.class)
			}
			missing, err := got.Missing(500, 749)
			if err != nil || len(missing) != 1 || missing[0] != (staging.Range{From: 500, To: 749}) {
				t.Fatalf("heights of the damaged chunk staged: missing %v, %v", missing, err)
			}
		})
	}

	// The manifest of another chain over this archive's chunks (copied
	// over it), and one whose record_bytes for a chunk is short of its
	// frames: the chunks are refused by name, nothing of them staged.
	manifest := filepath.Join(root, chunked.ManifestName)
	mb, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	otherDir := t.TempDir()
	other := stage(t, filepath.Join(t.TempDir(), "another"), fam, 8, 1, 999)
	publish(t, other, fam, otherDir, 250, 1, 999)
	oid, _ := other.Identity()
	foreign, err := os.ReadFile(filepath.Join(otherDir, chunked.ChainPrefix(oid.ChainID), chunked.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var short chunked.Manifest
	if err := json.Unmarshal(mb, &short); err != nil {
		t.Fatal(err)
	}
	short.Chunks[2].RecordBytes /= 2
	shortJSON, _ := json.Marshal(&short)
	for _, c := range []struct {
		name     string
		manifest []byte
		want     string
		from, to uint64
	}{
		{"manifest of another chain", foreign, "chunk chunks/1-249.rec.zst: ", 1, 249},
		{"record_bytes short", shortJSON, "chunk chunks/500-749.rec.zst: record of height ", 500, 749},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(manifest, c.manifest, 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(manifest, mb, 0o644)
			got, err := rebuild(t, filepath.Join(t.TempDir(), "rebuilt"), fam, root, 1, 999)
			if err == nil || !strings.Contains(err.Error(), c.want) || fault.Of(err) != fault.Data {
				t.Fatalf("rebuild: %v (class %v); want %q, exit 4", err, fault.Of(err), c.want)
			}
			if missing, err := got.Missing(c.from, c.to); err != nil || len(missing) != 1 || missing[0] != (staging.Range{From: c.from, To: c.to}) {
				t.Fatalf("heights of the refused chunk staged: missing %v, %v", missing, err)
			}
		})
	}

	t.Run("gap", func(t *testing.T) {
		_, err := rebuild(t, filepath.Join(t.TempDir(), "rebuilt"), fam, root, 1, 1500)
		if !errors.Is(err, chain.ErrSourceRefused) || fault.Of(err) != fault.Config || !strings.Contains(err.Error(), "no chunk holds 501 heights of 1-1500, in 1 gaps: 1000-1500") {
			t.Fatalf("a range past the archive: %v", err)
		}
	})
	t.Run("other family", func(t *testing.T) {
		_, err := rebuild(t, filepath.Join(t.TempDir(), "rebuilt"), family.EVM, root, 1, 10)
		if !errors.Is(err, chain.ErrSourceRefused) || !strings.Contains(err.Error(), "an archive of a cometbft chain, not evm") {
			t.Fatalf("an evm fetch from a cometbft archive: %v", err)
		}
	})
	t.Run("other chain", func(t *testing.T) {
		// A store of another chain (seed 8's synthetic chain has another
		// chain id) refuses the archive's chain by name.
		other := stage(t, filepath.Join(t.TempDir(), "other"), fam, 8, 1, 5)
		oid, _ := other.Identity()
		if oid.ChainID == id.ChainID {
			t.Fatalf("seeds 7 and 8 give one chain id %q", id.ChainID)
		}
		src, err := fam.Source(family.SourceArchive, family.SourceOptions{Archive: root})
		if err != nil {
			t.Fatal(err)
		}
		defer src.(interface{ Close() }).Close()
		_, err = loader.Fetch(context.Background(), src, other, 6, 10, loader.Config{Verify: fam.Verifier(chain.VerifyFull)}, nil)
		var wrong *staging.WrongChainError
		if !errors.As(err, &wrong) || !strings.Contains(err.Error(), id.ChainID) || !strings.Contains(err.Error(), oid.ChainID) {
			t.Fatalf("a store of chain %q fetching from an archive of %q: %v", oid.ChainID, id.ChainID, err)
		}
	})
	t.Run("no manifest", func(t *testing.T) {
		_, err := rebuild(t, filepath.Join(t.TempDir(), "rebuilt"), fam, t.TempDir(), 1, 10)
		if !errors.Is(err, chain.ErrSourceRefused) || !strings.Contains(err.Error(), "not a published archive") {
			t.Fatalf("an empty directory: %v", err)
		}
	})
}
