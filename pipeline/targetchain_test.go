package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/rpctest"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
	"github.com/jackc/pgx/v5"
)

// targetState is everything a schema holds, every table's rows (blockhaul's
// own with their timestamps) and its indexes, as digests: a refused writer
// must leave it as it was.
func targetState(t *testing.T, dsn, schema string) string {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	tables := pgtest.Strings(t, conn, "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name", schema)
	var b strings.Builder
	for _, tb := range tables {
		var n int64
		var digest *string
		q := fmt.Sprintf(`SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM %s.%s t`, pgx.Identifier{schema}.Sanitize(), pgx.Identifier{tb}.Sanitize())
		if err := conn.QueryRow(ctx, q).Scan(&n, &digest); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s: %d rows %v\n", tb, n, deref(digest))
	}
	var ix string
	if err := conn.QueryRow(ctx, "SELECT coalesce(string_agg(indexname, ',' ORDER BY indexname), '') FROM pg_indexes WHERE schemaname = $1", schema).Scan(&ix); err != nil {
		t.Fatal(err)
	}
	b.WriteString("indexes: " + ix)
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// stagingState is what a staging directory holds: its chain, its heights
// and its checkpoint mirrors ("none" when there is no directory).
func stagingState(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return "none"
	}
	s := stagingtest.Open(t, dir, staging.Options{ReadOnly: true})
	defer s.Close()
	id, bound := s.Identity()
	lo, hi, any, err := s.Bounds()
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Mirrors()
	if err != nil {
		t.Fatal(err)
	}
	ms := make([]string, 0, len(m))
	for k, v := range m {
		ms = append(ms, fmt.Sprintf("%s@%d", k, v.Height))
	}
	return fmt.Sprintf("chain %v %+v, heights %v %d-%d, mirrors %v", bound, id, any, lo, hi, ms)
}

// emptyStore reports whether dir is missing or holds a store with no chain
// and no block.
func emptyStore(t *testing.T, dir string) bool {
	st := stagingState(t, dir)
	return st == "none" || strings.HasPrefix(st, "chain false") && strings.Contains(st, "heights false")
}

func mustRunCfg(t *testing.T, cfg Config) {
	t.Helper()
	if _, err := Run(context.Background(), cfg, io.Discard, quiet); err != nil {
		t.Fatalf("%s: %v", cfg.Command, err)
	}
}

// familyFirst is the first height of a family's chain.
func familyFirst(fam string) uint64 {
	if fam == "evm" {
		return evm.GenesisHeight
	}
	return 1
}

// A schema holds the chain it was first written with: every writer of
// another chain — the synthetic chain of another seed, of either family —
// is refused with exit 4 naming both chains, and leaves the target schema
// and its own staging store exactly as they were.
func TestEveryWriterRefusesAnotherChainAndLeavesBothStores(t *testing.T) {
	for _, fam := range family.Names() {
		t.Run(fam, func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			dir := t.TempDir()
			first := familyFirst(fam)
			const to = 60
			mustRunCfg(t, synthConfig(CmdRun, fam, dsn, filepath.Join(dir, "a"), first, to))
			rec := chainRecord(t, dsn, fam)
			if rec.Family != fam || rec.Height != first {
				t.Fatalf("recorded %+v, want family %s at height %d", rec, fam, first)
			}

			seed2 := func(cmd, stg string, from, to uint64) Config {
				c := synthConfig(cmd, fam, dsn, stg, from, to)
				c.SyntheticSeed = 2
				return c
			}
			// The other chain staged, whole and as two merged shards.
			other := filepath.Join(dir, "b")
			mustRunCfg(t, seed2(CmdFetch, other, first, to))
			merged := filepath.Join(dir, "merged")
			for i, r := range [][2]uint64{{first, 30}, {31, to}} {
				shard := filepath.Join(dir, fmt.Sprintf("shard%d", i))
				mustRunCfg(t, seed2(CmdFetch, shard, r[0], r[1]))
				m := seed2(CmdMerge, merged, r[0], r[1])
				m.MergeFrom = shard
				mustRunCfg(t, m)
			}
			otherHash := func() []byte {
				s := stagingtest.Open(t, other, staging.Options{ReadOnly: true})
				defer s.Close()
				h, _, err := s.Header(rec.Height)
				if err != nil {
					t.Fatal(err)
				}
				return h
			}()

			cases := []struct {
				name string
				cfg  Config
			}{
				{"run into a new store", seed2(CmdRun, filepath.Join(dir, "new"), first, to)},
				{"run on the other chain's store", seed2(CmdRun, other, first, to)},
				{"run of a range the schema does not hold", seed2(CmdRun, filepath.Join(dir, "new-high"), 100, 120)},
				{"export", seed2(CmdExport, other, first, to)},
				{"export over 2 streams", func() Config { c := seed2(CmdExport, other, first, to); c.ExportStreams = 2; return c }()},
				{"export --replay", func() Config { c := seed2(CmdExport, other, first, to); c.Replay = []string{"blocks"}; return c }()},
				{"export after merge", seed2(CmdExport, merged, first, to)},
				{"follow", seed2(CmdFollow, other, first, to)},
				{"follow into a new store", seed2(CmdFollow, filepath.Join(dir, "new-follow"), to+1, to+20)},
				{"follow --backfill-from", func() Config {
					c := seed2(CmdFollow, other, 40, to)
					c.BackfillFrom, c.BackfillFromSet = first, true
					return c
				}()},
			}
			want := targetState(t, dsn, fam)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					stg := stagingState(t, tc.cfg.Staging)
					_, err := Run(context.Background(), tc.cfg, io.Discard, quiet)
					var wc *export.WrongChainError
					if !errors.As(err, &wc) || ExitCode(err) != ExitData {
						t.Fatalf("got %v (exit %d), want the other chain refused with exit %d", err, ExitCode(err), ExitData)
					}
					msg := err.Error()
					if !strings.Contains(msg, rec.String()) {
						t.Errorf("error does not name the schema's chain %s: %s", rec, msg)
					}
					if fam == "cometbft" && !strings.Contains(msg, `"blockhaul-synthetic-2"`) ||
						fam == "evm" && !strings.Contains(msg, fmt.Sprintf("%X", otherHash)) {
						t.Errorf("error does not name the refused chain: %s", msg)
					}
					if got := targetState(t, dsn, fam); got != want {
						t.Errorf("the target schema changed:\nbefore %s\nafter  %s", want, got)
					}
					if got := stagingState(t, tc.cfg.Staging); got != stg && !(stg == "none" && emptyStore(t, tc.cfg.Staging)) {
						t.Errorf("staging changed:\nbefore %s\nafter  %s", stg, got)
					}
				})
			}

			// The chain the schema holds is still written: another range
			// of it from a new store.
			mustRunCfg(t, synthConfig(CmdRun, fam, dsn, filepath.Join(dir, "a2"), to+1, to+40))
			if got := chainRecord(t, dsn, fam); got.String() != rec.String() {
				t.Errorf("record changed from %s to %s", rec, got)
			}
		})
	}
}

func dropChainTable(t *testing.T, dsn, schema string) {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP TABLE "+pgx.Identifier{schema, "blockhaul_chain"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
}

func chainRecord(t *testing.T, dsn, schema string) export.ChainRecord {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	rec, ok, err := export.ReadChainRecord(ctx, conn, schema)
	if err != nil || !ok {
		t.Fatalf("no chain record in %s (%v)", schema, err)
	}
	return rec
}

// A schema an older blockhaul wrote records no chain: a writer is checked
// against its rows (another seed's chain is refused, naming the block
// whose hashes differ), and the chain's own next batch records it.
func TestSchemaWithoutChainRecordIsCheckedAgainstItsRowsThenRecorded(t *testing.T) {
	for _, fam := range family.Names() {
		t.Run(fam, func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			dir := t.TempDir()
			first := familyFirst(fam)
			mustRunCfg(t, synthConfig(CmdRun, fam, dsn, filepath.Join(dir, "a"), first, 60))
			dropChainTable(t, dsn, fam) // as an older blockhaul left the schema
			want := targetState(t, dsn, fam)

			for _, c := range []Config{
				// A range the old rows hold, from a new store (its hash
				// read from the source), and from a staged store.
				func() Config {
					c := synthConfig(CmdRun, fam, dsn, filepath.Join(dir, "b"), first, 60)
					c.SyntheticSeed = 2
					return c
				}(),
				func() Config {
					c := synthConfig(CmdExport, fam, dsn, filepath.Join(dir, "b"), 50, 60)
					c.SyntheticSeed = 2
					return c
				}(),
				// A range above the old rows: the one below it compared.
				func() Config {
					c := synthConfig(CmdRun, fam, dsn, filepath.Join(dir, "c"), 61, 80)
					c.SyntheticSeed = 2
					return c
				}(),
			} {
				if c.Command == CmdExport {
					f := c
					f.Command, f.PG = CmdFetch, ""
					mustRunCfg(t, f)
				}
				_, err := Run(context.Background(), c, io.Discard, quiet)
				var wc *export.WrongChainError
				if !errors.As(err, &wc) || ExitCode(err) != ExitData {
					t.Fatalf("%s %d-%d: got %v, want the other chain refused", c.Command, c.From, c.To, err)
				}
				if !strings.Contains(err.Error(), "its blocks table's block") {
					t.Errorf("error does not name the block compared: %v", err)
				}
				if got := targetState(t, dsn, fam); got != want {
					t.Errorf("the target schema changed:\nbefore %s\nafter  %s", want, got)
				}
			}

			// The chain's own next range passes the check and records it.
			mustRunCfg(t, synthConfig(CmdRun, fam, dsn, filepath.Join(dir, "a2"), 61, 80))
			if rec := chainRecord(t, dsn, fam); rec.Family != fam || rec.Height != 61 {
				t.Errorf("recorded %s, want the %s chain's block 61", rec, fam)
			}
			c := synthConfig(CmdRun, fam, dsn, filepath.Join(dir, "d"), 81, 90)
			c.SyntheticSeed = 2
			if _, err := Run(context.Background(), c, io.Discard, quiet); ExitCode(err) != ExitData {
				t.Errorf("after the record: got %v, want the other chain refused", err)
			}
		})
	}
}

// Real nodes' chains, recorded: two CometBFT nodes (two chain ids), and
// geth's dev chain against another chain of the same chain id (1337).
func TestRecordedNodesOfAnotherChainAreRefused(t *testing.T) {
	t.Run("cometbft", func(t *testing.T) {
		a := rpctest.NewServer(rpctest.Config{Handler: newCometReplay(t, "node-0.38").handle})
		defer a.Close()
		b := rpctest.NewServer(rpctest.Config{Handler: newCometReplay(t, "node-0.38-sdk").handle})
		defer b.Close()
		cfg := rpcRunConfig(t, a.URL)
		mustRunCfg(t, cfg)
		want := targetState(t, cfg.PG, "cometbft")

		other := cfg
		other.RPC, other.Staging, other.To = []string{b.URL}, t.TempDir(), 37
		_, err := Run(context.Background(), other, io.Discard, quiet)
		if ExitCode(err) != ExitData || err == nil ||
			!strings.Contains(err.Error(), `cometbft chain "test-chain-61jx7G"`) || !strings.Contains(err.Error(), `cometbft chain "test-chain-EVDuyT"`) {
			t.Fatalf("got %v (exit %d), want both chain ids named, exit 4", err, ExitCode(err))
		}
		if got := targetState(t, cfg.PG, "cometbft"); got != want {
			t.Errorf("the target schema changed:\nbefore %s\nafter  %s", want, got)
		}
		// The same node again, from a new store: its own chain.
		again := cfg
		again.Staging, again.Alias = t.TempDir(), "again"
		mustRunCfg(t, again)
	})
	t.Run("evm", func(t *testing.T) {
		geth := newGethReplay(t)
		srv := rpctest.NewServer(rpctest.Config{Handler: geth.handle})
		defer srv.Close()
		cfg := testConfig(CmdRun, pgtest.NewDatabase(t), t.TempDir(), nil, 0, geth.tip)
		cfg.Chain, cfg.Schema, cfg.FromSet, cfg.RPC = "evm", "", true, []string{srv.URL}
		mustRunCfg(t, cfg)
		rec := chainRecord(t, cfg.PG, "evm")
		if rec.ChainID != "1337" || rec.Height != 0 {
			t.Fatalf("recorded %s, want geth's chain 1337 from block 0", rec)
		}
		want := targetState(t, cfg.PG, "evm")

		// Another chain with geth's chain id: told apart by its blocks.
		other := cfg
		other.RPC, other.Staging = nil, t.TempDir()
		other.Source = evmsynth.NewSynthetic(evmsynth.SyntheticConfig{Seed: 1, ChainID: 1337, Tip: func() uint64 { return 100 }})
		_, err := Run(context.Background(), other, io.Discard, quiet)
		if ExitCode(err) != ExitData || err == nil || !strings.Contains(err.Error(), rec.String()) || !strings.Contains(err.Error(), `evm chain "1337" of the source, whose block 0 has hash`) {
			t.Fatalf("got %v (exit %d), want geth's block 0 and the other's named, exit 4", err, ExitCode(err))
		}
		if got := targetState(t, cfg.PG, "evm"); got != want {
			t.Errorf("the target schema changed:\nbefore %s\nafter  %s", want, got)
		}
		if !emptyStore(t, other.Staging) {
			t.Errorf("the refused run staged blocks: %s", stagingState(t, other.Staging))
		}
	})
}

// gethReplay answers EVM JSON-RPC calls from the recorded geth-dev folder
// (chain/evm/testdata/geth-dev): chain id, tip, blocks and receipts.
type gethReplay struct {
	chainID json.RawMessage
	blocks  map[uint64]json.RawMessage
	receipt map[uint64]json.RawMessage
	tip     uint64
}

func newGethReplay(t *testing.T) *gethReplay {
	t.Helper()
	dir := filepath.Join("..", "chain", "evm", "testdata", "geth-dev")
	read := func(name string) (json.RawMessage, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Result json.RawMessage }
		if err := json.Unmarshal(b, &env); err != nil || env.Result == nil {
			t.Fatalf("%s: no result (%v)", name, err)
		}
		return env.Result, true
	}
	g := &gethReplay{blocks: map[uint64]json.RawMessage{}, receipt: map[uint64]json.RawMessage{}}
	g.chainID, _ = read("chain_id.json")
	for h := uint64(0); ; h++ {
		blk, ok := read(fmt.Sprintf("block_%d.json", h))
		if !ok {
			break
		}
		g.blocks[h] = blk
		g.receipt[h], _ = read(fmt.Sprintf("receipts_%d.json", h))
		g.tip = h
	}
	if len(g.blocks) == 0 || g.chainID == nil {
		t.Fatalf("no fixtures in %s", dir)
	}
	return g
}

func (g *gethReplay) handle(method string, params json.RawMessage) (any, *rpctest.Error) {
	switch method {
	case "eth_chainId":
		return g.chainID, nil
	case "eth_blockNumber":
		return fmt.Sprintf("0x%x", g.tip), nil
	case "eth_getBlockByNumber", "eth_getBlockReceipts":
	default:
		return nil, &rpctest.Error{Code: -32601, Message: "the method " + method + " does not exist/is not available"}
	}
	var p []json.RawMessage
	var q string
	if json.Unmarshal(params, &p) != nil || len(p) == 0 || json.Unmarshal(p[0], &q) != nil || !strings.HasPrefix(q, "0x") {
		return nil, &rpctest.Error{Code: -32602, Message: "invalid argument 0"}
	}
	h, err := strconv.ParseUint(q[2:], 16, 64)
	if err != nil {
		return nil, &rpctest.Error{Code: -32602, Message: "invalid argument 0: " + err.Error()}
	}
	if method == "eth_getBlockByNumber" {
		if b, ok := g.blocks[h]; ok {
			return b, nil
		}
	} else if r, ok := g.receipt[h]; ok {
		return r, nil
	}
	return json.RawMessage("null"), nil
}

// A schema holding one family's chain refuses every writer of the other
// family as it refuses another chain of its own: exit 4, "schema S holds
// F chain …", before any DDL or comparison of the tables' columns (a
// run's was a list of every missing column, exit 2), the schema as it was.
func TestAnotherFamilyIntoASchemaIsRefusedAsAnotherChain(t *testing.T) {
	for _, pair := range [][2]string{{"cometbft", "evm"}, {"evm", "cometbft"}} {
		held, other := pair[0], pair[1]
		t.Run(other+" into "+held, func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			dir := t.TempDir()
			mustRunCfg(t, synthConfig(CmdRun, held, dsn, filepath.Join(dir, "a"), familyFirst(held), 40))
			rec := chainRecord(t, dsn, held)
			otherStore := filepath.Join(dir, "b")
			mustRunCfg(t, synthConfig(CmdFetch, other, "", otherStore, familyFirst(other), 40))
			into := func(cmd, stg string) Config {
				c := synthConfig(cmd, other, dsn, stg, familyFirst(other), 40)
				c.Schema = held
				return c
			}
			want := targetState(t, dsn, held)
			for _, tc := range []struct {
				name string
				cfg  Config
			}{
				{"run into a new store", into(CmdRun, filepath.Join(dir, "new"))},
				{"run on its own store", into(CmdRun, otherStore)},
				{"export", into(CmdExport, otherStore)},
				{"follow", into(CmdFollow, otherStore)},
			} {
				t.Run(tc.name, func(t *testing.T) {
					_, err := Run(context.Background(), tc.cfg, io.Discard, quiet)
					var wc *export.WrongChainError
					if !errors.As(err, &wc) || ExitCode(err) != ExitData {
						t.Fatalf("got %v (exit %d), want the other family refused with exit %d", err, ExitCode(err), ExitData)
					}
					if msg := err.Error(); !strings.Contains(msg, "schema "+held+" holds "+rec.String()) || !strings.Contains(msg, "refusing "+other+" chain") {
						t.Errorf("error does not name both chains: %s", msg)
					}
					if got := targetState(t, dsn, held); got != want {
						t.Errorf("the target schema changed:\nbefore %s\nafter  %s", want, got)
					}
				})
			}
		})
	}
}
