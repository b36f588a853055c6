package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/storetest"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
	"github.com/cockroachdb/pebble/v2"
)

// recordingSource records every height it is asked for.
type recordingSource struct {
	loader.Source
	mu      sync.Mutex
	fetched []uint64
}

func (s *recordingSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	s.mu.Lock()
	for h := from; h <= to; h++ {
		s.fetched = append(s.fetched, h)
	}
	s.mu.Unlock()
	return s.Source.Fetch(ctx, from, to)
}

func (s *recordingSource) heights() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.fetched)
	slices.Sort(out)
	return slices.Compact(out)
}

// salvageFixture fills a store from the synthetic chain over 1-to and, when
// mirror is set, mirrors two target checkpoints into it (that open flushes
// the WAL into tables). It returns the store and a pristine copy of it.
func salvageFixture(t *testing.T, chainName string, to uint64, mirror bool) (stg, pristine string) {
	t.Helper()
	stg = archiveFixture(t, chainName, to)
	if mirror {
		s := stagingtest.Open(t, stg, staging.Options{})
		for _, target := range []string{"pg-a/public/head", "pg-b/public/backfill-1-100"} {
			if err := s.SetMirror(target, staging.Checkpoint{From: 1, Height: to / 2, Hash: []byte{1, 2, 3}, Updated: time.Unix(1700000000, 0).UTC()}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	pristine = filepath.Join(t.TempDir(), "pristine")
	storetest.CopyFiles(t, stg, pristine)
	return stg, pristine
}

// pebbleKeys reads every key and value of a store's Pebble (a copy, so
// that the read-only open changes nothing that is compared).
func pebbleKeys(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "read")
	storetest.CopyFiles(t, dir, cp)
	db, err := pebble.Open(cp, &pebble.Options{Logger: quietPebble{}, ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string][]byte{}
	for ok := it.First(); ok; ok = it.Next() {
		out[string(it.Key())] = bytes.Clone(it.Value())
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameStore checks that two stores hold the same keys with the same bytes:
// every record, index entry, mirror and the identity.
func sameStore(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	var kinds [256]int
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("key %q missing from the repaired store", k)
		case !bytes.Equal(g, v):
			t.Errorf("key %q differs in the repaired store", k)
		}
		kinds[k[0]]++
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("key %q is in the repaired store, not in the original", k)
		}
	}
	if kinds['b'] == 0 || kinds['h'] != kinds['b'] || kinds['i'] != 1 {
		t.Errorf("the original holds %d records, %d index entries, %d identities", kinds['b'], kinds['h'], kinds['i'])
	}
}

func manifestPath(t *testing.T, stg string) string {
	t.Helper()
	marker, _ := filepath.Glob(filepath.Join(stg, "marker.manifest.*"))
	if len(marker) != 1 {
		t.Fatalf("manifest markers: %v", marker)
	}
	return filepath.Join(stg, marker[0][strings.LastIndex(marker[0], ".")+1:])
}

// repairRecorded repairs stg from the synthetic chain (tip tip) through a
// recordingSource, and fails the test unless the repair is clean.
func repairRecorded(t *testing.T, chainName, stg string, tip uint64) (archive.RepairReport, *recordingSource) {
	t.Helper()
	cfg := repairCmd(chainName, stg)
	src, err := newSource(bareJob(cfg), func() uint64 { return tip }, quiet)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingSource{Source: src}
	cfg.Source = rec
	r, err := runRepair(t, cfg)
	if err != nil {
		t.Fatalf("repair: %v (report %+v)", err, r)
	}
	return r, rec
}

// garbleLargestTable garbles the first data block (record keys) of stg's
// largest table and returns its name.
func garbleLargestTable(t *testing.T, stg string) string {
	t.Helper()
	largest := storetest.Largest(t, stg, "sst")
	storetest.Garble(t, largest, 64, 256)
	return filepath.Base(largest)
}

// tableKeys returns the smallest and largest keys of table name in a store,
// as its MANIFEST says.
func tableKeys(t *testing.T, dir, name string) (lo, hi []byte) {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "read")
	storetest.CopyFiles(t, dir, cp)
	db, err := pebble.Open(cp, &pebble.Options{Logger: quietPebble{}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	levels, err := db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range levels {
		for _, tb := range l {
			if fmt.Sprintf("%s.sst", tb.BackingSSTNum) == name {
				return bytes.Clone(tb.Smallest.UserKey), bytes.Clone(tb.Largest.UserKey)
			}
		}
	}
	t.Fatalf("no table %s in the MANIFEST of %s", name, dir)
	return nil, nil
}

// removeManifests deletes every MANIFEST of stg (Pebble keeps the previous
// one too).
func removeManifests(t *testing.T, stg string) {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(stg, "MANIFEST-*"))
	if len(ms) == 0 {
		t.Fatalf("no MANIFEST in %s", stg)
	}
	for _, m := range ms {
		if err := os.Remove(m); err != nil {
			t.Fatal(err)
		}
	}
}

func gapHeights(gs []archive.Gap) []uint64 {
	out := []uint64{}
	for _, g := range gs {
		for h := g.From; h <= g.To; h++ {
			out = append(out, h)
		}
	}
	return out
}

// TestRepairSalvagesADamagedManifest damages the MANIFEST of a store filled
// from the synthetic chain (truncated, garbled, deleted; a store whose
// records are in its WAL only; a damaged MANIFEST and a garbled table):
// repair reads every readable record from the files, refetches exactly the
// heights it could not read, verifies clean, and the repaired store holds
// every key of the original byte for byte — for both chain families.
func TestRepairSalvagesADamagedManifest(t *testing.T) {
	const to = 1500
	for _, chainName := range family.Names() {
		for _, damage := range []string{"truncated", "garbled", "garbled-unopenable", "deleted", "wal-only", "manifest-and-table"} {
			t.Run(chainName+"/"+damage, func(t *testing.T) {
				n, mirror := uint64(to), true
				switch damage {
				case "wal-only":
					n, mirror = 200, false
				case "garbled-unopenable":
					// Records in the WAL, and a MANIFEST Pebble refuses
					// once garbled.
					n, mirror = 600, false
				}
				stg, pristine := salvageFixture(t, chainName, n, mirror)
				if damage == "wal-only" {
					if ssts, _ := filepath.Glob(filepath.Join(stg, "*.sst")); len(ssts) != 0 {
						t.Fatalf("the fixture flushed its WAL: %v", ssts)
					}
				}
				want := pebbleKeys(t, pristine)
				m := manifestPath(t, stg)
				var victim string
				switch damage {
				case "truncated":
					st, err := os.Stat(m)
					if err != nil {
						t.Fatal(err)
					}
					os.Truncate(m, st.Size()/2)
				case "garbled", "garbled-unopenable":
					storetest.Garble(t, m, storetest.Size(t, m)/2, 16)
				case "deleted", "wal-only":
					removeManifests(t, stg)
				case "manifest-and-table":
					removeManifests(t, stg)
					victim = garbleLargestTable(t, stg)
				}

				r, rec := repairRecorded(t, chainName, stg, n+100)
				if r.Salvage == nil || !r.Salvage.FromFiles {
					t.Fatalf("the store was not salvaged from its files: %+v", r.Salvage)
				}
				t.Logf("salvaged (%s): copied %d, lost %v, damaged files %v", r.Salvage.Reason, r.Salvage.Copied, r.Salvage.Lost, r.Salvage.Files)
				lost := gapHeights(r.Salvage.Lost)
				if got := rec.heights(); !slices.Equal(got, lost) {
					t.Errorf("refetched heights %v, want exactly the %d the salvage lost %v", got, len(lost), r.Salvage.Lost)
				}
				if !slices.Equal(gapHeights(r.Refetched), lost) {
					t.Errorf("report: refetched %v, lost %v", r.Refetched, r.Salvage.Lost)
				}
				if r.Salvage.Copied+uint64(len(lost)) != n {
					t.Errorf("copied %d and lost %d of %d heights", r.Salvage.Copied, len(lost), n)
				}
				switch damage {
				case "manifest-and-table":
					if len(lost) == 0 || len(r.Salvage.Files) == 0 || r.Salvage.Files[0].File != victim {
						t.Errorf("a garbled table lost no record (lost %v, damaged files %v, garbled %s)", r.Salvage.Lost, r.Salvage.Files, victim)
					}
					// Only records the garbled table held are lost.
					lo, hi := tableKeys(t, pristine, victim)
					for _, h := range lost {
						k := binary.BigEndian.AppendUint64([]byte{'b'}, h)
						if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) > 0 {
							t.Errorf("height %d lost, outside the garbled table's keys", h)
						}
					}
				default:
					if len(lost) != 0 {
						t.Errorf("intact tables and WAL, yet heights lost: %v (%v)", r.Salvage.Lost, r.Salvage.Files)
					}
				}
				if damage == "garbled-unopenable" && !strings.HasPrefix(r.Salvage.Reason, "Pebble cannot open the store") {
					t.Errorf("Pebble opened the store: %s", r.Salvage.Reason)
				}
				if mirror && r.Salvage.Mirrors != 2 {
					t.Errorf("%d mirrors copied, want 2", r.Salvage.Mirrors)
				}
				if vr, err := runVerify(t, deepVerify(stg)); err != nil || vr.Problems() != 0 || vr.Staging.Records != n {
					t.Fatalf("verify after repair: %v, %d problems, %d records", err, vr.Problems(), vr.Staging.Records)
				}
				sameStore(t, pebbleKeys(t, stg), want)
				// The damaged files were kept until the new store verified
				// clean, then removed.
				if !r.Salvage.Removed || r.Salvage.Damaged == "" {
					t.Errorf("damaged copy %q removed %v", r.Salvage.Damaged, r.Salvage.Removed)
				}
				if left, _ := filepath.Glob(stg + ".*"); len(left) != 0 {
					t.Errorf("after a clean repair, left beside the store: %v", left)
				}
			})
		}
	}
}

// TestSalvageKeepsTheDamagedFilesUntilClean salvages a store with no
// MANIFEST and a garbled table from a source that refuses every block: the
// readable records are in the new store, repair exits 4 naming the heights
// it could not refetch, and the old files are kept, byte for byte, as
// DIR.damaged-<time>.
func TestSalvageKeepsTheDamagedFilesUntilClean(t *testing.T) {
	const to = 1500
	stg, _ := salvageFixture(t, "cometbft", to, true)
	removeManifests(t, stg)
	garbleLargestTable(t, stg)
	before := dirBytes(t, stg)

	cfg := repairCmd("cometbft", stg)
	cfg.Source = refusingSource{cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: cfg.SyntheticSeed, Tip: func() uint64 { return to + 100 }, TxPerBlock: 3})}
	r, err := runRepair(t, cfg)
	if ExitCode(err) != ExitData {
		t.Fatalf("repair from a source that refuses: exit %d (%v), want 4", ExitCode(err), err)
	}
	if r.Salvage == nil || len(r.Salvage.Lost) == 0 || len(r.Failed) == 0 {
		t.Fatalf("salvage %+v, failed %v: want lost heights whose refetch failed", r.Salvage, r.Failed)
	}
	if r.Salvage.Removed || !strings.HasPrefix(r.Salvage.Damaged, stg+".damaged-") {
		t.Fatalf("damaged copy %q (removed %v)", r.Salvage.Damaged, r.Salvage.Removed)
	}
	kept := dirBytes(t, r.Salvage.Damaged)
	delete(before, "blockhaul.pid")
	delete(kept, "blockhaul.pid")
	if len(kept) != len(before) {
		t.Errorf("the damaged copy holds %d files, the store held %d", len(kept), len(before))
	}
	for name, b := range before {
		if kept[name] != b {
			t.Errorf("file %s of the damaged store was changed", name)
		}
	}
	if r.After == nil || r.After.Records != to-uint64(len(gapHeights(r.Salvage.Lost))) {
		t.Errorf("the new store holds %+v records, want every readable one", r.After)
	}
}

// TestSalvageRefusesFilesThatRecordNoChain repairs a store with no MANIFEST
// whose WAL, where every record and the identity are, is garbled from its
// first byte: nothing can be salvaged into a store of a known chain, so
// repair refuses, naming the store, and changes nothing.
func TestSalvageRefusesFilesThatRecordNoChain(t *testing.T) {
	stg, _ := salvageFixture(t, "cometbft", 200, false)
	removeManifests(t, stg)
	logs, _ := filepath.Glob(filepath.Join(stg, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no WAL written")
	}
	for _, l := range logs {
		storetest.Garble(t, l, 0, 64)
	}
	before := dirBytes(t, stg)
	cfg := repairCmd("cometbft", stg)
	cfg.JSON = false
	var out bytes.Buffer
	_, err := Run(context.Background(), cfg, &out, quiet)
	if err == nil || !strings.Contains(err.Error(), "record no chain") || !strings.Contains(err.Error(), stg) {
		t.Fatalf("repair of files that record no chain: %v, want a refusal naming the store", err)
	}
	if after := dirBytes(t, stg); len(after) != len(before) {
		t.Errorf("repair changed the files of the store it refused: %d files, %d before", len(after), len(before))
	} else {
		for name, b := range before {
			if after[name] != b {
				t.Errorf("repair changed %s", name)
			}
		}
	}
	if left, _ := filepath.Glob(stg + ".*"); len(left) != 0 {
		t.Errorf("left beside the store: %v", left)
	}
}

// TestSalvageRefetchesARecordThatDoesNotHash stages at one height, after a
// deletion, a record with sound checksums whose content is another block's,
// then deletes the MANIFEST: the salvage reads the newest version, finds
// that its content does not hash to its staged hash, copies it not, and
// repair refetches that height alone — the result is the original store.
func TestSalvageRefetchesARecordThatDoesNotHash(t *testing.T) {
	const to = 600
	stg, pristine := salvageFixture(t, "cometbft", to, true)
	want := pebbleKeys(t, pristine)
	replaceRaw(t, stg, 300, 100)
	removeManifests(t, stg)
	r, rec := repairRecorded(t, "cometbft", stg, to+100)
	if r.Salvage == nil || !slices.Equal(r.Salvage.Lost, []archive.Gap{{From: 300, To: 300}}) {
		t.Fatalf("salvage %+v: want height 300 alone lost", r.Salvage)
	}
	if got := rec.heights(); !slices.Equal(got, []uint64{300}) {
		t.Errorf("refetched %v, want 300", got)
	}
	sameStore(t, pebbleKeys(t, stg), want)
}
