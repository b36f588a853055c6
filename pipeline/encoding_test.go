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

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// recordSource serves fixed raw CometBFT records, one per height.
type recordSource struct{ raw map[uint64][]byte }

func (s *recordSource) Family() chain.Family                    { return chain.FamilyCometBFT }
func (s *recordSource) ChainID(context.Context) (string, error) { return "cosmoshub-4", nil }
func (s *recordSource) Tip(context.Context) (uint64, error) {
	var tip uint64
	for h := range s.raw {
		tip = max(tip, h)
	}
	return tip, nil
}
func (s *recordSource) Fetch(_ context.Context, from, to uint64) ([]chain.Block, error) {
	var out []chain.Block
	for h := from; h <= to; h++ {
		raw, ok := s.raw[h]
		if !ok {
			return nil, fmt.Errorf("no record at %d", h)
		}
		hash, parent, _, err := cometbft.BlockIdentity(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, chain.Block{Height: h, Hash: hash, ParentHash: parent, Raw: raw})
	}
	return out, nil
}

// TestEventEncodingOfSeiBlocks runs a Sei-shaped block (0.38 results with
// base64 attributes; a constructed fixture) through run: decoded by
// default; a block whose encoding cannot be decided stops the run with exit
// status 4 naming the height and nothing exported, until --event-encoding
// chooses.
func TestEventEncodingOfSeiBlocks(t *testing.T) {
	const h = 9000123
	raw, err := os.ReadFile("../chain/cometbft/testdata/versions/block_sei.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	count := func(dsn, where string) int {
		t.Helper()
		conn := pgtest.ConnectTo(t, dsn)
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM cometbft.events WHERE "+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	dsn := pgtest.NewDatabase(t)
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, h, h)
	cfg.Source = &recordSource{map[uint64][]byte{h: raw}}
	if _, err := Run(ctx, cfg, io.Discard, quiet); err != nil {
		t.Fatal(err)
	}
	if n := count(dsn, `attributes @> '[["fee","5000uatom",true]]'`); n != 2 {
		t.Errorf("%d events with fee 5000uatom, want 2 (one per tx)", n)
	}
	if n := count(dsn, `attributes::text LIKE '%ZmVl%'`); n != 0 {
		t.Errorf("%d events keep base64 attributes", n)
	}

	// One value that is not base64 among base64 keys: undecided.
	bad := strings.Replace(string(raw), `"value": "NTAwMHVhdG9t"`, `"value": "5000 uatom"`, 1)
	if bad == string(raw) {
		t.Fatal("fixture has no fee value to break")
	}
	dsn = pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	cfg = testConfig(CmdRun, dsn, stg, nil, h, h)
	cfg.Source = &recordSource{map[uint64][]byte{h: []byte(bad)}}
	_, err = Run(ctx, cfg, io.Discard, quiet)
	if ExitCode(err) != ExitData || !errors.Is(err, cometbft.ErrEncodingUndecided) || !strings.Contains(err.Error(), "9000123") || !strings.Contains(err.Error(), "--event-encoding") {
		t.Fatalf("undecided block: exit %d, %v; want exit 4 naming height %d and --event-encoding", ExitCode(err), err, h)
	}
	if n := count(dsn, "true"); n != 0 {
		t.Fatalf("%d events exported from an undecided block", n)
	}
	// The operator chooses: export from staging as base64.
	cfg = testConfig(CmdExport, dsn, stg, nil, h, h)
	cfg.EventEncoding = cometbft.EventEncodingBase64
	// The record is what the node sent: the flag is wrong (exit 2), not
	// the record (it was exit 4, "malformed record").
	if _, err := Run(ctx, cfg, io.Discard, quiet); ExitCode(err) != ExitConfig || errors.Is(err, cometbft.ErrMalformedRecord) ||
		!strings.Contains(err.Error(), "--event-encoding base64 does not fit this block's attributes: \"5000 uatom\" is not base64") || !strings.Contains(err.Error(), "9000123") {
		t.Fatalf("forced base64 over a plain value: exit %d, %v, want exit 2 naming the flag, the value and the height", ExitCode(err), err)
	}
	cfg.EventEncoding = cometbft.EventEncodingText
	if _, err := Run(ctx, cfg, io.Discard, quiet); err != nil {
		t.Fatalf("--event-encoding text: %v", err)
	}
	if n := count(dsn, `attributes @> '[["YW1vdW50","5000 uatom",true]]'`); n != 1 {
		t.Errorf("--event-encoding text: %d events with the raw amount, want 1", n)
	}
}
