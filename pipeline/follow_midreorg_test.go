package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/rpctest"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
)

// midReorgNode serves a forkChain over CometBFT JSON-RPC. Its tip moves by
// the chain's step each time the block at the tip is served (a node that
// produces blocks as fast as they are read); at forkWhenTip the chain
// switches forks, and while mixed is above zero the node is caught half
// way: heights below switchAt still come from the old fork, those from
// switchAt on from the new one, so a span across switchAt does not link.
// Every block call for switchAt uses up one mixed answer.
type midReorgNode struct {
	fc       *forkChain
	switchAt uint64
	mixed    atomic.Int64
	brokenN  atomic.Int64 // block calls answered across the break
}

func (n *midReorgNode) handle(method string, params json.RawMessage) (any, *rpctest.Error) {
	fc := n.fc
	if method == "status" {
		t := fc.tip.Load()
		if t >= fc.forkWhenTip {
			fc.forked.Store(true)
		}
		return map[string]any{
			"node_info": map[string]string{"network": "forky-1"},
			"sync_info": map[string]string{"latest_block_height": strconv.FormatUint(t, 10)},
		}, nil
	}
	if method != "block" && method != "block_results" {
		return nil, &rpctest.Error{Code: -32601, Message: "Method not found"}
	}
	var p struct {
		Height string `json:"height"`
	}
	h, err := uint64(0), json.Unmarshal(params, &p)
	if err == nil {
		h, err = strconv.ParseUint(p.Height, 10, 64)
	}
	t := fc.tip.Load()
	switch {
	case err != nil || h == 0:
		return nil, &rpctest.Error{Code: -32603, Message: "Internal error", Data: "height must be greater than 0"}
	case h > t:
		return nil, &rpctest.Error{Code: -32603, Message: "Internal error",
			Data: fmt.Sprintf("height %d must be less than or equal to the current blockchain height %d", h, t)}
	}
	b := fc.block(h)
	if fc.forked.Load() && n.mixed.Load() > 0 {
		if h == n.switchAt && method == "block" {
			n.mixed.Add(-1)
			n.brokenN.Add(1)
		}
		if h < n.switchAt {
			b = fc.a.Block(h)
		}
	}
	if method == "block" && h == t {
		fc.tip.CompareAndSwap(t, t+fc.step)
	}
	var rec struct {
		Block        json.RawMessage `json:"block"`
		BlockResults json.RawMessage `json:"block_results"`
	}
	if err := json.Unmarshal(b.Raw, &rec); err != nil {
		return nil, &rpctest.Error{Code: -32603, Message: "Internal error", Data: err.Error()}
	}
	if method == "block" {
		return rec.Block, nil
	}
	return rec.BlockResults, nil
}

func newMidReorgNode(mixed int64) (*midReorgNode, *rpctest.Server) {
	// Tip 100, +50 whenever the tip block is read; at 400 (staged and
	// exported up to 350) the chain forks from 341 on, and the first
	// answers after the switch break the link 357 -> 358, inside the span
	// 351-366.
	n := &midReorgNode{fc: newForkChain(100, 50, 400, 341), switchAt: 358}
	n.mixed.Store(mixed)
	return n, rpctest.NewServer(rpctest.Config{Handler: n.handle})
}

func followRPCConfig(t *testing.T, dsn, url string) Config {
	cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "head"), nil, 1, 600)
	cfg.RPC = []string{url}
	cfg.FetchSpan = 16
	cfg.RPCTimeout = 2 * time.Second
	return cfg
}

// A node in the middle of a fork switch serves a span near the tip whose
// blocks do not link, for longer than the loader's retries of that span
// last: follow refetches it and handles the switch as the reorg it is,
// rolling the exported heights of the abandoned fork back, and ends with
// the tables of a clean load of the final chain.
func TestFollowRefetchesUnlinkedSpanNearTip(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	node, srv := newMidReorgNode(8) // the loader makes 6 attempts a span
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sum, err := Run(ctx, followRPCConfig(t, dsn, srv.URL), io.Discard, quiet)
	if ctx.Err() != nil {
		t.Fatalf("follow still running when the guard fired: %v", err)
	}
	if err != nil || !sum.Complete {
		t.Fatalf("follow through a fork switch: complete %v, err %v (exit %d)", sum.Complete, err, ExitCode(err))
	}
	if node.brokenN.Load() < 8 || sum.Reorgs == 0 {
		t.Fatalf("%d unlinked answers served, %d reorgs: the scenario did not happen", node.brokenN.Load(), sum.Reorgs)
	}
	if got, want := fingerprint(t, dsn), reference(t, node.fc, 600); got != want {
		t.Fatalf("after the fork switch:\n%s\nwant\n%s", got, want)
	}
	t.Logf("%d unlinked answers, %d reorgs, %d span retries", node.brokenN.Load(), sum.Reorgs, sum.Fetch.Retries)
}

// A node that never stops serving the break ends follow within a bounded
// number of refetches with a data error naming the height, and the head
// checkpoint stays where the last sound export left it.
func TestFollowFailsOnPersistentUnlinkedSpan(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	_, srv := newMidReorgNode(1 << 40)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cfg := followRPCConfig(t, dsn, srv.URL)
	// The tip runs on while follow refetches; a window this wide keeps the
	// break near it, so the refetch bound, not the window, ends the job.
	cfg.ReorgWindow = 1000
	start := time.Now()
	_, err := Run(ctx, cfg, io.Discard, quiet)
	if ctx.Err() != nil {
		t.Fatalf("follow still running when the guard fired: %v", err)
	}
	t.Logf("ended after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if ExitCode(err) != ExitData || !strings.Contains(err.Error(), "block 358") || !strings.Contains(err.Error(), "after 3 refetches") {
		t.Fatalf("err = %v (exit %d), want exit %d naming block 358 and the refetches", err, ExitCode(err), ExitData)
	}
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	if h, _ := headHeight(context.Background(), conn); h > 350 {
		t.Fatalf("head checkpoint at %d, beyond the last sound height 350", h)
	}
}

// Only a break near the tip is taken for a reorg; one far below it is a
// node that is wrong, and fails as before.
func TestUnlinkedNearTip(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ReorgWindow, cfg.Confirmations = 64, 6
	span := staging.Range{From: 1000, To: 1015}
	mk := func(h uint64) error {
		return &loader.FetchError{Range: span, Err: fmt.Errorf("%w (after 6 attempts)", &loader.InvalidBlockError{Height: h, Reason: "parent hash"})}
	}
	for _, tc := range []struct {
		err  error
		tip  uint64
		want bool
	}{
		{mk(1007), 1015, true},
		{mk(1007), 1007 + 70, true},
		{mk(1007), 1007 + 71, false},
		{mk(1007), 900, true}, // a tip that went back below the span
		{&loader.FetchError{Range: span, Err: errors.New("HTTP 500")}, 1015, false},
		{nil, 1015, false},
	} {
		r, h, ok := unlinkedNearTip(tc.err, tc.tip, bareJob(cfg))
		if ok != tc.want || (ok && (r != span || h != 1007)) {
			t.Errorf("unlinkedNearTip(%v, tip %d) = %v %d %v, want %v", tc.err, tc.tip, r, h, ok, tc.want)
		}
	}
}
