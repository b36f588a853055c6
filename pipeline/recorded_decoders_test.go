package pipeline

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

const erc20ABI = "erc20=../chain/evm/events/testdata/erc20.json"

// TestChecksAreCleanOnlyOverEveryTable: an EVM schema exported with --abi
// records the ABI; verify --pg and checksum, given no --abi (and verify no
// --chain), decode and digest its event tables with it and are clean, every
// table compared. Without the record (a schema an older blockhaul wrote)
// the event tables are named as not compared and the result is not clean
// (exit 4) — before, both said clean, exit 0, and never named them. verify
// --abi without --chain evm on an EVM store takes the store's family.
func TestChecksAreCleanOnlyOverEveryTable(t *testing.T) {
	ctx := context.Background()
	stg := archiveFixture(t, "evm", 120)
	dsn := pgtest.NewDatabase(t)
	exp := synthConfig(CmdExport, "evm", dsn, stg, 1, 120)
	exp.ABI = []string{erc20ABI}
	mustRunCfg(t, exp)
	eventTables := []string{"erc20_approval", "erc20_transfer", "erc20_undecoded"}
	if n := queryInt(t, dsn, "SELECT count(*) FROM evm.erc20_transfer"); n == 0 {
		t.Fatal("the fixture has no ERC-20 transfers to compare")
	}

	verify := func(abi ...string) (archive.VerifyReport, error) {
		cfg := verifyCmd(stg, dsn) // no --chain: the store's family
		cfg.ABI = abi
		return runVerify(t, cfg)
	}
	checksum := func() (archive.ChecksumReport, error) {
		return runReport[archive.ChecksumReport](t, checksumCmd("evm", dsn, "", 500))
	}
	compared := func(r archive.VerifyReport) []string {
		var out []string
		for _, tc := range r.PG.Tables {
			if tc.Compared {
				out = append(out, tc.Table)
			}
		}
		return out
	}

	// The schema records the ABI: clean, the event tables compared.
	r, err := verify()
	if err != nil || !r.PG.Complete || len(r.PG.TablesNotCompared) != 0 || !slices.Equal(r.Decoders, []string{"--abi erc20"}) {
		t.Fatalf("verify of a schema recording its ABI: %v, %+v", err, r.PG)
	}
	for _, name := range eventTables {
		if !slices.Contains(compared(r), name) {
			t.Errorf("verify did not compare %s: %v", name, compared(r))
		}
	}
	c, err := checksum()
	if err != nil || len(c.A.NotCompared) != 0 || len(c.A.Tables) != 7 {
		t.Fatalf("checksum of a schema recording its ABI: %v, %d tables digested, not compared %v", err, len(c.A.Tables), c.A.NotCompared)
	}

	// Without the record: every event table named, not clean, exit 4.
	conn := pgtest.ConnectTo(t, dsn)
	if _, err := conn.Exec(ctx, "DROP TABLE evm.blockhaul_decoders"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	r, err = verify()
	var incomplete *archive.IncompleteError
	if !errorsAs(err, &incomplete) || ExitCode(err) != ExitData || !slices.Equal(r.PG.TablesNotCompared, eventTables) {
		t.Fatalf("verify without the record: exit %d, %v, not compared %v", ExitCode(err), err, r.PG.TablesNotCompared)
	}
	cfg := verifyCmd(stg, dsn)
	cfg.JSON = false
	var out bytes.Buffer
	_, err = Run(ctx, cfg, &out, quiet)
	if ExitCode(err) != ExitData || strings.Contains(out.String(), "result: clean") ||
		!strings.Contains(out.String(), "erc20_transfer   NOT COMPARED: no decoder") ||
		!strings.Contains(out.String(), "not clean: 3 tables of the schema not compared: erc20_approval, erc20_transfer, erc20_undecoded") {
		t.Fatalf("verify text without the record: exit %d\n%s", ExitCode(err), out.String())
	}
	c, err = checksum()
	if !errorsAs(err, &incomplete) || ExitCode(err) != ExitData || !slices.Equal(c.A.NotCompared, eventTables) {
		t.Fatalf("checksum without the record: exit %d, %v, not compared %v", ExitCode(err), err, c.A.NotCompared)
	}

	// Told the ABI, without --chain evm: the store's family takes it.
	r, err = verify(erc20ABI)
	if err != nil || !r.PG.Complete || len(r.PG.TablesNotCompared) != 0 || len(r.Decoders) != 0 {
		t.Fatalf("verify --abi without --chain: exit %d, %v", ExitCode(err), err)
	}
}
