package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/storetest"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

func repairCmd(chainName, stg string) Config {
	cfg := DefaultConfig()
	cfg.Command, cfg.Chain, cfg.Staging = CmdRepair, chainName, stg
	cfg.SyntheticTxs, cfg.FetchWorkers = 3, 4
	cfg.JSON = true
	return cfg
}

func runRepair(t *testing.T, cfg Config) (archive.RepairReport, error) {
	t.Helper()
	return runReport[archive.RepairReport](t, cfg)
}

// quietPebble drops Pebble's log lines (WAL replay notices); a failure is
// still the test's.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)         {}
func (quietPebble) Errorf(string, ...any)        {}
func (quietPebble) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

// replaceRaw stages at h a record whose content is another block's, under
// h's own hashes: sound checksums, a content that does not hash to the
// staged hash (what a lying node left before staging verified).
func replaceRaw(t *testing.T, dir string, h, from uint64) {
	t.Helper()
	s := stagingtest.Open(t, dir, staging.Options{})
	defer s.Close()
	orig, err := s.Get(h)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Get(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(h, h); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	defer b.Close()
	if err := b.Put(chain.Block{Height: h, Hash: orig.Hash, ParentHash: orig.ParentHash, Raw: other.Raw}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestRepairCorruptAndMissingRecords corrupts random records of a store
// filled from the synthetic chain, stages two with another block's content
// and deletes a run: verify reports them, repair refetches exactly those,
// verify is then clean and an export of the repaired store has the same
// table digests as one of the original — for both chain families.
func TestRepairCorruptAndMissingRecords(t *testing.T) {
	const to = 1500
	for _, chainName := range family.Names() {
		t.Run(chainName, func(t *testing.T) {
			stg := archiveFixture(t, chainName, to)
			want := exportInto(t, chainName, stg, to)

			rng := rand.New(rand.NewPCG(uint64(len(chainName)), 7))
			var flipped []uint64
			for len(flipped) < 9 {
				h := 2 + rng.Uint64N(to-2)
				// Not beside another: repair refetches neighbours as one range.
				if !slices.Contains(flipped, h) && !slices.Contains(flipped, h-1) && !slices.Contains(flipped, h+1) && (h < 400 || h > 420) && h != 700 && h != 701 {
					flipped = append(flipped, h)
				}
			}
			slices.Sort(flipped)
			stagingtest.FlipRecordBytes(t, stg, 0x20, flipped...)
			replaceRaw(t, stg, 700, 900)
			replaceRaw(t, stg, 701, 1200)
			s := stagingtest.Open(t, stg, staging.Options{})
			if err := s.Delete(400, 420); err != nil {
				t.Fatal(err)
			}
			s.Close()

			vr, err := runVerify(t, deepVerify(stg))
			if ExitCode(err) != ExitData {
				t.Fatalf("verify of the damaged store: exit %d (%v), want 4", ExitCode(err), err)
			}
			if got := problemHeights(vr.Staging.Corrupt); !slices.Equal(got, flipped) {
				t.Fatalf("verify found corrupt %v, want %v", got, flipped)
			}

			r, err := runRepair(t, repairCmd(chainName, stg))
			if err != nil {
				t.Fatalf("repair: %v (report %+v)", err, r)
			}
			wantFetched := []archive.Gap{}
			for _, h := range flipped {
				wantFetched = append(wantFetched, archive.Gap{From: h, To: h})
			}
			wantFetched = append(wantFetched, archive.Gap{From: 400, To: 420}, archive.Gap{From: 700, To: 701})
			slices.SortFunc(wantFetched, func(a, b archive.Gap) int { return int(a.From) - int(b.From) })
			if !slices.Equal(r.Refetched, wantFetched) {
				t.Errorf("repair refetched %v, want exactly %v", r.Refetched, wantFetched)
			}
			if r.Before.WrongHashCount+r.Before.UndecodableCount == 0 {
				t.Errorf("repair's verify did not see the records staged with another block's content: %+v", r.Before)
			}
			if r.Salvage != nil {
				t.Errorf("records alone damaged, yet the store was salvaged: %+v", r.Salvage)
			}
			if vr, err := runVerify(t, deepVerify(stg)); err != nil || vr.Problems() != 0 {
				t.Fatalf("verify after repair: %v, %d problems", err, vr.Problems())
			}
			got := exportInto(t, chainName, stg, to)
			if cr, err := runChecksum(t, checksumCmd(chainName, want, got, 500)); err != nil || !cr.Equal() {
				t.Fatalf("the repaired store's export differs from the original's: %v %+v", err, cr.Differences)
			}
		})
	}
}

// TestRepairDamagedPebbleFile damages a whole Pebble file of a store filled
// from the synthetic chain. A bad sstable (the store cannot be read to its
// end) is salvaged: every readable record is copied into a fresh store that
// is swapped in, the rest refetched, and the damaged copy removed once the
// new store verifies clean. A bad blob file loses records only: those are
// removed and refetched. Either way verify is then clean and an export of
// the repaired store has the original's table digests.
func TestRepairDamagedPebbleFile(t *testing.T) {
	const to = 3000
	const chainName = "cometbft"
	stg0 := archiveFixture(t, chainName, to)
	want := exportInto(t, chainName, stg0, to)
	for _, kind := range []string{"sst", "blob"} {
		t.Run(kind, func(t *testing.T) {
			stg := filepath.Join(t.TempDir(), "s")
			storetest.CopyFiles(t, stg0, stg)
			victim := storetest.Largest(t, stg, kind)
			storetest.Garble(t, victim, storetest.Size(t, victim)/3, 256)

			cfg := repairCmd(chainName, stg)
			cfg.JSON = false
			var out bytes.Buffer
			_, err := Run(context.Background(), cfg, &out, quiet)
			t.Logf("repair:\n%s", out.String())
			if err != nil {
				t.Fatalf("repair: %v", err)
			}
			if !strings.Contains(out.String(), "result: repaired, clean") {
				t.Fatalf("the text report does not say the store was repaired")
			}
			salvaged := strings.Contains(out.String(), "salvaged a damaged store")
			if kind == "sst" && !salvaged {
				t.Errorf("a damaged sstable was not salvaged")
			}
			if kind == "blob" && !strings.Contains(out.String(), "refetched: ") || strings.Contains(out.String(), "refetched: nothing") && kind == "blob" {
				t.Errorf("a damaged blob file lost no record to refetch")
			}
			left, _ := filepath.Glob(stg + ".*")
			if len(left) != 0 {
				t.Errorf("after a clean repair, left beside the store: %v", left)
			}
			if vr, err := runVerify(t, deepVerify(stg)); err != nil || vr.Problems() != 0 || vr.Staging.Records != to {
				t.Fatalf("verify after repair: %v, %d problems, %d records", err, vr.Problems(), vr.Staging.Records)
			}
			got := exportInto(t, chainName, stg, to)
			if cr, err := runChecksum(t, checksumCmd(chainName, want, got, 500)); err != nil || !cr.Equal() {
				t.Fatalf("the repaired store's export differs from the original's: %v %+v", err, cr.Differences)
			}
		})
	}
}

func deepVerify(stg string) Config {
	cfg := verifyCmd(stg, "")
	cfg.Deep = true
	return cfg
}

func problemHeights(ps []archive.Problem) []uint64 {
	out := []uint64{}
	for _, p := range ps {
		out = append(out, p.Height)
	}
	return out
}

// refusingSource serves the synthetic chain's identity but refuses every
// block, as a node that has pruned them would.
type refusingSource struct{ *cometbftsynth.Synthetic }

func (refusingSource) Fetch(_ context.Context, from, to uint64) ([]chain.Block, error) {
	return nil, fmt.Errorf("heights %d-%d pruned by this node", from, to)
}

// TestRepairExitsDataWrongWhenTheSourceCannotServe corrupts records and
// repairs from a source that refuses them: repair removes nothing it cannot
// replace silently, names the ranges whose refetch failed and what verify
// still finds, and exits 4.
func TestRepairExitsDataWrongWhenTheSourceCannotServe(t *testing.T) {
	const to = 600
	stg := archiveFixture(t, "cometbft", to)
	stagingtest.FlipRecordBytes(t, stg, 0x20, 100, 300)
	cfg := repairCmd("cometbft", stg)
	cfg.Source = refusingSource{cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: cfg.SyntheticSeed, Tip: func() uint64 { return to + 100 }, TxPerBlock: 3})}
	r, err := runRepair(t, cfg)
	if ExitCode(err) != ExitData {
		t.Fatalf("repair from a source that refuses: exit %d (%v), want 4", ExitCode(err), err)
	}
	if len(r.Failed) != 2 || !strings.Contains(r.Failed[0], "100-100") || !strings.Contains(r.Failed[0], "pruned") {
		t.Errorf("failed refetches %q, want heights 100 and 300 named with the source's error", r.Failed)
	}
	if r.After == nil || r.After.GapCount != 2 || r.After.GapHeights != 2 {
		t.Errorf("verify after the failed repair should find heights 100 and 300 missing: %+v", r.After)
	}
}

func dirBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// TestExportReportsDamageBeforeCoverage truncates the MANIFEST of a store
// whose records an export had flushed to tables: Pebble opens it with the
// records gone, the ledger says they were staged, and export reports that
// damage (exit 4), not a range never fetched (exit 2), as status does.
func TestExportReportsDamageBeforeCoverage(t *testing.T) {
	stg := archiveFixture(t, "cometbft", 300)
	exportInto(t, "cometbft", stg, 300) // flushes the WAL into tables
	marker, _ := filepath.Glob(filepath.Join(stg, "marker.manifest.*"))
	if len(marker) != 1 {
		t.Fatalf("manifest markers: %v", marker)
	}
	manifest := filepath.Join(stg, marker[0][strings.LastIndex(marker[0], ".")+1:])
	st, err := os.Stat(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(manifest, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	for _, toSet := range []bool{true, false} {
		cfg := synthConfig(CmdExport, "cometbft", pgtest.NewDatabase(t), stg, 1, 300)
		cfg.ToSet = toSet
		if !toSet {
			cfg.To = 0
		}
		_, err := Run(context.Background(), cfg, &bytes.Buffer{}, quiet)
		if ExitCode(err) != ExitData || !strings.Contains(fmt.Sprint(err), "damaged") || !strings.Contains(fmt.Sprint(err), stg) {
			t.Fatalf("export (--to set %v) of a store that lost its records: exit %d (%v), want 4 naming the damaged staging directory", toSet, ExitCode(err), err)
		}
	}
}
