package cometbft

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/chaintest"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/internal/rpcserve"
)

// replayNode is a CometBFT JSON-RPC endpoint that answers from a recorded
// node folder (testdata/node-0.38*), byte for byte: single calls and
// batches of at most RPCMaxBatch calls, heights as strings only, pruned and
// above-tip heights with the node's own error answers.
type replayNode struct {
	status  json.RawMessage
	results map[string]json.RawMessage // "block 5", "block_results 5"
	lowest  uint64                     // lowest recorded height: below it is pruned
	tip     uint64

	refuseBatch    bool // answer arrays with HTTP 400
	discardResults bool // block_results as a node with discard_abci_responses
	// tamper, if set, may replace a result before it is sent.
	tamper func(method string, h uint64, result json.RawMessage) json.RawMessage

	requests, batches atomic.Int64
	calls             rpcserve.MethodCalls // answered
}

func newReplayNode(t *testing.T, dir string) *replayNode {
	t.Helper()
	n := &replayNode{results: map[string]json.RawMessage{}, lowest: ^uint64(0)}
	n.status = chaintest.RecordedResult(t, filepath.Join(dir, "status.json"))
	var st statusResult
	if err := json.Unmarshal(n.status, &st); err != nil {
		t.Fatal(err)
	}
	tip, err := strconv.ParseUint(st.SyncInfo.LatestBlockHeight, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	n.tip = tip
	for _, method := range []string{"block", "block_results"} {
		files, _ := filepath.Glob(filepath.Join(dir, method+"_*.json"))
		for _, f := range files {
			h, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), method+"_"), ".json"), 10, 64)
			if err != nil {
				continue // block_results_*.json when globbing block_*.json
			}
			n.results[fmt.Sprintf("%s %d", method, h)] = chaintest.RecordedResult(t, f)
			n.lowest = min(n.lowest, h)
		}
	}
	if len(n.results) == 0 {
		t.Fatalf("no fixtures in %s", dir)
	}
	return n
}

func (n *replayNode) start(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(n)
	t.Cleanup(srv.Close)
	return srv
}

// source starts the node and returns it with an RPCSource of cfg
// pointed at it.
func (n *replayNode) source(t *testing.T, cfg jsonrpc.Config) (*httptest.Server, *RPCSource) {
	srv := n.start(t)
	cfg.Endpoints = []string{srv.URL}
	return srv, newTestRPCSource(t, cfg)
}

func (n *replayNode) called(method string) int {
	return n.calls.Of(method)
}

type replayRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (n *replayNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.requests.Add(1)
	rpcserve.Serve(w, r, n.answer, func(w http.ResponseWriter, reqs []replayRequest) bool {
		n.batches.Add(1)
		if n.refuseBatch {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}`))
			return true
		}
		if len(reqs) > RPCMaxBatch {
			// The node's answer with its default max_request_batch_size.
			fmt.Fprintf(w, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request","data":"batch request exceeds maximum (%d) allowed number of requests"}}`, RPCMaxBatch)
			return true
		}
		return false
	})
}

// answer appends the response to one request, as the node would send it.
func (n *replayNode) answer(out []byte, req replayRequest) []byte {
	n.calls.Add(req.Method)
	out = rpcserve.OpenAnswer(out, req.ID)
	fail := func(code int, msg, data string) []byte {
		out = fmt.Appendf(out, `,"error":{"code":%d,"message":%q`, code, msg)
		if data != "" {
			out = fmt.Appendf(out, `,"data":%q`, data)
		}
		return append(out, "}}"...)
	}
	switch req.Method {
	case "status":
		return append(append(append(out, `,"result":`...), n.status...), '}')
	case "block", "block_results":
	default:
		return fail(-32601, "Method not found", "")
	}
	var p struct{ Height json.RawMessage }
	if err := json.Unmarshal(req.Params, &p); err != nil || len(p.Height) == 0 {
		return fail(-32602, "Invalid params", "missing height")
	}
	var hs string
	if err := json.Unmarshal(p.Height, &hs); err != nil {
		return fail(-32602, "Invalid params", fmt.Sprintf("error converting json params to arguments: invalid 64-bit integer encoding %q, expected string", string(p.Height)))
	}
	h, err := strconv.ParseUint(hs, 10, 64)
	switch {
	case err != nil || h == 0:
		return fail(-32603, "Internal error", "height must be greater than 0, but got "+hs)
	case h > n.tip:
		return fail(-32603, "Internal error", fmt.Sprintf("height %d must be less than or equal to the current blockchain height %d", h, n.tip))
	case h < n.lowest:
		return fail(-32603, "Internal error", fmt.Sprintf("height %d is not available, lowest height is %d", h, n.lowest))
	case req.Method == "block_results" && n.discardResults:
		return fail(-32603, "Internal error", "node is not persisting finalize block responses")
	}
	res, ok := n.results[fmt.Sprintf("%s %d", req.Method, h)]
	if !ok {
		return fail(-32603, "Internal error", fmt.Sprintf("height %d was not recorded", h))
	}
	if n.tamper != nil {
		res = n.tamper(req.Method, h, res)
	}
	return append(append(append(out, `,"result":`...), res...), '}')
}

func newTestRPCSource(t *testing.T, cfg jsonrpc.Config) *RPCSource {
	t.Helper()
	if cfg.BaseBackoff == 0 {
		cfg.BaseBackoff, cfg.MaxBackoff = time.Millisecond, 5*time.Millisecond
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = RPCMaxBatch
	}
	c, err := jsonrpc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	src, err := NewRPCSource(RPCConfig{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

type rpcExpected struct {
	Heights []struct {
		Height              uint64
		Hash                string
		ParentHash          string `json:"parent_hash"`
		NumTxs              int    `json:"num_txs"`
		TxEvents            int    `json:"tx_events"`
		FinalizeBlockEvents int    `json:"finalize_block_events"`
	}
}

func readRPCExpected(t *testing.T, dir string) rpcExpected {
	t.Helper()
	return chaintest.ReadJSON[rpcExpected](t, filepath.Join(dir, "expected.json"))
}

// The source fetches every recorded height, in spans, by batch or (when the
// endpoint refuses batches) by single calls; each block is the node's
// answers byte for byte and decodes to what the node reported.
func TestRPCSourceReplaysRecordedNode(t *testing.T) {
	const dir = "testdata/node-0.38"
	exp := readRPCExpected(t, dir)
	if len(exp.Heights) != 40 {
		t.Fatalf("expected.json has %d heights", len(exp.Heights))
	}
	for _, mode := range []struct {
		name     string
		refuse   bool // the endpoint takes no batches at all
		maxBatch int  // the client's; above RPCMaxBatch the node refuses them
	}{
		{name: "batches"},
		{name: "endpoint refuses batches", refuse: true},
		{name: "client batches above the node's limit", maxBatch: 50},
	} {
		t.Run(mode.name, func(t *testing.T) {
			node := newReplayNode(t, dir)
			node.refuseBatch = mode.refuse
			_, src := node.source(t, jsonrpc.Config{MaxBatch: mode.maxBatch})
			ctx := context.Background()

			if id, err := src.ChainID(ctx); err != nil || id != "test-chain-61jx7G" {
				t.Fatalf("ChainID = %q, %v", id, err)
			}
			if tip, err := src.Tip(ctx); err != nil || tip != 188 {
				t.Fatalf("Tip = %d, %v", tip, err)
			}
			var blocks []chain.Block
			for _, span := range [][2]uint64{{1, 16}, {17, 32}, {33, 40}} {
				bs, err := src.Fetch(ctx, span[0], span[1])
				if err != nil {
					t.Fatalf("Fetch %v: %v", span, err)
				}
				blocks = append(blocks, bs...)
			}
			if len(blocks) != 40 {
				t.Fatalf("%d blocks", len(blocks))
			}
			// Spans of 16, 16 and 8 heights: 32, 32 and 16 calls, in
			// batches of at most 10.
			if mode.name == "batches" && node.batches.Load() != 4+4+2 {
				t.Errorf("%d batch requests for 3 spans, want 10", node.batches.Load())
			}
			if node.called("block") != 40 {
				t.Errorf("%d block calls answered, want 40", node.called("block"))
			}

			d := NewDecoder()
			tables := d.Tables()
			numTxs := chaintest.ColumnIndex(t, tables[0], "num_txs")
			hashCol := chaintest.ColumnIndex(t, tables[0], "hash")
			parentCol := chaintest.ColumnIndex(t, tables[0], "parent_hash")
			for i, b := range blocks {
				e := exp.Heights[i]
				if b.Height != e.Height {
					t.Fatalf("block %d has height %d", e.Height, b.Height)
				}
				want := MarshalRecord(node.results[fmt.Sprintf("block %d", e.Height)], node.results[fmt.Sprintf("block_results %d", e.Height)])
				if !bytes.Equal(b.Raw, want) {
					t.Fatalf("height %d: raw record is not the node's answers byte for byte", e.Height)
				}
				if got := strings.ToUpper(hex.EncodeToString(b.Hash)); got != e.Hash {
					t.Errorf("height %d: hash %s, want %s", e.Height, got, e.Hash)
				}
				if got := strings.ToUpper(hex.EncodeToString(b.ParentHash)); got != e.ParentHash {
					t.Errorf("height %d: parent hash %s, want %s", e.Height, got, e.ParentHash)
				}
				if e.Height == 1 && b.ParentHash != nil {
					t.Errorf("height 1: parent hash %x, want nil", b.ParentHash)
				}
				rows := chain.NewRows(tables)
				if err := d.Decode(b.Height, b.Raw, rows); err != nil {
					t.Fatalf("decode %d: %v", b.Height, err)
				}
				row := rows.Table(0)[0]
				if fmt.Sprint(row[numTxs]) != fmt.Sprint(e.NumTxs) {
					t.Errorf("height %d: num_txs %v, want %d", e.Height, row[numTxs], e.NumTxs)
				}
				if !bytes.Equal(row[hashCol].([]byte), b.Hash) {
					t.Errorf("height %d: decoded hash %x, source hash %x", e.Height, row[hashCol], b.Hash)
				}
				if p, _ := row[parentCol].([]byte); !bytes.Equal(p, b.ParentHash) {
					t.Errorf("height %d: decoded parent %x, source parent %x", e.Height, row[parentCol], b.ParentHash)
				}
				if got := rows.Len(1); got != e.NumTxs {
					t.Errorf("height %d: %d transaction rows, want %d", e.Height, got, e.NumTxs)
				}
				if got, want := rows.Len(2), e.TxEvents+e.FinalizeBlockEvents; got != want {
					t.Errorf("height %d: %d event rows, want %d", e.Height, got, want)
				}
			}
		})
	}
}

// A pruned height or discarded block results fail at once, without
// retries, naming the height, the endpoint and the cure.
func TestRPCSourceUnavailableHeights(t *testing.T) {
	ctx := context.Background()
	t.Run("pruned", func(t *testing.T) {
		node := newReplayNode(t, "testdata/node-0.38-pruned")
		srv, src := node.source(t, jsonrpc.Config{})
		_, err := src.Fetch(ctx, 2, 5)
		var ue *UnavailableError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Fetch of pruned heights: %v, want *UnavailableError", err)
		}
		if ue.Height != 2 || ue.Lowest != 4 || ue.Endpoint != srv.URL {
			t.Errorf("error %+v, want height 2, lowest 4, endpoint %s", ue, srv.URL)
		}
		for _, s := range []string{"height 2 ", "archive", srv.URL, "lowest height is 4"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not say %q", err, s)
			}
		}
		if fault.Retryable(err) {
			t.Errorf("pruned height is retryable: %v", err)
		}
		if n := node.requests.Load(); n != 1 {
			t.Errorf("%d requests, want 1 (no retries)", n)
		}
	})
	t.Run("discarded results", func(t *testing.T) {
		node := newReplayNode(t, "testdata/node-0.38")
		node.discardResults = true
		_, src := node.source(t, jsonrpc.Config{})
		_, err := src.Fetch(ctx, 5, 6)
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Height != 5 || ue.Method != "block_results" || fault.Retryable(err) {
			t.Fatalf("Fetch with discarded results: %v", err)
		}
		if !strings.Contains(err.Error(), "archive") || !strings.Contains(err.Error(), "not persisting") {
			t.Errorf("error %q does not explain", err)
		}
	})
	t.Run("above tip", func(t *testing.T) {
		node := newReplayNode(t, "testdata/node-0.38-pruned")
		_, src := node.source(t, jsonrpc.Config{})
		_, err := src.Fetch(ctx, 12, 14)
		var ae *AboveTipError
		if !errors.As(err, &ae) || ae.Height != 14 || fault.Retryable(err) {
			t.Fatalf("Fetch above the tip: %v, want a non-retryable *AboveTipError for 14", err)
		}
		if n := node.requests.Load(); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
}

// Answers that are not what was asked for are caught before they are
// returned, and are retryable.
func TestRPCSourceChecksAnswers(t *testing.T) {
	const dir = "testdata/node-0.38"
	exp := readRPCExpected(t, dir)
	hash5 := []byte(exp.Heights[4].Hash)
	recorded := newReplayNode(t, dir).results
	other := func(method string) func(string, uint64, json.RawMessage) json.RawMessage {
		return func(m string, h uint64, res json.RawMessage) json.RawMessage {
			if m == method && h == 5 {
				return recorded[m+" 6"]
			}
			return res
		}
	}
	replaceHash := func(with string) func(string, uint64, json.RawMessage) json.RawMessage {
		return func(m string, h uint64, res json.RawMessage) json.RawMessage {
			if m == "block" && h == 5 {
				return bytes.Replace(res, hash5, []byte(with), 1)
			}
			return res
		}
	}
	for _, tc := range []struct {
		name   string
		tamper func(string, uint64, json.RawMessage) json.RawMessage
		want   string
	}{
		{"block of another height", other("block"), "block header height is 6"},
		{"block_results of another height", other("block_results"), "block_results answer for height 5"},
		{"short hash", replaceHash("ABCD"), "block_id.hash has 2 bytes"},
		{"hash not hex", replaceHash(strings.Repeat("Z", 64)), "block_id.hash"},
		{"null block", func(m string, h uint64, res json.RawMessage) json.RawMessage {
			if m == "block" && h == 5 {
				return json.RawMessage("null")
			}
			return res
		}, "result is null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newReplayNode(t, dir)
			node.tamper = tc.tamper
			srv, src := node.source(t, jsonrpc.Config{})
			_, err := src.Fetch(context.Background(), 4, 6)
			t.Logf("error: %v", err)
			var be *BadResponseError
			if !errors.As(err, &be) || be.Height != 5 {
				t.Fatalf("Fetch: %v, want *BadResponseError at height 5", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "height 5") || !strings.Contains(err.Error(), srv.URL) {
				t.Errorf("error %q does not say %q, the height and the endpoint", err, tc.want)
			}
			if !fault.Retryable(err) {
				t.Errorf("bad answer is not retryable: %v", err)
			}
		})
	}
}

// An API key in the endpoint's path never shows in an error, whatever
// went wrong.
func TestRPCSourceErrorsHideCredentials(t *testing.T) {
	const key = "abcdef0123456789abcdef"
	ctx := context.Background()
	fetch := func(from, to uint64) func(*testing.T, string) error {
		return func(t *testing.T, url string) error {
			_, err := newTestRPCSource(t, jsonrpc.Config{Endpoints: []string{url}, MaxRetries: 1}).Fetch(ctx, from, to)
			return err
		}
	}
	for _, tc := range []struct {
		name   string
		status int // when set, every request gets it
		dead   bool
		run    func(t *testing.T, url string) error
	}{
		{name: "pruned", run: fetch(1, 5)},
		{name: "above tip", run: fetch(13, 20)},
		{name: "bad answer", run: fetch(7, 9)},
		{name: "server errors", status: http.StatusInternalServerError, run: fetch(5, 6)},
		{name: "forbidden", status: http.StatusForbidden, run: fetch(5, 6)},
		{name: "refused connection", dead: true, run: func(t *testing.T, url string) error {
			_, err := newTestRPCSource(t, jsonrpc.Config{Endpoints: []string{url}, MaxRetries: 1}).Tip(ctx)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newReplayNode(t, "testdata/node-0.38-pruned")
			node.tamper = func(m string, h uint64, res json.RawMessage) json.RawMessage {
				if m == "block_results" && h == 8 {
					return node.results["block_results 9"]
				}
				return res
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path != "/v3/"+key:
					http.NotFound(w, r)
				case tc.status != 0:
					w.WriteHeader(tc.status)
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"bad key %s"}}`, key)
				default:
					node.ServeHTTP(w, r)
				}
			}))
			t.Cleanup(srv.Close)
			if tc.dead {
				srv.Close()
			}
			err := tc.run(t, srv.URL+"/v3/"+key)
			if err == nil {
				t.Fatal("no error")
			}
			t.Logf("error: %v", err)
			if strings.Contains(err.Error(), key) {
				t.Fatalf("error shows the API key: %v", err)
			}
			if !strings.Contains(err.Error(), "/v3/***") {
				t.Errorf("error does not name the redacted endpoint: %v", err)
			}
		})
	}
}
