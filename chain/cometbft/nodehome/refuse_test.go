package nodehome

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dbm "github.com/cometbft/cometbft-db"
	sm "github.com/cometbft/cometbft/state"
	"github.com/cometbft/cometbft/store"

	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/internal/nodefixture"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

// dbmOpenWritable opens a node database as the node does: read-write,
// holding its lock.
func dbmOpenWritable(dir, name string) (dbm.DB, error) {
	return dbm.NewGoLevelDB(name, dir)
}

// fetchInto runs the loader over 1..to from src into a new store and
// returns how many heights it staged and its error.
func fetchInto(t *testing.T, src loader.Source, from, to uint64) (int, error) {
	t.Helper()
	st := stagingtest.Open(t, t.TempDir(), staging.Options{})
	defer st.Close()
	_, ferr := loader.Fetch(context.Background(), src, st, from, to, loader.Config{Verify: cometbft.VerifyBlock}, nil)
	missing, err := st.Missing(from, to)
	if err != nil {
		t.Fatal(err)
	}
	var gap uint64
	for _, r := range missing {
		gap += r.Len()
	}
	return int(to - from + 1 - gap), ferr
}

func TestRefusesDiscardedResults(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	home := fx.Unpack(t)
	nodefixture.SetConfig(t, home, "discard_abci_responses", "discard_abci_responses = true")
	src := openHome(t, home)
	staged, err := fetchInto(t, src, 5, 100)
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Height != 5 || !strings.Contains(err.Error(), "discard_abci_responses") {
		t.Fatalf("fetch from a home that discards results: %v", err)
	}
	if !errors.Is(err, cometbft.ErrUnavailable) || fault.Retryable(err) {
		t.Fatalf("%v: want cometbft.ErrUnavailable, not retryable", err)
	}
	if staged != 0 {
		t.Fatalf("%d heights staged before the refusal", staged)
	}
}

// TestRefusesPrunedHome prunes a copy of the home with CometBFT's own
// block store and state store (as retain_height does) and asks for a
// range that starts below what is left.
func TestRefusesPrunedHome(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	home := fx.Unpack(t)
	const retain = 1000
	pruneHome(t, home, retain)
	src := openHome(t, home)
	if src.Base() != retain {
		t.Fatalf("base %d after pruning below %d", src.Base(), retain)
	}
	staged, err := fetchInto(t, src, 900, 1100)
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Height != 900 || !strings.Contains(err.Error(), "lowest height is 1000") {
		t.Fatalf("fetch below the base: %v", err)
	}
	if staged != 0 {
		t.Fatalf("%d heights staged before the refusal", staged)
	}
	// What is left is served.
	if staged, err := fetchInto(t, src, retain, retain+99); err != nil || staged != 100 {
		t.Fatalf("fetch above the base: %v, %d staged", err, staged)
	}
}

// TestRefusesMissingResults deletes the results of single heights (as a
// node that discarded them for a while leaves them) and checks the range
// check names the first one, wherever it falls in the parts the check
// reads at once, and that a range without them is served.
func TestRefusesMissingResults(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	home := fx.Unpack(t)
	tip := fx.Tip()
	if tip < 2*minCheckPart {
		t.Fatalf("the fixture's %d heights are too few to check in parts of %d", tip, minCheckPart)
	}
	gaps := []uint64{300, tip - 200, tip - 100} // one in the first part, two in the last
	sdb, err := dbmOpenWritable(filepath.Join(home, "data"), "state")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range gaps {
		if err := sdb.Delete(resultsKey(h)); err != nil {
			t.Fatal(err)
		}
	}
	sdb.Close()
	for _, tc := range []struct{ from, to, want uint64 }{
		{1, tip, gaps[0]},
		{gaps[0] + 1, tip, gaps[1]},
		{gaps[1] + 1, tip, gaps[2]},
	} {
		src := openHome(t, home)
		err := src.CheckRange(context.Background(), tc.from, tc.to)
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Height != tc.want || !strings.Contains(err.Error(), "no block results stored") {
			t.Fatalf("check of %d..%d: %v, want height %d without results", tc.from, tc.to, err, tc.want)
		}
		src.Close()
	}
	if err := openHome(t, home).CheckRange(context.Background(), gaps[0]+1, gaps[1]-1); err != nil {
		t.Fatalf("check of a range with its results: %v", err)
	}
}

// pruneHome removes blocks and results below retain, with the node's own
// code.
func pruneHome(t *testing.T, home string, retain int64) {
	t.Helper()
	data := filepath.Join(home, "data")
	bdb, err := dbmOpenWritable(data, "blockstore")
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	sdb, err := dbmOpenWritable(data, "state")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	ss := sm.NewStore(sdb, sm.StoreOptions{})
	state, err := ss.Load()
	if err != nil {
		t.Fatal(err)
	}
	bs := store.NewBlockStore(bdb)
	base := bs.Base()
	if _, _, err := bs.PruneBlocks(retain, state); err != nil {
		t.Fatal(err)
	}
	if err := ss.PruneStates(base, retain, retain); err != nil {
		t.Fatal(err)
	}
}

func TestRefusesUnsupportedBackend(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	home := fx.Unpack(t)
	nodefixture.SetConfig(t, home, "db_backend", `db_backend = "rocksdb"`)
	_, err := Open(Config{Home: home})
	if err == nil || !strings.Contains(err.Error(), `db_backend "rocksdb" is not supported`) {
		t.Fatalf("Open of a rocksdb home: %v", err)
	}
	if _, err := Open(Config{Home: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "is not a CometBFT node home") {
		t.Fatalf("Open of an empty directory: %v", err)
	}
}

// TestDamagedDatabase flips bytes in every table file of the block store:
// the source fails with a *CorruptError naming the database, never a panic
// and never a wrong record.
func TestDamagedDatabase(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	home := fx.Unpack(t)
	dir := filepath.Join(home, "data", "blockstore.db")
	files, err := filepath.Glob(filepath.Join(dir, "*.ldb"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no table files in %s (%v)", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i := 100; i < len(b); i += 512 {
			b[i] ^= 0xff
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := Open(Config{Home: home})
	if err == nil {
		defer src.Close()
		staged, err := fetchInto(t, src, 1, fx.Tip())
		if staged != 0 && err == nil {
			t.Fatalf("a damaged block store staged %d heights without an error", staged)
		}
		checkCorrupt(t, err, dir)
		return
	}
	checkCorrupt(t, err, dir)
}

func checkCorrupt(t *testing.T, err error, dir string) {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Path != dir || fault.Retryable(err) {
		t.Fatalf("damaged block store: %v, want a *CorruptError naming %s", err, dir)
	}
	t.Log(err)
}
