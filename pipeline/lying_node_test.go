package pipeline

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/internal/rpctest"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

// recordedHash is the real hash of block h of the recorded node-0.38 chain.
func recordedHash(t *testing.T, h uint64) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "chain", "cometbft", "testdata", "node-0.38", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Heights []struct {
			Height uint64 `json:"height"`
			Hash   string `json:"hash"`
		} `json:"heights"`
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	for _, e := range exp.Heights {
		if e.Height == h {
			return strings.ToUpper(e.Hash)
		}
	}
	t.Fatalf("no recorded hash for %d", h)
	return ""
}

// A node that lies about the hash of the last block of a span (16, with
// spans of 2) and of the range (40) gets neither staged nor exported: the
// run fails with exit 4 naming the endpoint, the height and both hashes.
// (Before blocks were verified, the lie at 40 was exported with exit 0.)
func TestRunLyingNodeFailsNamingBlockEndpointAndHashes(t *testing.T) {
	liar := newCometReplay(t, "node-0.38")
	liar.lieAt = map[uint64]bool{16: true, 40: true}
	srv := rpctest.NewServer(rpctest.Config{Handler: liar.handle})
	defer srv.Close()
	cfg := rpcRunConfig(t, srv.URL)
	_, err := Run(context.Background(), cfg, io.Discard, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("run succeeded against a node that lies about block hashes")
	}
	if code := ExitCode(err); code != ExitData {
		t.Fatalf("exit %d, want %d (data wrong): %v", code, ExitData, err)
	}
	var hm *chain.HashMismatchError
	if !errors.As(err, &hm) {
		t.Fatalf("error %v is not a hash mismatch", err)
	}
	if hm.Height != 16 && hm.Height != 40 {
		t.Fatalf("mismatch at height %d, the node lied at 16 and 40", hm.Height)
	}
	real := recordedHash(t, hm.Height)
	claimed := []byte(real)
	if claimed[0] == '0' {
		claimed[0] = '1'
	} else {
		claimed[0] = '0'
	}
	msg := err.Error()
	for _, want := range []string{jsonrpc.Redact(srv.URL), real, string(claimed), "block " + strconv.FormatUint(hm.Height, 10)} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	store := stagingtest.Open(t, cfg.Staging, staging.Options{})
	defer store.Close()
	for _, h := range []uint64{16, 40} {
		if b, err := store.Get(h); err == nil {
			t.Errorf("block %d was staged (hash %X)", h, b.Hash)
		}
	}
}

// The same lies from one of two endpoints are asked again of the other:
// the run completes with the true blocks.
func TestRunLyingNodeRetriedOnAnotherEndpoint(t *testing.T) {
	liar := newCometReplay(t, "node-0.38")
	liar.lieAt = map[uint64]bool{16: true, 40: true}
	bad := rpctest.NewServer(rpctest.Config{Handler: liar.handle})
	defer bad.Close()
	good := rpctest.NewServer(rpctest.Config{Handler: newCometReplay(t, "node-0.38").handle})
	defer good.Close()
	cfg := rpcRunConfig(t, bad.URL, good.URL)
	if _, err := Run(context.Background(), cfg, io.Discard, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	wantRecordedHashes(t, cfg.Staging, 16, 40)
}

// wantRecordedHashes fails unless the store in dir holds each of heights
// with the hash of the recorded chain's block.
func wantRecordedHashes(t *testing.T, dir string, heights ...uint64) {
	t.Helper()
	store := stagingtest.Open(t, dir, staging.Options{})
	defer store.Close()
	for _, h := range heights {
		b, err := store.Get(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.ToUpper(hex.EncodeToString(b.Hash)); got != recordedHash(t, h) {
			t.Errorf("block %d staged with hash %s, the chain's is %s", h, got, recordedHash(t, h))
		}
	}
}

// recordedNodeRun serves the recorded CometBFT 0.38 node until the test
// ends and configures a run against it.
func recordedNodeRun(t *testing.T) (*cometReplay, Config) {
	t.Helper()
	node := newCometReplay(t, "node-0.38")
	srv := rpctest.NewServer(rpctest.Config{Handler: node.handle})
	t.Cleanup(srv.Close)
	return node, rpcRunConfig(t, srv.URL)
}

// A store that holds a lie (block 16 with a hash its header does not give,
// staged before blocks were verified) halts export at 17 with a
// continuity break that names block 16 as the wrong one; export only
// reads staging and leaves it there. A run against a sound node removes
// it, saying so, and the next run refetches 16 and completes.
func TestExportNamesTheWrongBlockAndARefetchRepairsIt(t *testing.T) {
	node, cfg := recordedNodeRun(t)

	stageRecorded(t, cfg, node, 40, func(h uint64, blk json.RawMessage) json.RawMessage {
		if h == 16 {
			return lieAboutHash(blk)
		}
		return blk
	})

	exportBreaks(t, cfg, "block 16's stored hash does not match its header")
	stillStaged(t, cfg, 16)
	runHeals(t, cfg, "block 16's stored hash does not match its header")
	store := stagingtest.Open(t, cfg.Staging, staging.Options{})
	defer store.Close()
	b, err := store.Get(16)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.ToUpper(hex.EncodeToString(b.Hash)); got != recordedHash(t, 16) {
		t.Fatalf("block 16 staged with %s after the refetch, the chain's is %s", got, recordedHash(t, 16))
	}
}

// stageRecorded stages blocks 1..to of the recorded chain straight into
// cfg's staging directory, each passed through mutate first, as a store
// filled before blocks were verified would hold them.
func stageRecorded(t *testing.T, cfg Config, node *cometReplay, to uint64, mutate func(h uint64, blk json.RawMessage) json.RawMessage) {
	t.Helper()
	var st struct {
		NodeInfo struct {
			Network string `json:"network"`
		} `json:"node_info"`
	}
	if err := json.Unmarshal(node.status, &st); err != nil {
		t.Fatal(err)
	}
	store := stagingtest.Open(t, cfg.Staging, staging.Options{})
	if err := store.Bind(chain.FamilyCometBFT, st.NodeInfo.Network); err != nil {
		t.Fatal(err)
	}
	batch := store.NewBatch()
	for h := uint64(1); h <= to; h++ {
		blk := mutate(h, node.results["block "+strconv.FormatUint(h, 10)])
		raw := cometbft.MarshalRecord(blk, node.results["block_results "+strconv.FormatUint(h, 10)])
		hash, parent, _, err := cometbft.BlockIdentity(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := batch.Put(chain.Block{Height: h, Hash: hash, ParentHash: parent, Raw: raw}); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	batch.Close()
	store.Close()

}

// forgeParent returns block blk with another parent hash and the block
// hash recomputed from the changed header: a block that hashes correctly
// but does not link to the chain's block below it.
func forgeParent(t *testing.T, blk, results json.RawMessage) json.RawMessage {
	t.Helper()
	const parentKey = `"last_block_id":{"hash":"`
	out := []byte(string(blk))
	i := strings.Index(string(out), parentKey) + len(parentKey)
	if out[i] == 'A' {
		out[i] = 'B'
	} else {
		out[i] = 'A'
	}
	_, err := cometbft.VerifyBlock(cometbft.MarshalRecord(out, results))
	var hm *chain.HashMismatchError
	if !errors.As(err, &hm) {
		t.Fatalf("the forged header still hashes as before: %v", err)
	}
	const hashKey = `"block_id":{"hash":"`
	j := strings.Index(string(out), hashKey) + len(hashKey)
	copy(out[j:], strings.ToUpper(hex.EncodeToString(hm.Computed)))
	if _, err := cometbft.VerifyBlock(cometbft.MarshalRecord(out, results)); err != nil {
		t.Fatalf("the forged block does not hash correctly: %v", err)
	}
	return out
}

// A store holding a forged block that hashes correctly (block 16 with
// another parent and its hash recomputed) halts export at 16, which leaves
// staging as it is. A run against a sound node meets the same break:
// nothing in the two records says which of 15 and 16 is of the chain, so
// it removes both and names them; the next run refetches them and
// completes with the chain's blocks.
func TestExportRemovesBothBlocksOfAnUnlinkedPairAndARefetchRepairsThem(t *testing.T) {
	node, cfg := recordedNodeRun(t)
	stageRecorded(t, cfg, node, 40, func(h uint64, blk json.RawMessage) json.RawMessage {
		if h == 16 {
			return forgeParent(t, blk, node.results["block_results 16"])
		}
		return blk
	})

	exportBreaks(t, cfg, "continuity break at height 16")
	stillStaged(t, cfg, 15, 16)
	runHeals(t, cfg, "blocks 15 and 16 each hash correctly but do not link")
	wantRecordedHashes(t, cfg.Staging, 15, 16)
}

// stillStaged wants heights staged: export, which only reads staging,
// removed nothing.
func stillStaged(t *testing.T, cfg Config, heights ...uint64) {
	t.Helper()
	store := stagingtest.Open(t, cfg.Staging, staging.Options{})
	defer store.Close()
	for _, h := range heights {
		if _, err := store.Get(h); err != nil {
			t.Errorf("block %d not staged after export's break: %v", h, err)
		}
	}
}

// runHeals runs cfg against its sound node: the first run meets the break,
// removes what it names (want) and exits 4 saying so; the second refetches
// and completes.
func runHeals(t *testing.T, cfg Config, want string) {
	t.Helper()
	cfg.Command = CmdRun
	_, err := Run(context.Background(), cfg, io.Discard, slog.New(slog.DiscardHandler))
	if code := ExitCode(err); code != ExitData || !strings.Contains(fmt.Sprint(err), want) {
		t.Fatalf("the first run after the break: exit %d, want %d saying %q: %v", code, ExitData, want, err)
	}
	if _, err := Run(context.Background(), cfg, io.Discard, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("the run after the removal: %v", err)
	}
}

// exportBreaks exports cfg's staged range and wants a data error (exit 4)
// whose message holds want.
func exportBreaks(t *testing.T, cfg Config, want string) {
	t.Helper()
	cfg.Command = CmdExport
	_, err := Run(context.Background(), cfg, io.Discard, slog.New(slog.DiscardHandler))
	if code := ExitCode(err); code != ExitData {
		t.Fatalf("export: exit %d, want %d: %v", code, ExitData, err)
	}
	if !strings.Contains(fmt.Sprint(err), want) {
		t.Fatalf("export error %v does not say %q", err, want)
	}
}
