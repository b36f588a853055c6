package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
	"github.com/blockhaul/blockhaul/internal/storetest"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

type family struct {
	name string
	fam  chain.Family
	src  interface {
		Fetch(context.Context, uint64, uint64) ([]chain.Block, error)
	}
	chainID   string
	recompute func([]byte) ([]byte, error)
	decoder   Decoder
}

func families() []family {
	c := cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 5, TxPerBlock: 2})
	e := evmsynth.NewSynthetic(evmsynth.SyntheticConfig{Seed: 5, TxPerBlock: 2, LogsPerBlock: 4})
	cid, _ := c.ChainID(context.Background())
	eid, _ := e.ChainID(context.Background())
	return []family{
		{"cometbft", chain.FamilyCometBFT, c, cid, cometbft.VerifyBlock, cometbft.NewDecoder()},
		{"evm", chain.FamilyEVM, e, eid, evm.VerifyBlock, evm.NewDecoder()},
	}
}

// stage writes blocks [from, to] of f's synthetic chain into a new store
// in dir.
func stage(t *testing.T, dir string, f family, from, to uint64) *staging.Store {
	t.Helper()
	s := stagingtest.Open(t, dir, staging.Options{})
	t.Cleanup(func() { s.Close() })
	if err := s.Bind(f.fam, f.chainID); err != nil {
		t.Fatal(err)
	}
	blocks, err := f.src.Fetch(context.Background(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, s, blocks...)
	return s
}

func putAll(t *testing.T, s *staging.Store, blocks ...chain.Block) {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	for _, blk := range blocks {
		if err := b.Put(blk); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

// verifyCfg checks deep records with the family's own block-hash
// recomputation and decoder.
func verifyCfg(t *testing.T, f family, deep bool, to uint64) VerifyConfig {
	return VerifyConfig{Deep: deep, Recompute: f.recompute, Decoder: f.decoder}
}

func summary(r *StagingReport) string {
	return fmt.Sprintf("records %d gaps %d %v corrupt %d %v wrong %d %v undecodable %d breaks %d %v unreadable %q",
		r.Records, r.GapCount, r.Gaps, r.CorruptCount, heights(r.Corrupt), r.WrongHashCount, heights(r.WrongHash), r.UndecodableCount, r.BreakCount, breakHeights(r.Breaks), r.Unreadable)
}

func heights(ps []Problem) []uint64 {
	var out []uint64
	for _, p := range ps[:min(len(ps), 10)] {
		out = append(out, p.Height)
	}
	return out
}

func breakHeights(bs []Break) []uint64 {
	var out []uint64
	for _, b := range bs[:min(len(bs), 10)] {
		out = append(out, b.Height)
	}
	return out
}

func TestVerifyCleanStore(t *testing.T) {
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			s := stage(t, t.TempDir(), f, 1, 300)
			for _, deep := range []bool{false, true} {
				r, err := Verify(s, verifyCfg(t, f, deep, 300))
				if err != nil {
					t.Fatal(err)
				}
				if r.Problems() != 0 || r.Records != 300 || *r.From != 1 || *r.To != 300 || r.Family != f.name {
					t.Fatalf("deep=%v: %s", deep, summary(r))
				}
			}
		})
	}
}

// TestVerifyFindsGapsBreaksAndWrongHashes damages a store through its
// public API — a deleted range, a block restaged with another parent hash,
// a block restaged under a hash its content does not give — and expects
// verify to name exactly those heights.
func TestVerifyFindsGapsBreaksAndWrongHashes(t *testing.T) {
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			s := stage(t, t.TempDir(), f, 1, 400)
			blocks, err := f.src.Fetch(context.Background(), 1, 400)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(100, 109); err != nil { // a gap
				t.Fatal(err)
			}
			if err := s.Delete(300, 300); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(200, 200); err != nil {
				t.Fatal(err)
			}
			wrongParent := blocks[199] // height 200
			wrongParent.ParentHash = bytes.Repeat([]byte{0xaa}, 32)
			wrongHash := blocks[299] // height 300
			wrongHash.Hash = bytes.Repeat([]byte{0xbb}, 32)
			// A record whose content was altered under its own hash (a
			// header field): only a deep verify, recomputing the hash, sees it.
			if err := s.Delete(350, 350); err != nil {
				t.Fatal(err)
			}
			tampered := blocks[349]
			field := map[string]string{"cometbft": `"chain_id":"`, "evm": `"gasLimit":"0x`}[f.name]
			if !bytes.Contains(tampered.Raw, []byte(field)) {
				t.Fatalf("no %s in the raw record", field)
			}
			tampered.Raw = bytes.Replace(bytes.Clone(tampered.Raw), []byte(field), []byte(field+"1"), 1)
			putAll(t, s, wrongParent, wrongHash, tampered)

			plain, err := Verify(s, verifyCfg(t, f, false, 400))
			if err != nil {
				t.Fatal(err)
			}
			if plain.GapCount != 1 || plain.Gaps[0] != (Gap{100, 109}) || plain.GapHeights != 10 {
				t.Errorf("gaps %+v", plain.Gaps)
			}
			// 200 does not link to 199; 301 does not link to the wrong 300.
			if plain.BreakCount != 2 || plain.Breaks[0].Height != 200 || plain.Breaks[1].Height != 301 {
				t.Errorf("breaks %+v", plain.Breaks)
			}
			if plain.CorruptCount != 0 || plain.WrongHashCount != 0 || plain.Records != 390 {
				t.Errorf("plain: %s", summary(plain))
			}
			deep, err := Verify(s, verifyCfg(t, f, true, 400))
			if err != nil {
				t.Fatal(err)
			}
			if deep.WrongHashCount != 2 || deep.WrongHash[0].Height != 300 || deep.WrongHash[1].Height != 350 || deep.BreakCount != 2 || deep.UndecodableCount != 0 {
				t.Errorf("deep: %s", summary(deep))
			}
			// A range inside the store: only what lies in it.
			r, err := Verify(s, VerifyConfig{From: 150, FromSet: true, To: 250, ToSet: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.GapCount != 0 || r.BreakCount != 1 || r.Records != 101 {
				t.Errorf("150-250: %s", summary(r))
			}
			// A range past the staged end: the rest is a gap.
			r, err = Verify(s, VerifyConfig{From: 390, FromSet: true, To: 410, ToSet: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.GapCount != 1 || r.Gaps[0] != (Gap{401, 410}) {
				t.Errorf("390-410: %+v", r.Gaps)
			}
		})
	}
}

// TestVerifyDamagedBlobFile flips bytes in the middle of the store's blob
// file (where the records are): verify reports corrupt heights and names
// files, exits as data wrong, and does not panic.
func TestVerifyDamagedBlobFile(t *testing.T) {
	f := families()[0]
	dir := t.TempDir()
	s := stagingtest.Open(t, dir, staging.Options{})
	if err := s.Bind(f.fam, f.chainID); err != nil {
		t.Fatal(err)
	}
	// Enough records to fill a memtable, so that they are flushed into an
	// sstable and its blob file.
	dense := cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 5, TxPerBlock: 40})
	for h := uint64(1); h <= 4000; h += 500 {
		blocks, err := dense.Fetch(context.Background(), h, h+499)
		if err != nil {
			t.Fatal(err)
		}
		putAll(t, s, blocks...)
	}
	if err := s.Close(); err != nil { // flushes the memtable into an sstable and a blob file
		t.Fatal(err)
	}
	blobs, _ := filepath.Glob(filepath.Join(dir, "*.blob"))
	if len(blobs) == 0 {
		t.Fatal("no blob file written")
	}
	storetest.Garble(t, blobs[0], storetest.Size(t, blobs[0])/3, 64)
	s = stagingtest.Open(t, dir, staging.Options{ReadOnly: true})
	defer s.Close()
	r, err := Verify(s, VerifyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if r.CorruptCount == 0 && r.Unreadable == "" {
		t.Fatalf("a damaged blob file went unnoticed: %s", summary(r))
	}
	if r.CorruptCount > 2 || r.Unreadable != "" || r.Records != 4000 {
		t.Fatalf("want only the heights of the damaged blob block reported, and every other record read: %s", summary(r))
	}
	if r.CorruptCount > 0 && !strings.Contains(r.Corrupt[0].Reason, "checksum") {
		t.Errorf("reason %q does not say checksum", r.Corrupt[0].Reason)
	}
	if r.CorruptCount > 0 && len(r.Corrupt[0].Files) == 0 {
		t.Errorf("no file named for corrupt height %d", r.Corrupt[0].Height)
	}
	t.Logf("damaged blob: %d corrupt heights, first %+v, unreadable %q", r.CorruptCount, r.Corrupt[0], r.Unreadable)
}

// TestVerifyWorkersSameReport: a verify over several segments read at
// once reports exactly what one worker does, with damage placed across
// and at the segments' seams (a gap over one, a parent-hash break at the
// first height of one, a wrong hash at the last height of one, a tampered
// record at the first height of the next), deep and plain, with the lists
// capped.
func TestVerifyWorkersSameReport(t *testing.T) {
	f := families()[0]
	const to = 4 * segmentHeights
	s := stage(t, t.TempDir(), f, 1, to)
	blocks, err := f.src.Fetch(context.Background(), 1, to)
	if err != nil {
		t.Fatal(err)
	}
	seam := uint64(3*segmentHeights + 1) // segments start at 1: [1, 1024], [1025, 2048], …
	if err := s.Delete(seam-5, seam+5); err != nil {
		t.Fatal(err)
	}
	for _, h := range []uint64{2*segmentHeights + 1, segmentHeights, 2*segmentHeights + 2} {
		if err := s.Delete(h, h); err != nil {
			t.Fatal(err)
		}
	}
	wrongParent := blocks[2*segmentHeights] // height 2·1024+1, first of the third segment
	wrongParent.ParentHash = bytes.Repeat([]byte{0xaa}, 32)
	wrongHash := blocks[segmentHeights-1] // height 1024, last of the first
	wrongHash.Hash = bytes.Repeat([]byte{0xbb}, 32)
	tampered := blocks[2*segmentHeights+1] // height 2050
	tampered.Raw = bytes.Replace(bytes.Clone(tampered.Raw), []byte(`"chain_id":"`), []byte(`"chain_id":"1`), 1)
	putAll(t, s, wrongParent, wrongHash, tampered)

	for _, deep := range []bool{false, true} {
		for _, maxListed := range []int{0, 1} {
			cfg := verifyCfg(t, f, deep, to)
			cfg.MaxListed, cfg.Workers = maxListed, 1
			one, err := Verify(s, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if one.GapCount != 1 || one.Gaps[0] != (Gap{seam - 5, seam + 5}) || one.BreakCount != 2 || (deep && one.WrongHashCount != 2) {
				t.Fatalf("deep=%v: one worker: %s", deep, summary(one))
			}
			one.Duration = 0
			for _, workers := range []int{3} {
				cfg.Workers = workers
				many, err := Verify(s, cfg)
				if err != nil {
					t.Fatal(err)
				}
				many.Duration = 0
				a, _ := json.Marshal(one)
				b, _ := json.Marshal(many)
				if !bytes.Equal(a, b) {
					t.Fatalf("deep=%v max %d: %d workers report\n%s\none worker\n%s", deep, maxListed, workers, b, a)
				}
			}
		}
	}
}

// TestVerifyReportIsCleanOnlyWhenEveryTableWasCompared: with no problem
// found, the text says "clean" only when every table's rows were compared
// over every exported height; otherwise it names what was left out.
func TestVerifyReportIsCleanOnlyWhenEveryTableWasCompared(t *testing.T) {
	staged := &StagingReport{Dir: "s"}
	for _, tc := range []struct {
		name  string
		pg    *PGReport
		clean bool
		want  []string
	}{
		{"all compared", &PGReport{Schema: "x", Chunk: 10, Complete: true, Tables: []TableCheck{{Table: "blocks", Compared: true, Chunks: 1, Rows: 5}}}, true,
			[]string{"blocks  equal: 5 rows in 1 chunk"}},
		{"a table not compared", &PGReport{Schema: "x", Chunk: 10, Tables: []TableCheck{{Table: "blocks", Compared: true, Chunks: 1, Rows: 5}, {Table: "logs", NotCompared: "not in the schema"}}}, false,
			[]string{"logs    NOT COMPARED: not in the schema", "not every table's rows were", "result: no problem found, not clean"}},
		{"a chunk not compared", &PGReport{Schema: "x", Chunk: 10, Tables: []TableCheck{{Table: "blocks", Compared: true, Chunks: 1, Rows: 5}}, Uncompared: []Uncompared{{From: 1, To: 9, Reason: "exported heights 1-9 are not staged"}}}, false,
			[]string{"heights 1-9 not compared in any table: exported heights 1-9 are not staged", "result: no problem found, not clean"}},
	} {
		var out bytes.Buffer
		VerifyReport{Staging: staged, PG: tc.pg}.WriteText(&out)
		text := out.String()
		if strings.Contains(text, "postgresql: clean") != tc.clean || strings.Contains(text, "result: clean") != tc.clean {
			t.Errorf("%s: clean %v:\n%s", tc.name, !tc.clean, text)
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: lacks %q:\n%s", tc.name, w, text)
			}
		}
	}
}
