package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain/chaintest"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/internal/nodefixture"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/syndtr/goleveldb/leveldb"
)

func nodeHomeArgs(cmd, home, dsn, stg string, from, to uint64, extra ...string) []string {
	args := []string{cmd, "--node-home", home, "--staging", stg, "--from", fmt.Sprint(from), "--to", fmt.Sprint(to),
		"--batch-blocks", "200", "--progress-interval", "0", "--log-level", "warn"}
	if dsn != "" {
		args = append(args, "--pg", dsn)
	}
	return append(args, extra...)
}

// TestRunNodeHomeEqualsRPC: `run --node-home` on a recorded CometBFT
// 0.38.26 node's home fills PostgreSQL with the rows `run --rpc` fills from
// the same node's answers, every table, 2,500 heights; a fetch stopped part
// way (here: a first fetch of 1..1200) resumes from the home with the
// heights it lacks; the shards of a sharded fetch, merged, give the same
// rows again.
func TestRunNodeHomeEqualsRPC(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	home := fx.Unpack(t)
	to := fx.Tip()
	node := fx.Serve(t)
	orderBy := chaintest.OrderBy(t, cometbft.NewDecoder().Tables())

	dsnRPC := pgtest.NewDatabase(t)
	args := nodeHomeArgs("run", home, dsnRPC, filepath.Join(t.TempDir(), "rpc"), 1, to)
	args[1], args[2] = "--rpc", node.URL
	if code, out := blockhaul(t, args...); code != 0 {
		t.Fatalf("run --rpc: exit %d\n%s", code, out)
	}
	want := pgtest.Fingerprint(t, dsnRPC, "cometbft", orderBy)
	if strings.HasPrefix(want["transactions"], "0 rows") || strings.HasPrefix(want["events"], "0 rows") {
		t.Fatalf("the RPC run exported no transactions: %v", want)
	}

	// Part of the range first, then the whole: the run fetches what the
	// first left out.
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "home")
	if code, out := blockhaul(t, nodeHomeArgs("fetch", home, "", stg, 1, 1200)...); code != 0 {
		t.Fatalf("fetch --node-home 1..1200: exit %d\n%s", code, out)
	}
	calls := node.MethodCalls("block")
	code, out := blockhaul(t, nodeHomeArgs("run", home, dsn, stg, 1, to)...)
	if code != 0 {
		t.Fatalf("run --node-home: exit %d\n%s", code, out)
	}
	if m := regexp.MustCompile(`fetch: +(\d+) blocks staged of (\d+) planned`).FindStringSubmatch(out); m == nil || m[1] != fmt.Sprint(to-1200) || m[2] != m[1] {
		t.Fatalf("the resumed run fetched %v, want the %d heights the first fetch left out:\n%s", m, to-1200, out)
	}
	if n := node.MethodCalls("block"); n != calls {
		t.Fatalf("run --node-home asked the node's RPC %d times", n-calls)
	}
	got := pgtest.Fingerprint(t, dsn, "cometbft", orderBy)
	for table := range orderBy {
		if got[table] != want[table] {
			t.Errorf("table %s: from the home %s, from RPC %s", table, got[table], want[table])
		}
	}

	// Two shards of a sharded fetch, each into its own store as two pods
	// would, merged and exported.
	dsnShards := pgtest.NewDatabase(t)
	merged := filepath.Join(t.TempDir(), "merged")
	for i := range 2 {
		shard := filepath.Join(t.TempDir(), fmt.Sprint("shard", i))
		if code, out := blockhaul(t, nodeHomeArgs("fetch", home, "", shard, 1, to, "--shards", "2", "--shard-index", fmt.Sprint(i), "--shard-chunk", "500")...); code != 0 {
			t.Fatalf("fetch --node-home shard %d: exit %d\n%s", i, code, out)
		}
		if code, out := blockhaul(t, "merge", "--staging", merged, "--merge-from", shard, "--log-level", "warn"); code != 0 {
			t.Fatalf("merge shard %d: exit %d\n%s", i, code, out)
		}
	}
	if code, out := blockhaul(t, "export", "--staging", merged, "--pg", dsnShards, "--from", "1", "--to", fmt.Sprint(to), "--progress-interval", "0", "--log-level", "warn"); code != 0 {
		t.Fatalf("export of the merged shards: exit %d\n%s", code, out)
	}
	got = pgtest.Fingerprint(t, dsnShards, "cometbft", orderBy)
	for table := range orderBy {
		if got[table] != want[table] {
			t.Errorf("sharded: table %s: from the home %s, from RPC %s", table, got[table], want[table])
		}
	}
}

// TestNodeHomeRefusals: what --node-home cannot read is refused by name,
// with the exit status of docs/exit-status.md, before the staging store or
// the schema exists.
func TestNodeHomeRefusals(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	dsn := pgtest.NewDatabase(t)
	for _, tc := range []struct {
		name  string
		setup func(home string) // changes the unpacked home
		args  func(home, stg string) []string
		code  int
		says  []string
	}{
		{name: "with --rpc", code: 2, says: []string{"--node-home and --rpc name two sources"},
			args: func(home, stg string) []string {
				return nodeHomeArgs("run", home, dsn, stg, 1, 100, "--rpc", "http://127.0.0.1:1")
			}},
		{name: "evm", code: 2, says: []string{"evm: no node-home source", "it has archive, rpc, synthetic"},
			args: func(home, stg string) []string {
				return nodeHomeArgs("fetch", home, "", stg, 1, 100, "--chain", "evm")
			}},
		{name: "follow", code: 2, says: []string{"a stopped node's home gets none"},
			args: func(home, stg string) []string {
				return []string{"follow", "--node-home", home, "--staging", stg, "--pg", dsn, "--log-level", "warn"}
			}},
		{name: "not a home", code: 2, says: []string{"is not a CometBFT node home"},
			args: func(home, stg string) []string {
				return nodeHomeArgs("run", filepath.Dir(stg), dsn, stg, 1, 100)
			}},
		{name: "backend", code: 2, says: []string{`db_backend "rocksdb" is not supported`},
			setup: func(home string) { nodefixture.SetConfig(t, home, "db_backend", `db_backend = "rocksdb"`) },
			args:  func(home, stg string) []string { return nodeHomeArgs("run", home, dsn, stg, 1, 100) }},
		{name: "discarded", code: 2, says: []string{"height 1 is not available", "discard_abci_responses"},
			setup: func(home string) {
				nodefixture.SetConfig(t, home, "discard_abci_responses", "discard_abci_responses = true")
			},
			args: func(home, stg string) []string { return nodeHomeArgs("run", home, dsn, stg, 1, 100) }},
		{name: "above the tip", code: 2, says: []string{"is not available in node home", "above the home's latest height"},
			args: func(home, stg string) []string { return nodeHomeArgs("fetch", home, "", stg, 1, 1_000_000) }},
		{name: "locked", code: 2, says: []string{"blockstore.db is locked by a running node"},
			args: func(home, stg string) []string {
				db, err := leveldb.OpenFile(filepath.Join(home, "data", "blockstore.db"), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return nodeHomeArgs("run", home, dsn, stg, 1, 100)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := fx.Unpack(t)
			if tc.setup != nil {
				tc.setup(home)
			}
			stg := filepath.Join(t.TempDir(), "staging")
			code, out := blockhaul(t, tc.args(home, stg)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			for _, s := range tc.says {
				if !strings.Contains(out, s) {
					t.Errorf("output does not say %q:\n%s", s, out)
				}
			}
			if _, err := os.Stat(stg); !os.IsNotExist(err) {
				t.Errorf("the refused job left %s behind (%v)", stg, err)
			}
		})
	}
	// No run created the schema.
	var n int
	if err := connect(t, dsn).QueryRow(context.Background(), `SELECT count(*) FROM pg_namespace WHERE nspname = 'cometbft'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("schema cometbft after refused runs: %d (%v), want none", n, err)
	}
}

// TestNodeHomeRefusalOnAStoreItFilled: a store that holds heights already
// is asked only for those it lacks, and a missing height the home cannot
// serve (its results discarded since) refuses fetch and run before either
// stages a height or run touches the schema, naming the first such height.
func TestNodeHomeRefusalOnAStoreItFilled(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	home := fx.Unpack(t)
	stg := filepath.Join(t.TempDir(), "staging")
	if code, out := blockhaul(t, nodeHomeArgs("fetch", home, "", stg, 1, 100)...); code != 0 {
		t.Fatalf("fetch --node-home 1..100: exit %d\n%s", code, out)
	}
	nodefixture.SetConfig(t, home, "discard_abci_responses", "discard_abci_responses = true")
	// 1..100 staged: asks nothing of the home.
	if code, out := blockhaul(t, nodeHomeArgs("fetch", home, "", stg, 1, 100)...); code != 0 {
		t.Fatalf("fetch --node-home of a staged range: exit %d\n%s", code, out)
	}
	dsn := pgtest.NewDatabase(t)
	for _, args := range [][]string{nodeHomeArgs("fetch", home, "", stg, 1, 200), nodeHomeArgs("run", home, dsn, stg, 1, 200)} {
		code, out := blockhaul(t, args...)
		if code != 2 || !strings.Contains(out, "height 101 is not available") || !strings.Contains(out, "discard_abci_responses") {
			t.Fatalf("%s on a store holding 1..100, results discarded: exit %d, want 2 naming height 101:\n%s", args[0], code, out)
		}
	}
	code, out := blockhaul(t, "status", "--staging", stg, "--log-level", "warn")
	if code != 0 || !regexp.MustCompile(`\b1-100\b`).MatchString(out) || regexp.MustCompile(`\b101\b`).MatchString(out) {
		t.Fatalf("status after the refusals: exit %d, want the store to hold 1-100 alone:\n%s", code, out)
	}
	var n int
	if err := connect(t, dsn).QueryRow(context.Background(), `SELECT count(*) FROM pg_namespace WHERE nspname = 'cometbft'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("schema cometbft after the refused run: %d (%v), want none", n, err)
	}
}
