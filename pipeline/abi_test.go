package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/rpctest"
)

// The geth --dev chain's contract (chain/evm/testdata/geth-dev) and an ABI
// of its events: the ERC-20 Transfer its LOG3 logs carry, and an anonymous
// event its LOG0 logs decode as.
const (
	gethContract = "0x3a220f351252089d385b29beca14e27f204c296a"
	gethABI      = "g=../chain/evm/events/testdata/geth_ping.json@" + gethContract
)

// eventTableDigest is an order-independent summary of a table's rows: its count
// and the md5 of every row's text in key order.
func eventTableDigest(t *testing.T, dsn, table string) string {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	var n int64
	var sum *string
	if err := conn.QueryRow(ctx, `SELECT count(*), md5(string_agg(t::text, ';' ORDER BY block_number, log_index)) FROM evm.`+table+` t`).Scan(&n, &sum); err != nil {
		t.Fatalf("%s: %v", table, err)
	}
	s := "nil"
	if sum != nil {
		s = *sum
	}
	return fmt.Sprintf("%s %d %s", table, n, s)
}

// TestABITablesExportAndReplay: the real geth chain exported with --abi
// fills one table per event (6 Transfers; the Transfer log whose data is
// one byte a row of g_undecoded, with its reason; 4 anonymous Raw logs);
// the same chain exported without it and then given the ABI with
// export --replay fills the same rows from staging without touching the
// other tables or the checkpoint; and the ABI changed under the tables
// (another address) is refused, naming the table, with nothing written.
func TestABITablesExportAndReplay(t *testing.T) {
	ctx := context.Background()
	geth := newGethReplay(t)
	srv := rpctest.NewServer(rpctest.Config{Handler: geth.handle})
	defer srv.Close()
	evmRun := func(dsn, stg string) Config {
		cfg := testConfig(CmdRun, dsn, stg, nil, 0, geth.tip)
		cfg.Chain, cfg.Schema, cfg.FromSet, cfg.RPC = "evm", "", true, []string{srv.URL}
		return cfg
	}

	withABI := pgtest.NewDatabase(t)
	cfg := evmRun(withABI, filepath.Join(t.TempDir(), "a"))
	cfg.ABI = []string{gethABI}
	sum, err := Run(ctx, cfg, io.Discard, quiet)
	if err != nil || !sum.Complete {
		t.Fatalf("run --abi: %v complete=%v", err, sum.Complete)
	}
	for table, want := range map[string]uint64{"g_transfer": 6, "g_undecoded": 1, "g_raw": 4} {
		if got := sum.Export.Rows[table]; got != want {
			t.Errorf("summary: %s %d rows, want %d", table, got, want)
		}
	}
	if n := queryInt(t, withABI, `SELECT count(*) FROM evm.g_undecoded WHERE block_number = 13 AND log_index = 3
AND event_table = 'g_transfer' AND reason LIKE 'data (1 bytes) does not decode%'`); n != 1 {
		t.Fatalf("undecoded row of 13/3: %d", n)
	}
	// The first Transfer's value: the word 0x03 00…00 03 (its 33rd data
	// byte is not read), as PostgreSQL computes it from the log's data.
	if n := queryInt(t, withABI, `SELECT count(*) FROM evm.g_transfer e JOIN evm.logs l USING (block_number, log_index)
WHERE e.value = 3 * 2::numeric ^ 248 + 3 AND e."from" = substr(l.topic1, 13) AND e."to" = substr(l.topic2, 13)
AND e.address = l.address AND e.transaction_hash = l.transaction_hash AND e.block_time = l.block_time
AND e.block_number = 6`); n != 1 {
		t.Fatalf("the Transfer at 6 does not match its log: %d", n)
	}

	// docs/evm-events.md's query of a Transfer table runs as written
	// (here on g_, the test ABI's name), its from and to quoted; bare, the
	// same query is a syntax error, which is why the page says to quote.
	doc, err := os.ReadFile("../docs/evm-events.md")
	if err != nil {
		t.Fatal(err)
	}
	var docQuery string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, `SELECT block_number, "from", "to"`) {
			docQuery = strings.ReplaceAll(strings.TrimSuffix(l, ";"), "evm.erc20_", "evm.g_")
		}
	}
	if docQuery == "" {
		t.Fatal(`docs/evm-events.md has no query of "from" and "to"`)
	}
	if n := queryInt(t, withABI, "SELECT count(*) FROM ("+docQuery+") q"); n != 6 {
		t.Errorf("docs/evm-events.md's query gave %d rows, want the 6 Transfers", n)
	}
	{
		conn := pgtest.ConnectTo(t, withABI)
		_, err := conn.Exec(ctx, strings.NewReplacer(`"from"`, "from", `"to"`, "to").Replace(docQuery))
		conn.Close(ctx)
		if err == nil || !strings.Contains(err.Error(), "syntax error") {
			t.Errorf("the query with from and to bare: %v, want a syntax error", err)
		}
	}

	// Exported without the ABI, then replayed with it.
	plain := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "p")
	mustRunCfg(t, evmRun(plain, stg))
	logsBefore := eventTableDigest(t, plain, "logs")
	streams := func() string {
		conn := pgtest.ConnectTo(t, plain)
		defer conn.Close(ctx)
		return strings.Join(pgtest.Strings(t, conn, `SELECT t::text FROM evm.blockhaul_checkpoints t UNION ALL SELECT t::text FROM evm.blockhaul_backfills t ORDER BY 1`), "\n")
	}
	streamsBefore := streams()
	replay := testConfig(CmdExport, plain, stg, nil, 0, 0)
	replay.Chain, replay.Schema = "evm", ""
	replay.ABI = []string{gethABI}
	replay.Replay = []string{"g_transfer", "g_undecoded", "g_raw"}
	sum, err = Run(ctx, replay, io.Discard, quiet)
	if err != nil || !sum.Complete {
		t.Fatalf("export --replay: %v complete=%v", err, sum.Complete)
	}
	for _, table := range []string{"g_transfer", "g_undecoded", "g_raw"} {
		if got, want := eventTableDigest(t, plain, table), eventTableDigest(t, withABI, table); got != want {
			t.Errorf("replayed %s\n%s\nwant %s", table, got, want)
		}
	}
	if got := eventTableDigest(t, plain, "logs"); got != logsBefore {
		t.Errorf("the replay changed logs: %s, was %s", got, logsBefore)
	}
	if got := streams(); got != streamsBefore || got == "" {
		t.Errorf("the replay moved the streams' rows:\n%s\nwas\n%s", got, streamsBefore)
	}

	// The same names read from another contract as well: refused, exit 2,
	// the tables as they were.
	changed := replay
	changed.ABI = []string{gethABI + ",0x0000000000000000000000000000000000000001"}
	changed.Replay = []string{"g_transfer"}
	_, err = Run(ctx, changed, io.Discard, quiet)
	var se *export.ShapeError
	if !errors.As(err, &se) || ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "made from another definition") ||
		!strings.Contains(err.Error(), "--replay g_transfer") {
		t.Fatalf("changed ABI: %v (exit %d), want a ShapeError naming the definition, exit 2", err, ExitCode(err))
	}
	if got, want := eventTableDigest(t, plain, "g_transfer"), eventTableDigest(t, withABI, "g_transfer"); got != want {
		t.Errorf("the refused replay changed g_transfer: %s", got)
	}
}

// TestABIConfig: --abi is read in Validate and refused by name: a file
// that is not there, and a family without EVM logs.
func TestABIConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Command, cfg.Chain, cfg.Schema, cfg.PG = CmdExport, "evm", "evm", "postgres://x@127.0.0.1/x"
	cfg.ABI = []string{"x=/nonexistent/abi.json"}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "--abi") || !strings.Contains(err.Error(), "/nonexistent/abi.json") {
		t.Fatalf("missing file: %v", err)
	}
	// A type go-ethereum parses but the ABI does not have: refused (exit
	// 2), naming the event and the type, before any table is made.
	u999 := filepath.Join(t.TempDir(), "u999.json")
	if err := os.WriteFile(u999, []byte(`[{"type":"event","name":"X","inputs":[{"name":"v","type":"uint999"}]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.ABI = []string{"erc20=" + u999}
	if err := cfg.Validate(); ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "--abi") || !strings.Contains(err.Error(), "event X(uint999) argument v: type uint999 is not an ABI type") {
		t.Fatalf("uint999: exit %d, %v", ExitCode(err), err)
	}
	cfg.Chain = "cometbft"
	cfg.ABI = []string{gethABI}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--abi is for --chain evm") {
		t.Fatalf("cometbft: %v", err)
	}
	cfg.Chain = "evm"
	cfg.Tables = "blocks,g_transfer"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("--tables with an ABI table: %v", err)
	}
}
