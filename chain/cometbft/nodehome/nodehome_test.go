package nodehome

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain/chaintest"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/nodefixture"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

func openHome(t testing.TB, home string) *Source {
	t.Helper()
	src, err := Open(Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src
}

// TestRecordsEqualRPC builds every height's record from the home and
// compares it with the record the RPC source staged from the same node.
func TestRecordsEqualRPC(t *testing.T) {
	for _, tc := range []struct {
		name   string
		legacy bool // results in the 0.37 shape
	}{
		{"home-0.38", false},
		{"home-0.37", true},
		// 0.37.18 to 1500, then 0.38.26: 0.37 results served as 0.38 does.
		{"home-0.37-0.38", false},
		// 0.34.35: the 0.37 shape, attributes in base64.
		{"home-0.34", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := nodefixture.Load(t, tc.name)
			src := openHome(t, fx.Unpack(t))
			if src.LegacyShape() != tc.legacy {
				t.Fatalf("LegacyShape %v, want %v", src.LegacyShape(), tc.legacy)
			}
			if want := tc.name == "home-0.34"; src.BytesAttributes() != want {
				t.Fatalf("BytesAttributes %v, want %v (a 0.34 node's home)", src.BytesAttributes(), want)
			}
			if src.Tip(context.Background()); src.tip < fx.Tip() {
				t.Fatalf("home tip %d, below the %d recorded heights", src.tip, fx.Tip())
			}
			withTxs := 0
			for i, want := range fx.Records {
				h := uint64(i + 1)
				got, err := src.Record(h)
				if err != nil {
					t.Fatalf("height %d: %v", h, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("height %d: the home's record differs from the RPC's at byte %d:\nhome: %s\nrpc:  %s",
						h, firstDiff(got, want), around(got, firstDiff(got, want)), around(want, firstDiff(got, want)))
				}
				if bytes.Contains(want, []byte(`"txs_results":[`)) {
					withTxs++
				}
			}
			// The chain is what the test claims: many heights with tx results.
			if withTxs < len(fx.Records)/4 {
				t.Fatalf("only %d of %d heights carry tx results", withTxs, len(fx.Records))
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func around(b []byte, i int) string {
	return string(b[max(0, i-80):min(len(b), i+80)])
}

func stage(t testing.TB, src loader.Source, to uint64) *staging.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	store := stagingtest.Open(t, t.TempDir(), staging.Options{})
	t.Cleanup(func() { store.Close() })
	if _, err := loader.Fetch(ctx, src, store, 1, to, loader.Config{Verify: cometbft.VerifyBlock}, nil); err != nil {
		t.Fatal(err)
	}
	return store
}

// TestStagedAndExportedEqualRPC stages the fixture's range from the home
// and from the recorded node's RPC, compares what each staged height by
// height, then exports both into PostgreSQL and compares the tables.
func TestStagedAndExportedEqualRPC(t *testing.T) {
	for _, name := range []string{"home-0.38", "home-0.37", "home-0.37-0.38", "home-0.34"} {
		t.Run(name, func(t *testing.T) {
			fx := nodefixture.Load(t, name)
			home := openHome(t, fx.Unpack(t))
			node := fx.Serve(t)
			client, err := jsonrpc.New(jsonrpc.Config{Endpoints: []string{node.URL}, MaxBatch: cometbft.RPCMaxBatch})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			rpc, err := cometbft.NewRPCSource(cometbft.RPCConfig{Client: client})
			if err != nil {
				t.Fatal(err)
			}
			fromHome := stage(t, home, fx.Tip())
			fromRPC := stage(t, rpc, fx.Tip())
			if node.MethodCalls("block_results") < int64(fx.Tip()) {
				t.Fatalf("the RPC source made %d block_results calls for %d heights", node.MethodCalls("block_results"), fx.Tip())
			}
			for h := uint64(1); h <= fx.Tip(); h++ {
				a, err := fromHome.Get(h)
				if err != nil {
					t.Fatal(err)
				}
				b, err := fromRPC.Get(h)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a.Raw, b.Raw) || !bytes.Equal(a.Hash, b.Hash) || !bytes.Equal(a.ParentHash, b.ParentHash) {
					t.Fatalf("height %d staged differently from the home and from RPC", h)
				}
			}

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			dec := cometbft.NewDecoder()
			orderBy := chaintest.OrderBy(t, dec.Tables())
			var prints []map[string]string
			for _, store := range []*staging.Store{fromHome, fromRPC} {
				dsn := pgtest.NewDatabase(t)
				conn := pgtest.ConnectTo(t, dsn)
				_, err = export.Run(ctx, export.Fixed(conn), store, dec, export.Config{
					Schema: "cometbft", BatchBlocks: 500, Stream: export.Stream{Alias: "nodehome", From: 1, To: fx.Tip()}})
				conn.Close(ctx)
				if err != nil {
					t.Fatal(err)
				}
				prints = append(prints, pgtest.Fingerprint(t, dsn, "cometbft", orderBy))
			}
			for table := range orderBy {
				if prints[0][table] != prints[1][table] {
					t.Errorf("table %s: from the home %s, from RPC %s", table, prints[0][table], prints[1][table])
				}
			}
			if prints[0]["blocks"] == "" || prints[0]["transactions"] == "" {
				t.Fatalf("no blocks or transactions exported: %v", prints[0])
			}
		})
	}
}

// TestRefusesRunningNode: a database another process holds (a running
// node) is refused by name, and its lock is left alone.
func TestRefusesRunningNode(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	home := fx.Unpack(t)
	held, err := dbmOpenWritable(filepath.Join(home, "data"), "blockstore")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = Open(Config{Home: home})
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("Open of a held home: %v, want a *LockedError", err)
	}
	if le.Path != filepath.Join(home, "data", "blockstore.db") {
		t.Fatalf("the error names %s", le.Path)
	}
	// The holder still writes: its lock was never taken.
	if err := held.SetSync([]byte("still-mine"), []byte("1")); err != nil {
		t.Fatal(err)
	}
}
