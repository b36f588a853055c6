package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/rpctest"
	"github.com/blockhaul/blockhaul/internal/storetest"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

// archiveFixture stages [1, to] of a family's synthetic chain once.
func archiveFixture(t *testing.T, chainName string, to uint64) (stg string) {
	t.Helper()
	stg = filepath.Join(t.TempDir(), "s")
	cfg := synthConfig(CmdFetch, chainName, "", stg, 1, to)
	if _, err := Run(context.Background(), cfg, &bytes.Buffer{}, quiet); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return stg
}

func synthConfig(cmd, chainName, dsn, stg string, from, to uint64) Config {
	cfg := testConfig(cmd, dsn, stg, nil, from, to)
	cfg.Chain, cfg.Schema = chainName, ""
	cfg.SyntheticTip = to + 100
	cfg.SyntheticTxs = 3
	cfg.FromSet = true
	return cfg
}

func exportInto(t *testing.T, chainName, stg string, to uint64) string {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	if _, err := Run(context.Background(), synthConfig(CmdExport, chainName, dsn, stg, 1, to), &bytes.Buffer{}, quiet); err != nil {
		t.Fatalf("export: %v", err)
	}
	return dsn
}

func checksumCmd(chainName, dsn, against string, chunk uint64) Config {
	cfg := DefaultConfig()
	cfg.Command, cfg.Chain, cfg.PG, cfg.Against, cfg.Chunk = CmdChecksum, chainName, dsn, against, chunk
	cfg.JSON = true
	return cfg
}

// runReport runs an archive command with --json and reads its report; an
// output that is not the report's JSON fails the test.
func runReport[R any](t *testing.T, cfg Config) (R, error) {
	t.Helper()
	var out bytes.Buffer
	_, err := Run(context.Background(), cfg, &out, quiet)
	var r R
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
		t.Fatalf("%s output is not JSON (%v): %v\n%s", cfg.Command, err, jerr, out.String())
	}
	return r, err
}

func runChecksum(t *testing.T, cfg Config) (archive.ChecksumReport, error) {
	t.Helper()
	return runReport[archive.ChecksumReport](t, cfg)
}

func execSQL(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	for _, s := range stmts {
		tag, err := conn.Exec(ctx, s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if tag.RowsAffected() != 1 {
			t.Fatalf("%s: %d rows affected, want 1", s, tag.RowsAffected())
		}
	}
}

// TestChecksumParity exports one staging store into two databases, finds
// them equal, then alters one cell, deletes one row and adds one row in B,
// each in a different table and chunk, and expects exactly those three
// differences, exit 4 — for both chain families.
func TestChecksumParity(t *testing.T) {
	type damage struct {
		sql          string
		table        string
		from, to     uint64
		problemPart  string
		wantRowDelta int64
	}
	cases := []struct {
		chain  string
		damage []damage
	}{
		{"cometbft", []damage{
			{`UPDATE cometbft.events SET attributes = '[["k","v",true]]' WHERE ctid = (SELECT ctid FROM cometbft.events WHERE height BETWEEN 700 AND 799 ORDER BY height, event_index LIMIT 1)`,
				"events", 500, 999, "content differs", 0},
			{`DELETE FROM cometbft.transactions WHERE ctid = (SELECT ctid FROM cometbft.transactions WHERE height >= 1000 ORDER BY height, tx_index LIMIT 1)`,
				"transactions", 1000, 1499, "rows in A", -1},
			{`INSERT INTO cometbft.blocks SELECT 1500, hash, parent_hash, time, chain_id, proposer_address, num_txs, num_events, app_hash, last_commit_hash, data_hash, validators_hash, next_validators_hash, consensus_hash, last_results_hash, evidence_hash FROM cometbft.blocks WHERE height = 1200`,
				"blocks", 1500, 1999, "only in B", 1},
		}},
		{"evm", []damage{
			{`UPDATE evm.transactions SET value = value + 1 WHERE ctid = (SELECT ctid FROM evm.transactions WHERE block_number BETWEEN 700 AND 799 ORDER BY block_number, transaction_index LIMIT 1)`,
				"transactions", 500, 999, "content differs", 0},
			{`DELETE FROM evm.logs WHERE ctid = (SELECT ctid FROM evm.logs WHERE block_number >= 1000 ORDER BY block_number, log_index LIMIT 1)`,
				"logs", 1000, 1499, "rows in A", -1},
			{`INSERT INTO evm.logs SELECT block_number, block_time, log_index + 100000, transaction_index, transaction_hash, address, topic0, topic1, topic2, topic3, data FROM evm.logs WHERE ctid = (SELECT ctid FROM evm.logs WHERE block_number < 500 ORDER BY block_number, log_index LIMIT 1)`,
				"logs", 0, 499, "rows in A", 1},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.chain, func(t *testing.T) {
			const to = 1200
			stg := archiveFixture(t, tc.chain, to)
			a := exportInto(t, tc.chain, stg, to)
			b := exportInto(t, tc.chain, stg, to)

			r, err := runChecksum(t, checksumCmd(tc.chain, a, b, 500))
			if err != nil || !r.Equal() {
				t.Fatalf("a database and its re-export: err %v, differences %+v", err, r.Differences)
			}
			dec, _ := bareJob(Config{Chain: tc.chain}).decoder()
			if dec == nil || len(r.A.Tables) != len(dec.Tables()) || r.B == nil {
				t.Fatalf("report: %+v", r)
			}
			for i, ta := range r.A.Tables {
				tb := r.B.Tables[i]
				// Every block table has rows in all three chunks (0-499,
				// 500-999, 1000-1499); a sparse table (validator updates)
				// may have fewer.
				if ta.Rows != tb.Rows || ta.Sum != tb.Sum || len(ta.Chunks) > 3 || (i == 0 && (ta.Rows == 0 || len(ta.Chunks) != 3)) {
					t.Fatalf("table %s: %d rows, %d chunks, sum %s vs %d rows, sum %s", ta.Table, ta.Rows, len(ta.Chunks), ta.Sum, tb.Rows, tb.Sum)
				}
			}

			for _, d := range tc.damage {
				execSQL(t, b, d.sql)
			}
			r, err = runChecksum(t, checksumCmd(tc.chain, a, b, 500))
			if ExitCode(err) != ExitData {
				t.Fatalf("damaged B: err %v (exit %d), want exit 4", err, ExitCode(err))
			}
			if len(r.Differences) != len(tc.damage) {
				t.Fatalf("differences %+v, want %d", r.Differences, len(tc.damage))
			}
			for _, d := range tc.damage {
				found := false
				for _, got := range r.Differences {
					if got.Table == d.table && got.From == d.from && got.To == d.to {
						found = true
						if !strings.Contains(got.Problem, d.problemPart) || got.RowDelta != d.wantRowDelta {
							t.Errorf("%s %d-%d: problem %q row delta %d, want %q and %d", d.table, d.from, d.to, got.Problem, got.RowDelta, d.problemPart, d.wantRowDelta)
						}
						// One row of one height was touched: the drill-down
						// names that height alone, inside the chunk.
						if got.HeightCount != 1 || len(got.Heights) != 1 || got.Heights[0].Height < d.from || got.Heights[0].Height > d.to ||
							got.Heights[0].BRows-got.Heights[0].ARows != d.wantRowDelta {
							t.Errorf("%s %d-%d: heights %+v (count %d), want one height with row delta %d", d.table, d.from, d.to, got.Heights, got.HeightCount, d.wantRowDelta)
						}
					}
				}
				if !found {
					t.Errorf("no difference reported for %s %d-%d; got %+v", d.table, d.from, d.to, r.Differences)
				}
			}

			// The text report names table and chunk too.
			cfg := checksumCmd(tc.chain, a, b, 500)
			cfg.JSON = false
			var out bytes.Buffer
			if _, err := Run(context.Background(), cfg, &out, quiet); ExitCode(err) != ExitData {
				t.Fatalf("text: exit %d", ExitCode(err))
			}
			for _, want := range []string{"differs: " + tc.damage[0].table + " heights 500-999: same", "    at 1 height: ", "result: 3 differences"} {
				if !strings.Contains(out.String(), want) {
					t.Fatalf("text report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestChecksumRange digests only --from/--to: damage outside the range is
// not seen, damage inside is.
func TestChecksumRange(t *testing.T) {
	const to = 300
	stg := archiveFixture(t, "cometbft", to)
	a := exportInto(t, "cometbft", stg, to)
	b := exportInto(t, "cometbft", stg, to)
	execSQL(t, b, `UPDATE cometbft.blocks SET num_txs = num_txs + 1 WHERE height = 250`)
	cfg := checksumCmd("cometbft", a, b, 100)
	cfg.From, cfg.FromSet, cfg.To, cfg.ToSet = 1, true, 199, true
	if r, err := runChecksum(t, cfg); err != nil || !r.Equal() {
		t.Fatalf("1-199: %v %+v", err, r.Differences)
	}
	cfg.To = 250
	r, err := runChecksum(t, cfg)
	if ExitCode(err) != ExitData || len(r.Differences) != 1 || r.Differences[0].From != 200 || r.Differences[0].To != 250 {
		t.Fatalf("1-250: exit %d, %+v", ExitCode(err), r.Differences)
	}
	if d := r.Differences[0]; d.HeightCount != 1 || len(d.Heights) != 1 || d.Heights[0] != (archive.HeightDifference{Height: 250, ARows: 1, BRows: 1}) {
		t.Fatalf("1-250: located heights %+v (count %d), want 250 alone", d.Heights, d.HeightCount)
	}
}

func TestChecksumBadInput(t *testing.T) {
	cfg := checksumCmd("cometbft", "", "not a dsn ://", 0)
	cfg.AgainstSchema = "x"
	_, err := Run(context.Background(), cfg, &bytes.Buffer{}, quiet)
	if ExitCode(err) != ExitConfig {
		t.Fatalf("exit %d: %v", ExitCode(err), err)
	}
	for _, flag := range []string{"--pg", "--chunk"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("error does not name %s: %v", flag, err)
		}
	}
	// A schema without the family's tables is a named error, not a digest
	// of nothing.
	dsn := pgtest.NewDatabase(t)
	cfg = checksumCmd("evm", dsn, "", 100)
	cfg.JSON = false
	_, err = Run(context.Background(), cfg, &bytes.Buffer{}, quiet)
	if err == nil || !strings.Contains(err.Error(), `"evm"."blocks" does not exist`) {
		t.Fatalf("missing tables: %v", err)
	}
}

func verifyCmd(stg, dsn string) Config {
	cfg := DefaultConfig()
	cfg.Command, cfg.Staging, cfg.PG, cfg.JSON = CmdVerify, stg, dsn, true
	cfg.EnsureDefaults()
	return cfg
}

func runVerify(t *testing.T, cfg Config) (archive.VerifyReport, error) {
	t.Helper()
	return runReport[archive.VerifyReport](t, cfg)
}

// TestVerifyPostgreSQL exports two ranges as two backfill streams at
// different times, finds them clean, then breaks the seam between them, a
// checkpoint's rows and a block against staging, and expects each named.
func TestVerifyPostgreSQL(t *testing.T) {
	for _, chainName := range family.Names() {
		t.Run(chainName, func(t *testing.T) {
			stg := archiveFixture(t, chainName, 600)
			dsn := pgtest.NewDatabase(t)
			for _, r := range [][2]uint64{{301, 600}, {1, 300}} { // the upper range first
				if _, err := Run(context.Background(), synthConfig(CmdExport, chainName, dsn, stg, r[0], r[1]), &bytes.Buffer{}, quiet); err != nil {
					t.Fatal(err)
				}
			}
			// --chain is not given: the family and schema are the store's.
			r, err := runVerify(t, verifyCmd(stg, dsn))
			if err != nil || r.PG == nil || r.PG.Blocks != 600 || len(r.PG.Streams) != 2 || r.Staging.Records != 600 {
				t.Fatalf("clean: %v %+v", err, r.PG)
			}
			fam, _ := family.Lookup(chainName)
			hc := fam.Tables()[0].HeightColumn // the blocks table's
			sch := chainName
			execSQL(t, dsn,
				"UPDATE "+sch+".blocks SET parent_hash = '\\x00' WHERE "+hc+" = 301", // the seam
				"DELETE FROM "+sch+".blocks WHERE "+hc+" = 600",                      // the checkpoint's row
				"UPDATE "+sch+".blocks SET hash = '\\x01' WHERE "+hc+" = 100",        // not staging's block
			)
			r, err = runVerify(t, verifyCmd(stg, dsn))
			if ExitCode(err) != ExitData {
				t.Fatalf("damaged: exit %d (%v)", ExitCode(err), err)
			}
			p := r.PG
			var breaks []uint64
			for _, b := range p.Breaks {
				breaks = append(breaks, b.Height)
			}
			// 101 does not link to the altered 100; 301 is the seam.
			if p.BreakCount != 2 || breaks[0] != 101 || breaks[1] != 301 {
				t.Errorf("breaks %v", breaks)
			}
			if p.DiffersCount != 1 || p.Differs[0].Height != 100 {
				t.Errorf("differs %+v", p.Differs)
			}
			var upper archive.StreamCheck
			for _, s := range p.Streams {
				if s.Stream == "backfill/range-301-600" {
					upper = s
				}
			}
			if len(upper.Problem) == 0 || !strings.Contains(strings.Join(upper.Problem, ";"), "checkpoint 600 is ahead of its rows") {
				t.Errorf("upper stream: %+v", upper)
			}
			if r.Staging.Problems() != 0 {
				t.Errorf("staging reported problems: %+v", r.Staging)
			}
			// Text output names them too.
			cfg := verifyCmd(stg, dsn)
			cfg.JSON = false
			var out bytes.Buffer
			_, _ = Run(context.Background(), cfg, &out, quiet)
			for _, want := range []string{"postgresql 301: parent hash 00", "checkpoint 600 is ahead of its rows", "differs from staging: 1 height"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("text report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestVerifyPostgreSQLNamesUnreadableStagedHeaders: an exported height
// whose staged header (its .sst damaged) or record (its .blob damaged)
// cannot be read is a problem named with its height, exit 4 (a header
// counted as matching staging before), and its chunk's rows are reported
// as not compared, not as equal.
func TestVerifyPostgreSQLNamesUnreadableStagedHeaders(t *testing.T) {
	for _, tc := range []struct{ ext, want string }{{"sst", "staged header cannot be read"}, {"blob", "staged record cannot be read"}} {
		t.Run(tc.ext, func(t *testing.T) {
			const to = 600
			stg := archiveFixture(t, "cometbft", to)
			dsn := exportInto(t, "cometbft", stg, to)
			damageLargest(t, stg, tc.ext)
			r, err := runVerify(t, verifyCmd(stg, dsn))
			if ExitCode(err) != ExitData || r.PG == nil {
				t.Fatalf("exit %d (%v), %+v", ExitCode(err), err, r.PG)
			}
			if r.PG.UnreadableCount == 0 || len(r.PG.Unreadable) == 0 || !strings.Contains(r.PG.Unreadable[0].Reason, tc.want) ||
				r.PG.Unreadable[0].Height == 0 || r.PG.Unreadable[0].Height > to {
				t.Fatalf("unreadable %d: %+v", r.PG.UnreadableCount, r.PG.Unreadable)
			}
			if r.PG.Problems() < r.PG.UnreadableCount {
				t.Errorf("problems %d < unreadable %d", r.PG.Problems(), r.PG.UnreadableCount)
			}
			// One chunk holds all 600 heights: no table's rows compared.
			if len(r.PG.Uncompared) == 0 {
				t.Errorf("the damaged chunk is not reported as not compared: %+v", r.PG)
			}
			for _, tc := range r.PG.Tables {
				if tc.Compared {
					t.Errorf("%s compared over a chunk with an unreadable height: %+v", tc.Table, tc)
				}
			}
		})
	}
}

// damageLargest inverts 64 bytes in the middle of the largest .ext file of
// dir.
func damageLargest(t *testing.T, dir, ext string) {
	t.Helper()
	largest := storetest.Largest(t, dir, ext)
	storetest.Garble(t, largest, storetest.Size(t, largest)/2, 64)
}

// TestVerifyPostgreSQLComparesEveryTableWithStaging: verify --pg compares
// every table's rows with what the staged blocks decode to. Clean, every
// table is compared and equal; with a child-table row deleted and a
// transaction cell changed (the blocks untouched) it names both tables and
// the heights (it said "clean" before); with exported heights no longer
// staged it says which chunks it could not compare, not that they are
// equal.
func TestVerifyPostgreSQLComparesEveryTableWithStaging(t *testing.T) {
	for _, chainName := range family.Names() {
		t.Run(chainName, func(t *testing.T) {
			const to = 600
			stg := archiveFixture(t, chainName, to)
			dsn := exportInto(t, chainName, stg, to)
			cfg := verifyCmd(stg, dsn)
			cfg.Chunk = 100
			r, err := runVerify(t, cfg)
			if err != nil || r.PG == nil || !r.PG.Complete {
				t.Fatalf("clean: %v %+v", err, r.PG)
			}
			fam, _ := family.Lookup(chainName)
			var want []string
			for _, tb := range fam.Tables() {
				want = append(want, tb.Name)
			}
			if len(r.PG.Tables) != len(want) {
				t.Fatalf("tables compared: %+v", r.PG.Tables)
			}
			for i, tc := range r.PG.Tables {
				if tc.Table != want[i] || !tc.Compared || tc.DiffersCount != 0 || tc.Chunks != 7 {
					t.Errorf("clean %s: %+v", want[i], tc)
				}
			}
			if r.PG.Tables[1].Rows == 0 || r.PG.Tables[2].Rows == 0 {
				t.Errorf("no rows compared: %+v", r.PG.Tables)
			}
			// The child table is the third (events, logs); every family's
			// transactions have a gas_used.
			child, hc := [2]string{want[2], fam.Tables()[2].HeightColumn}, fam.Tables()[1].HeightColumn
			txHeight := uint64(queryInt(t, dsn, fmt.Sprintf("SELECT min(%[1]s) FROM %[2]s.transactions WHERE %[1]s >= 420", hc, chainName)))
			execSQL(t, dsn,
				fmt.Sprintf("DELETE FROM %[1]s.%[2]s WHERE ctid = (SELECT ctid FROM %[1]s.%[2]s WHERE %[3]s = 250 LIMIT 1)", chainName, child[0], child[1]),
				fmt.Sprintf("UPDATE %[1]s.transactions SET gas_used = gas_used + 1 WHERE ctid = (SELECT ctid FROM %[1]s.transactions WHERE %[2]s = %[3]d LIMIT 1)", chainName, hc, txHeight),
			)
			r, err = runVerify(t, cfg)
			if ExitCode(err) != ExitData {
				t.Fatalf("damaged: exit %d (%v)", ExitCode(err), err)
			}
			for _, tc := range r.PG.Tables {
				switch tc.Table {
				case child[0]:
					if tc.DiffersCount != 1 || tc.Differs[0].From != 200 || tc.Differs[0].To != 299 || tc.Differs[0].StagedRows != tc.Differs[0].PGRows+1 ||
						tc.Differs[0].HeightCount != 1 || tc.Differs[0].Heights[0].Height != 250 {
						t.Errorf("%s: %+v", tc.Table, tc)
					}
				case "transactions":
					if tc.DiffersCount != 1 || tc.Differs[0].From != 400 || tc.Differs[0].StagedRows != tc.Differs[0].PGRows ||
						tc.Differs[0].HeightCount != 1 || tc.Differs[0].Heights[0].Height != txHeight {
						t.Errorf("transactions: %+v", tc)
					}
				default:
					if !tc.Compared || tc.DiffersCount != 0 {
						t.Errorf("%s: %+v", tc.Table, tc)
					}
				}
			}
			if r.PG.Problems() != 2 || r.PG.BreakCount != 0 || r.PG.DiffersCount != 0 {
				t.Errorf("problems %d: %+v", r.PG.Problems(), r.PG)
			}
			// Heights 1-99 pruned from staging: their chunk is not
			// compared, and the report says so; the others still are.
			prune := DefaultConfig()
			prune.Command, prune.Staging, prune.Below, prune.BelowSet, prune.Force = CmdPrune, stg, 100, true, true
			prune.EnsureDefaults()
			if _, err := Run(context.Background(), prune, &bytes.Buffer{}, quiet); err != nil {
				t.Fatal(err)
			}
			r, _ = runVerify(t, cfg)
			if len(r.PG.Uncompared) != 1 || r.PG.Uncompared[0].From != 1 || r.PG.Uncompared[0].To != 99 || !strings.Contains(r.PG.Uncompared[0].Reason, "not staged") {
				t.Errorf("pruned: uncompared %+v", r.PG.Uncompared)
			}
			if r.PG.Complete {
				t.Errorf("pruned: complete")
			}
			for _, tc := range r.PG.Tables {
				if tc.Compared && tc.Chunks != 6 {
					t.Errorf("pruned: %s compared %d chunks, want 6", tc.Table, tc.Chunks)
				}
			}
			// The text report says what was and was not compared.
			cfg.JSON = false
			var out bytes.Buffer
			_, _ = Run(context.Background(), cfg, &out, quiet)
			for _, want := range []string{"rows against staging, in chunks of 100 heights", "DIFFERS in 1 chunk of 6", "heights 200-299: ", " 250 (", "heights 1-99 not compared in any table: exported heights 1-99 are not staged", "equal: "} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("text report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestVerifyPostgreSQLRowsOfRecordedNodes: the rows a real CometBFT node's
// blocks export (a bare 0.38 node and an SDK chain with its events) are
// found equal to what staging decodes to, every table compared: the
// digest computed in Go agrees with PostgreSQL's on real data, not only on
// the synthetic chains; one jsonb attribute changed is found at its height.
func TestVerifyPostgreSQLRowsOfRecordedNodes(t *testing.T) {
	for _, folder := range []string{"node-0.38", "node-0.38-sdk"} {
		t.Run(folder, func(t *testing.T) {
			node := rpctest.NewServer(rpctest.Config{Handler: newCometReplay(t, folder).handle})
			defer node.Close()
			cfg := rpcRunConfig(t, node.URL)
			cfg.To = 37
			if sum, err := Run(context.Background(), cfg, io.Discard, quiet); err != nil || !sum.Complete {
				t.Fatalf("run: complete=%v err=%v", sum.Complete, err)
			}
			vcfg := verifyCmd(cfg.Staging, cfg.PG)
			r, err := runVerify(t, vcfg)
			if err != nil || r.PG == nil || !r.PG.Complete || r.PG.Problems() != 0 {
				t.Fatalf("recorded chain: %v %+v", err, r.PG)
			}
			var events int64
			for _, tc := range r.PG.Tables {
				if tc.Table == "events" {
					events = tc.Rows
				}
			}
			if r.PG.Tables[0].Rows != 37 || events == 0 {
				t.Fatalf("compared %+v", r.PG.Tables)
			}
			h := queryInt(t, cfg.PG, "SELECT max(height) FROM cometbft.events")
			execSQL(t, cfg.PG, fmt.Sprintf(`UPDATE cometbft.events SET attributes = attributes || '[["x","y"]]'::jsonb WHERE ctid = (SELECT ctid FROM cometbft.events WHERE height = %d LIMIT 1)`, h))
			r, err = runVerify(t, vcfg)
			if ExitCode(err) != ExitData || r.PG.Problems() != 1 {
				t.Fatalf("changed attribute: exit %d, %+v", ExitCode(err), r.PG)
			}
			for _, tc := range r.PG.Tables {
				if tc.Table == "events" && (tc.DiffersCount != 1 || tc.Differs[0].HeightCount != 1 || tc.Differs[0].Heights[0].Height != uint64(h)) {
					t.Errorf("events: %+v", tc)
				}
			}
		})
	}
}

// TestPruneRefusesWhileATargetLags: a database that has exported 1-300 of
// a store holding 1-600 stops a prune below 500, naming it and its
// checkpoint, and nothing is deleted; once 301-600 are exported too the
// prune deletes exactly the heights below 500; --force prunes past a
// lagging target.
func TestPruneRefusesWhileATargetLags(t *testing.T) {
	stg := archiveFixture(t, "cometbft", 600)
	dsn := pgtest.NewDatabase(t)
	if _, err := Run(context.Background(), synthConfig(CmdExport, "cometbft", dsn, stg, 1, 300), &bytes.Buffer{}, quiet); err != nil {
		t.Fatal(err)
	}
	prune := func(below uint64, force bool) (string, error) { return runPrune(stg, below, force, false) }
	staged := func() []staging.Range { return stagedIn(t, stg) }
	out, err := prune(500, false)
	var refused *archive.PruneRefusedError
	if !errorsAs(err, &refused) || ExitCode(err) != ExitConfig {
		t.Fatalf("lagging target: exit %d, %v\n%s", ExitCode(err), err, out)
	}
	if refused.Missing != (archive.Gap{From: 301, To: 499}) || !strings.Contains(err.Error(), "backfill/range-1-300 1-300") || !strings.Contains(err.Error(), "/cometbft") {
		t.Fatalf("refusal does not name the target, its checkpoint and the heights: %v", err)
	}
	if rs := staged(); len(rs) != 1 || rs[0] != (staging.Range{From: 1, To: 600}) {
		t.Fatalf("a refused prune deleted something: %v", rs)
	}
	if _, err := Run(context.Background(), synthConfig(CmdExport, "cometbft", dsn, stg, 301, 600), &bytes.Buffer{}, quiet); err != nil {
		t.Fatal(err)
	}
	before := filesSize(t, stg)
	if out, err := prune(500, false); err != nil {
		t.Fatalf("every target has exported below 500: %v\n%s", err, out)
	}
	if rs := staged(); len(rs) != 1 || rs[0] != (staging.Range{From: 500, To: 600}) {
		t.Fatalf("after prune below 500: %v", rs)
	}
	// 499 of 600 heights deleted: the space comes back, not only the keys.
	if after := filesSize(t, stg); after > before/2 {
		t.Errorf("prune below 500 left %.0f of %.0f bytes of files", after, before)
	}
	// What is left still verifies and still exports.
	if _, err := runVerify(t, verifyCmd(stg, "")); err != nil {
		t.Fatalf("verify after prune: %v", err)
	}
	// A second database that has exported nothing beyond 550 lags: --force
	// prunes regardless.
	other := pgtest.NewDatabase(t)
	if _, err := Run(context.Background(), synthConfig(CmdExport, "cometbft", other, stg, 500, 550), &bytes.Buffer{}, quiet); err != nil {
		t.Fatal(err)
	}
	if _, err := prune(580, false); !errorsAs(err, &refused) || refused.Missing != (archive.Gap{From: 551, To: 579}) {
		t.Fatalf("second target lags: %v", err)
	}
	if out, err := prune(580, true); err != nil || !strings.Contains(out, "pruned (forced)") {
		t.Fatalf("--force: %v\n%s", err, out)
	}
	if rs := staged(); len(rs) != 1 || rs[0].From != 580 {
		t.Fatalf("after forced prune below 580: %v", rs)
	}
}

// TestStatusShowsTheStoresFamilyAndTrueSize: an EVM store's status with
// --pg (no --chain, no --schema) reads the evm schema, and prints the size
// of every file of the directory.
func TestStatusShowsTheStoresFamilyAndTrueSize(t *testing.T) {
	stg := archiveFixture(t, "evm", 200)
	dsn := exportInto(t, "evm", stg, 200)
	cfg := DefaultConfig()
	cfg.Command, cfg.Staging, cfg.PG = CmdStatus, stg, dsn
	var out bytes.Buffer
	if _, err := Run(context.Background(), cfg, &out, quiet); err != nil {
		t.Fatal(err)
	}
	size, err := staging.DirUsage(stg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"postgresql schema evm", "backfill range-1-200", fmt.Sprintf("(%.1f MB on disk", float64(size.Allocated)/1e6)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// TestEstimateWithinTwiceTheRealFigures estimates 2001-4000 beside a store
// and database holding 1-2000 (measured bytes per block), then runs it and
// compares; a range that cannot fit exits 2.
func TestEstimateWithinTwiceTheRealFigures(t *testing.T) {
	stg := archiveFixture(t, "cometbft", 2000)
	dsn := exportInto(t, "cometbft", stg, 2000)
	cfg := DefaultConfig()
	cfg.Command, cfg.Staging, cfg.PG, cfg.JSON = CmdEstimate, stg, dsn, true
	cfg.From, cfg.FromSet, cfg.To, cfg.ToSet = 2001, true, 4000, true
	var out bytes.Buffer
	if _, err := Run(context.Background(), cfg, &out, quiet); err != nil {
		t.Fatal(err)
	}
	var est archive.EstimateReport
	if err := json.Unmarshal(out.Bytes(), &est); err != nil {
		t.Fatal(err)
	}
	if est.ToFetch != 2000 || est.ToExport != 2000 || est.StagingSource != "measured" || est.DBSource != "measured" || est.FetchSeconds <= 0 || est.ExportSeconds <= 0 {
		t.Fatalf("estimate: %+v", est)
	}
	dbSize := func() float64 {
		conn := pgtest.ConnectTo(t, dsn)
		defer conn.Close(context.Background())
		var n int64
		if err := conn.QueryRow(context.Background(), "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'cometbft' AND c.relkind = 'r' AND c.relname IN ('blocks', 'transactions', 'events')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return float64(n)
	}
	s0 := filesSize(t, stg)
	d0 := dbSize()
	run := synthConfig(CmdRun, "cometbft", dsn, stg, 2001, 4000)
	run.SyntheticTip = 5000
	if _, err := Run(context.Background(), run, &bytes.Buffer{}, quiet); err != nil {
		t.Fatal(err)
	}
	s1 := filesSize(t, stg)
	d1 := dbSize()
	within := func(what string, est, real float64) {
		if real <= 0 || est/real > 2 || real/est > 2 {
			t.Errorf("%s: estimated %.0f bytes, real %.0f", what, est, real)
		}
	}
	within("staging", est.StagingBytes, float64(s1-s0))
	within("database", est.DBBytes, d1-d0)

	cfg.To, cfg.JSON = 1<<50, false
	if _, err := Run(context.Background(), cfg, &bytes.Buffer{}, quiet); ExitCode(err) != ExitConfig {
		t.Fatalf("a range that cannot fit: exit %d (%v)", ExitCode(err), err)
	}
}

// TestEstimateOfAMainnetRangeInHumanUnits estimates 20 million EVM heights
// from a directory that is not a checkout: sizes in units a person reads
// ("~1.8 TB staged", never "1840000.0 MB") and the times from the
// benchmark result built into the binary, not "no benchmark result" (it
// was looked for under the working directory).
func TestEstimateOfAMainnetRangeInHumanUnits(t *testing.T) {
	t.Chdir(t.TempDir())
	cfg := DefaultConfig()
	cfg.Command, cfg.Chain, cfg.Staging = CmdEstimate, "evm", filepath.Join(t.TempDir(), "s")
	cfg.From, cfg.FromSet, cfg.To, cfg.ToSet = 1, true, 20_000_000, true
	var out bytes.Buffer
	_, err := Run(context.Background(), cfg, &out, quiet)
	if err != nil && ExitCode(err) != ExitConfig { // no room for 1.8 TB here is exit 2, after the report
		t.Fatal(err)
	}
	text := out.String()
	if want := "20000000 heights, ~1.8 TB staged (92.0 kB/block, default)"; !strings.Contains(text, want) {
		t.Errorf("the report lacks %q:\n%s", want, text)
	}
	if want := "~2.7 TB in PostgreSQL (135.0 kB/block, default)"; !strings.Contains(text, want) {
		t.Errorf("the report lacks %q:\n%s", want, text)
	}
	if big := regexp.MustCompile(`[0-9]{4,}(\.[0-9])? [kMGT]?B\b`).FindString(text); big != "" {
		t.Errorf("a size of more than 999 of its unit: %q in\n%s", big, text)
	}
	want := archive.BenchTimeRates(archive.MeasuredRates, benchResultName, "evm", family.EVM.Rates)
	if !strings.Contains(text, "  times:   "+want.Source+"\n") || strings.Contains(text, "no benchmark result") || !strings.Contains(text, "embedded in this binary") {
		t.Errorf("times not from the embedded benchmark result (%s):\n%s", want.Source, text)
	}
	if want := fmt.Sprintf("at %.0f blocks/s", want.ExportBlocksPerSec); !strings.Contains(text, want) {
		t.Errorf("the report lacks the embedded export rate %q:\n%s", want, text)
	}
}

// filesSize is the sum of the sizes of the files under dir.
func filesSize(t *testing.T, dir string) float64 {
	t.Helper()
	u, err := staging.DirUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return float64(u.Bytes)
}

// TestSnapshotAndRestoreCommands: snapshot makes its destination directory,
// plain or file://; restore from a source that is not there is refused
// naming SRC, and makes nothing there; a restore from the file:// snapshot
// verifies and holds every staged height.
func TestSnapshotAndRestoreCommands(t *testing.T) {
	stg := archiveFixture(t, "evm", 120)
	base := t.TempDir()
	dest := "file://" + filepath.ToSlash(filepath.Join(base, "snaps", "evm"))
	cmd := func(command, staging string, args ...string) (string, error) {
		cfg := DefaultConfig()
		cfg.Command, cfg.Staging, cfg.Args = command, staging, args
		var out bytes.Buffer
		_, err := Run(context.Background(), cfg, &out, quiet)
		return out.String(), err
	}
	if out, err := cmd(CmdSnapshot, stg, dest); err != nil || !strings.Contains(out, "heights staged 1-120, in") {
		t.Fatalf("snapshot to %s, a directory not there yet: %v\n%s", dest, err, out)
	}
	missing := filepath.Join(base, "no-such-snapshot")
	_, err := cmd(CmdRestore, filepath.Join(base, "r1"), missing)
	if ExitCode(err) != ExitConfig || !strings.HasPrefix(strings.TrimPrefix(err.Error(), "invalid configuration:\n  "), "SRC: "+missing) {
		t.Errorf("restore from a missing directory: exit %d, %v", ExitCode(err), err)
	}
	if _, serr := os.Stat(missing); serr == nil {
		t.Errorf("restore made its missing source %s", missing)
	}
	restored := filepath.Join(base, "r2")
	if out, err := cmd(CmdRestore, restored, dest); err != nil {
		t.Fatalf("restore from %s: %v\n%s", dest, err, out)
	}
	// Into a directory that holds a store already: refused, exit 2.
	var notEmpty *archive.NotEmptyError
	if _, err := cmd(CmdRestore, stg, dest); ExitCode(err) != ExitConfig || !errorsAs(err, &notEmpty) {
		t.Errorf("restore over a store: exit %d, %v", ExitCode(err), err)
	}
	s := stagingtest.Open(t, restored, staging.Options{ReadOnly: true})
	defer s.Close()
	if rs, err := s.Staged(0, 1<<40); err != nil || len(rs) != 1 || rs[0] != (staging.Range{From: 1, To: 120}) {
		t.Fatalf("restored store holds %v (%v), want 1-120", rs, err)
	}
}

// TestSnapshotIntoAForeignDirectoryIsRefused: a DEST holding a file no
// snapshot writes is refused, exit 2, naming DEST and the file (before,
// snapshot mixed its files in); a second snapshot over the first says it
// replaced it.
func TestSnapshotIntoAForeignDirectoryIsRefused(t *testing.T) {
	stg := archiveFixture(t, "cometbft", 50)
	base := t.TempDir()
	cmd := func(dest string) (string, error) {
		cfg := DefaultConfig()
		cfg.Command, cfg.Staging, cfg.Args = CmdSnapshot, stg, []string{dest}
		var out bytes.Buffer
		_, err := Run(context.Background(), cfg, &out, quiet)
		return out.String(), err
	}
	if err := os.WriteFile(filepath.Join(base, "report.pdf"), []byte("%PDF"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := cmd(base)
	if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "DEST: "+base) || !strings.Contains(err.Error(), "report.pdf") {
		t.Fatalf("snapshot into a directory holding report.pdf: exit %d, %v", ExitCode(err), err)
	}
	if ents, _ := os.ReadDir(base); len(ents) != 1 {
		t.Errorf("a refused snapshot wrote into %s: %d entries", base, len(ents))
	}
	dest := filepath.Join(base, "snap")
	for i, want := range []string{"snapshot of ", "replaced the earlier snapshot: "} {
		if out, err := cmd(dest); err != nil || !strings.Contains(out, want) {
			t.Fatalf("snapshot %d to %s: %v\n%s", i+1, dest, err, out)
		}
	}
}

// TestChecksumOfAWrongSchemaIsAConfigurationError: a database that holds
// no export of the family (a wrong --pg, --schema or --chain) is refused
// with exit 2, naming the table it lacks, not reported as a failure.
func TestChecksumOfAWrongSchemaIsAConfigurationError(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg := checksumCmd("evm", dsn, "", 500)
	cfg.JSON = false
	_, err := Run(context.Background(), cfg, &bytes.Buffer{}, quiet)
	var missing *archive.MissingTableError
	if ExitCode(err) != ExitConfig || !errorsAs(err, &missing) || missing.Schema != "evm" || !strings.Contains(err.Error(), `"evm"."blocks" does not exist`) {
		t.Fatalf("checksum of an empty database: exit %d, %v", ExitCode(err), err)
	}
	// --schema alt with --against a database that holds the default
	// schema: the fix is --against-schema, and the error says so.
	stg := archiveFixture(t, "evm", 20)
	alt := synthConfig(CmdExport, "evm", dsn, stg, 1, 20)
	alt.Schema = "alt"
	mustRunCfg(t, alt)
	other := exportInto(t, "evm", stg, 20)
	cfg = checksumCmd("evm", dsn, other, 500)
	cfg.Schema, cfg.JSON = "alt", false
	_, err = Run(context.Background(), cfg, &bytes.Buffer{}, quiet)
	if ExitCode(err) != ExitConfig || !errorsAs(err, &missing) || !strings.Contains(err.Error(), "--against: ") ||
		!strings.Contains(err.Error(), "name its own with --against-schema") {
		t.Fatalf("checksum --schema alt --against a database of schema evm: exit %d, %v", ExitCode(err), err)
	}
	cfg.AgainstSchema = "evm"
	if _, err := Run(context.Background(), cfg, &bytes.Buffer{}, quiet); err != nil {
		t.Fatalf("with --against-schema evm: %v", err)
	}
}

// TestExportTakesTheStoresFamily: export of an EVM store without --chain
// takes the store's family (and its schema) instead of refusing the
// default, cometbft; with --chain cometbft given, it still refuses, exit 4,
// before any schema is made.
func TestExportTakesTheStoresFamily(t *testing.T) {
	stg := archiveFixture(t, "evm", 50)
	dsn := pgtest.NewDatabase(t)
	cfg := testConfig(CmdExport, dsn, stg, nil, 1, 50)
	cfg.Chain, cfg.Schema, cfg.ChainSet, cfg.FromSet = "cometbft", "", false, true // --from 1 --to 50
	sum, err := Run(context.Background(), cfg, &bytes.Buffer{}, quiet)
	if err != nil || !sum.Complete || sum.Export.Blocks != 50 {
		t.Fatalf("export of an EVM store without --chain: %v (complete %v, %d blocks)", err, sum.Complete, sum.Export.Blocks)
	}
	if n := countRows(t, dsn, "evm.blocks"); n != 50 {
		t.Fatalf("evm.blocks holds %d rows, want 50", n)
	}
	// Without --from either, the range starts at the family's first block:
	// the EVM genesis, 0, not CometBFT's 1.
	gen := filepath.Join(t.TempDir(), "g")
	if _, err := Run(context.Background(), synthConfig(CmdFetch, "evm", "", gen, 0, 20), &bytes.Buffer{}, quiet); err != nil {
		t.Fatal(err)
	}
	cfg = testConfig(CmdExport, pgtest.NewDatabase(t), gen, nil, 1, 20)
	cfg.Chain, cfg.Schema, cfg.ChainSet, cfg.FromSet = "cometbft", "", false, false
	if sum, err := Run(context.Background(), cfg, &bytes.Buffer{}, quiet); err != nil || sum.Export.Blocks != 21 {
		t.Fatalf("export of an EVM store without --chain or --from: %v, %d blocks, want 0-20", err, sum.Export.Blocks)
	}
	other := pgtest.NewDatabase(t)
	cfg = testConfig(CmdExport, other, stg, nil, 1, 50)
	cfg.Chain, cfg.Schema, cfg.ChainSet = "cometbft", "", true
	_, err = Run(context.Background(), cfg, &bytes.Buffer{}, quiet)
	var wrong *staging.WrongChainError
	if ExitCode(err) != ExitData || !errorsAs(err, &wrong) {
		t.Fatalf("export of an EVM store with --chain cometbft: exit %d, %v", ExitCode(err), err)
	}
	if n := countRows(t, other, "pg_namespace WHERE nspname = 'cometbft'"); n != 0 {
		t.Errorf("a refused export made the cometbft schema")
	}
}

// countRows is SELECT count(*) FROM from, on dsn.
func countRows(t *testing.T, dsn, from string) int64 {
	t.Helper()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+from).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEstimateProbesTheNode: estimate --rpc fetches from the node for the
// probe's time and plans the fetch at the rate it measured (saying so, with
// the blocks and seconds it rests on), capped by --rps; it counts the
// builds and ANALYZEs a fill into empty tables defers and their time; the
// export rate is said to be assumed. Before, --rpc and --rps had "no
// effect on estimate", the fetch was planned at a local benchmark's rate
// and the index builds were not counted.
func TestEstimateProbesTheNode(t *testing.T) {
	node := newCometReplay(t, "node-0.38")
	srv := rpctest.NewServer(rpctest.Config{Handler: node.handle})
	defer srv.Close()
	prev := estimateProbe
	estimateProbe = 500 * time.Millisecond
	defer func() { estimateProbe = prev }()

	estimate := func(rps float64) archive.EstimateReport {
		t.Helper()
		cfg := DefaultConfig()
		cfg.Command, cfg.Staging, cfg.JSON = CmdEstimate, filepath.Join(t.TempDir(), "s"), true
		cfg.RPC, cfg.RPS, cfg.FetchWorkers, cfg.FetchSpan = []string{srv.URL}, rps, 4, 2
		cfg.RPCTimeout = 5 * time.Second
		cfg.From, cfg.FromSet, cfg.To, cfg.ToSet = 1, true, 20_000, true
		var out bytes.Buffer
		if _, err := Run(context.Background(), cfg, &out, quiet); err != nil {
			t.Fatal(err)
		}
		var est archive.EstimateReport
		if err := json.Unmarshal(out.Bytes(), &est); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return est
	}

	calls := node.blockCalls.Load()
	est := estimate(0)
	if node.blockCalls.Load() == calls {
		t.Fatal("estimate --rpc asked the node for no block")
	}
	var blocks int
	var secs float64
	if _, err := fmt.Sscanf(est.FetchSource, "measured: %d blocks from "+srv.URL+" in %fs", &blocks, &secs); err != nil || !est.FetchMeasured {
		t.Fatalf("fetch rate source %q (measured %v): want the blocks and seconds it was measured on (%v)", est.FetchSource, est.FetchMeasured, err)
	}
	// The rate is the probe's blocks over its seconds (as printed, to 0.1 s).
	if r := float64(blocks) / secs; blocks == 0 || est.Rates.FetchBlocksPerSec/r < 0.75 || est.Rates.FetchBlocksPerSec/r > 1.34 {
		t.Errorf("fetch rate %.0f blocks/s; the probe says %d blocks in %.1fs (%s)", est.Rates.FetchBlocksPerSec, blocks, secs, est.FetchSource)
	}
	if est.FetchSeconds != 20_000/est.Rates.FetchBlocksPerSec {
		t.Errorf("fetch %v s for 20000 heights at %v blocks/s", est.FetchSeconds, est.Rates.FetchBlocksPerSec)
	}
	// CometBFT's default indexes: 7 keys, the --indexes set's indexes, an
	// ANALYZE a table, their time at 0.77 of the fill's.
	want := deferredWork(&Job{Config: Config{Indexes: DefaultConfig().Indexes}}, family.CometBFT.Tables())
	if a := est.AfterFill; a.Builds != want.Builds || a.Analyzes != len(family.CometBFT.Tables()) || a.Builds <= a.Analyzes ||
		a.Seconds != est.ExportSeconds*family.CometBFT.Rates.AfterFillPerFill || a.Seconds <= 0 {
		t.Errorf("after the fill %+v; want %d builds, %d ANALYZEs, %.2f of the fill's %v s", a, want.Builds, len(family.CometBFT.Tables()), family.CometBFT.Rates.AfterFillPerFill, est.ExportSeconds)
	}
	if est.TotalSeconds != est.FetchSeconds+est.ExportSeconds+est.AfterFill.Seconds {
		t.Errorf("total %v s is not fetch + export + after", est.TotalSeconds)
	}

	// --rps 2 on one endpoint, 2 heights a request: at most 4 blocks/s,
	// whatever the limiter's burst let through in the probe.
	est = estimate(2)
	if est.Rates.FetchBlocksPerSec > 4.0001 || !strings.Contains(est.FetchSource, "--rps 2") {
		t.Errorf("--rps 2: fetch rate %v blocks/s (%s), want at most 4", est.Rates.FetchBlocksPerSec, est.FetchSource)
	}
}

// TestEstimateSaysWhatIsAssumed: without --rpc the text says which rates
// are assumed, and the deferred builds are counted.
func TestEstimateSaysWhatIsAssumed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Command, cfg.Staging = CmdEstimate, filepath.Join(t.TempDir(), "s")
	cfg.From, cfg.FromSet, cfg.To, cfg.ToSet = 1, true, 20_000, true
	var out bytes.Buffer
	if _, err := Run(context.Background(), cfg, &out, quiet); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"blocks/s (assumed)\n  export:", "blocks/s (assumed)\n  after:", "deferred key and index builds", "tables analyzed", "  total:   ~"} {
		if !strings.Contains(text, want) {
			t.Errorf("the estimate lacks %q:\n%s", want, text)
		}
	}
	cfg.DeferIndexes = IndexesNever
	out.Reset()
	if _, err := Run(context.Background(), cfg, &out, quiet); err != nil || !strings.Contains(out.String(), "no deferred builds (--defer-indexes never") {
		t.Errorf("--defer-indexes never: %v\n%s", err, out.String())
	}
}
