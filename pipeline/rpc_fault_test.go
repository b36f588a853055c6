package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain/chaintest"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/rpctest"
)

// cometReplay answers CometBFT JSON-RPC calls from a recorded node folder
// (chain/cometbft/testdata/node-0.38*), with the node's own errors for
// pruned heights, heights above its tip and heights given as numbers.
type cometReplay struct {
	status  json.RawMessage
	results map[string]json.RawMessage // "block 5", "block_results 5"
	lowest  uint64
	tip     uint64

	// wrongOnce, when set, makes the first block call answered be
	// answered with the block of another height.
	wrongOnce  bool
	wrongSent  atomic.Bool
	blockCalls atomic.Int64

	// lieAt holds heights whose block answers carry a wrong block_id.hash.
	lieAt map[uint64]bool
}

func newCometReplay(t *testing.T, folder string) *cometReplay {
	t.Helper()
	dir := filepath.Join("..", "chain", "cometbft", "testdata", folder)
	read := func(name string) json.RawMessage {
		return chaintest.RecordedResult(t, filepath.Join(dir, name))
	}
	r := &cometReplay{status: read("status.json"), results: map[string]json.RawMessage{}, lowest: ^uint64(0)}
	var st struct {
		SyncInfo struct {
			Latest string `json:"latest_block_height"`
		} `json:"sync_info"`
	}
	if err := json.Unmarshal(r.status, &st); err != nil {
		t.Fatal(err)
	}
	r.tip, _ = strconv.ParseUint(st.SyncInfo.Latest, 10, 64)
	for h := uint64(1); h <= r.tip; h++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("block_%d.json", h))); err != nil {
			continue
		}
		r.results[fmt.Sprintf("block %d", h)] = read(fmt.Sprintf("block_%d.json", h))
		r.results[fmt.Sprintf("block_results %d", h)] = read(fmt.Sprintf("block_results_%d.json", h))
		r.lowest = min(r.lowest, h)
	}
	if len(r.results) == 0 {
		t.Fatalf("no fixtures in %s", dir)
	}
	return r
}

func (r *cometReplay) handle(method string, params json.RawMessage) (any, *rpctest.Error) {
	internal := func(format string, args ...any) *rpctest.Error {
		return &rpctest.Error{Code: -32603, Message: "Internal error", Data: fmt.Sprintf(format, args...)}
	}
	switch method {
	case "status":
		return r.status, nil
	case "block", "block_results":
	default:
		return nil, &rpctest.Error{Code: -32601, Message: "Method not found"}
	}
	var p struct{ Height json.RawMessage }
	var hs string
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Height, &hs) != nil {
		return nil, &rpctest.Error{Code: -32602, Message: "Invalid params", Data: "height must be a string"}
	}
	h, err := strconv.ParseUint(hs, 10, 64)
	switch {
	case err != nil || h == 0:
		return nil, internal("height must be greater than 0, but got %s", hs)
	case h > r.tip:
		return nil, internal("height %d must be less than or equal to the current blockchain height %d", h, r.tip)
	case h < r.lowest:
		return nil, internal("height %d is not available, lowest height is %d", h, r.lowest)
	}
	if method == "block" {
		r.blockCalls.Add(1)
		if r.wrongOnce && r.wrongSent.CompareAndSwap(false, true) {
			other := h + 1
			if _, ok := r.results[fmt.Sprintf("block %d", other)]; !ok {
				other = h - 1
			}
			return r.results[fmt.Sprintf("block %d", other)], nil
		}
	}
	res, ok := r.results[fmt.Sprintf("%s %d", method, h)]
	if !ok {
		return nil, internal("height %d was not recorded", h)
	}
	if method == "block" && r.lieAt[h] {
		return lieAboutHash(res), nil
	}
	return res, nil
}

func rpcRunConfig(t *testing.T, endpoints ...string) Config {
	cfg := DefaultConfig()
	cfg.Command = CmdRun
	cfg.PG = pgtest.NewDatabase(t)
	cfg.Staging = t.TempDir()
	cfg.RPC = endpoints
	cfg.From, cfg.To, cfg.ToSet = 1, 40, true
	cfg.FetchWorkers, cfg.FetchSpan, cfg.BatchBlocks = 4, 2, 10
	cfg.RPCTimeout = 500 * time.Millisecond
	cfg.Progress = 0
	return cfg
}

// A run against two endpoints that throttle, fail, hang, truncate, refuse
// batches, answer a wrong height once and die part way loads exactly what
// a run against a sound node loads.
func TestRunThroughRPCFaultsMatchesFaultFreeRun(t *testing.T) {
	ctx := context.Background()

	clean := rpctest.NewServer(rpctest.Config{Handler: newCometReplay(t, "node-0.38").handle})
	defer clean.Close()
	cleanCfg := rpcRunConfig(t, clean.URL)
	cleanCfg.FetchSpan = DefaultConfig().FetchSpan
	sum, err := Run(ctx, cleanCfg, io.Discard, quiet)
	if err != nil || !sum.Complete {
		t.Fatalf("fault-free run: complete=%v err=%v", sum.Complete, err)
	}
	// Spans go in batches no larger than a CometBFT node takes by default.
	sizes := clean.BatchSizes()
	if len(sizes) == 0 || slices.Max(sizes) > cometbft.RPCMaxBatch {
		t.Errorf("batch sizes %v, want batches of at most %d", sizes, cometbft.RPCMaxBatch)
	}
	want := fingerprint(t, cleanCfg.PG)
	if !strings.Contains(want, "blocks: 40 ") {
		t.Fatalf("fault-free run loaded:\n%s", want)
	}

	// a: every transient fault in turn, early in the run.
	a := rpctest.NewServer(rpctest.Config{
		Handler: newCometReplay(t, "node-0.38").handle,
		Faults: rpctest.Sequence(
			rpctest.Fault{},
			rpctest.Fault{Kind: rpctest.Status, Status: 429, RetryAfter: "1"},
			rpctest.Fault{Kind: rpctest.Status, Status: 500},
			rpctest.Fault{Kind: rpctest.Hang},
			rpctest.Fault{Kind: rpctest.Truncate},
			rpctest.Fault{Kind: rpctest.Status, Status: 503},
			rpctest.Fault{},
			rpctest.Fault{Kind: rpctest.Reset},
		),
	})
	defer a.Close()
	// b: refuses batches, answers one block call with another height, and
	// dies at its 21st request: while a pauses after its 429, b alone
	// serves the run (by single calls), so it dies part way through.
	const bLives = 20
	bNode := newCometReplay(t, "node-0.38")
	bNode.wrongOnce = true
	b := rpctest.NewServer(rpctest.Config{Handler: bNode.handle, Batch: rpctest.BatchRefuseHTTP, DieAfter: bLives})
	defer b.Close()

	cfg := rpcRunConfig(t, a.URL, b.URL)
	start := time.Now()
	sum, err = Run(ctx, cfg, io.Discard, quiet)
	if err != nil || !sum.Complete {
		t.Fatalf("run through faults: complete=%v err=%v", sum.Complete, err)
	}
	t.Logf("run through faults took %s: %d span retries; endpoint a %d requests (%d batches), b %d requests (%d batches refused, %d block calls)",
		time.Since(start).Round(time.Millisecond), sum.Fetch.Retries, a.Requests(), a.Batches(), b.Requests(), b.Batches(), bNode.blockCalls.Load())
	if got := fingerprint(t, cfg.PG); got != want {
		t.Fatalf("tables differ from the fault-free run:\n got %s\nwant %s", got, want)
	}
	// The faults happened: a went through its whole sequence, b refused a
	// batch, sent a wrong block (which the loader retried) and died.
	if a.Requests() < 8 {
		t.Errorf("endpoint a got %d requests: not every fault was served", a.Requests())
	}
	if b.Requests() <= bLives {
		t.Errorf("endpoint b got %d requests: it never died", b.Requests())
	}
	if b.Batches() == 0 || !bNode.wrongSent.Load() {
		t.Errorf("endpoint b: %d batches, wrong height sent %v", b.Batches(), bNode.wrongSent.Load())
	}
	if sum.Fetch.Retries == 0 {
		t.Error("the wrong height was not retried")
	}
}

// A height the node has pruned stops the run at once with an error that
// names the height, the endpoint and the cure.
func TestRunPrunedHeightFailsFast(t *testing.T) {
	node := newCometReplay(t, "node-0.38-pruned")
	srv := rpctest.NewServer(rpctest.Config{Handler: node.handle})
	defer srv.Close()
	cfg := rpcRunConfig(t, srv.URL)
	cfg.From, cfg.To = 3, 13
	sum, err := Run(context.Background(), cfg, io.Discard, quiet)
	if err == nil || sum.Complete {
		t.Fatalf("run over a pruned height: complete=%v err=%v", sum.Complete, err)
	}
	t.Logf("error: %v", err)
	for _, s := range []string{"height 3 is not available", "archive", srv.URL} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if code := ExitCode(err); code == ExitComplete {
		t.Errorf("exit code %d", code)
	}
	if sum.Fetch.Retries != 0 {
		t.Errorf("%d retries of a pruned height", sum.Fetch.Retries)
	}
	// At most one batch per span of the range (11 heights, spans of 2),
	// however many of them were in flight when the first failed; the
	// status calls (tip, chain id, the preflight's identity check) are not
	// fetches and are not counted.
	if n := srv.Requests() - srv.MethodCalls("status"); n > 6 {
		t.Errorf("%d fetch requests: the pruned height was retried", n)
	}
}

// lieAboutHash returns a /block result whose block_id.hash has its first
// hex digit changed.
func lieAboutHash(res json.RawMessage) json.RawMessage {
	const key = `"block_id":{"hash":"`
	i := strings.Index(string(res), key) + len(key)
	out := []byte(string(res))
	if out[i] == '0' {
		out[i] = '1'
	} else {
		out[i] = '0'
	}
	return out
}
