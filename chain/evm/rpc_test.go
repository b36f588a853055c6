package evm

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

const gethReplayDir = "testdata/geth-dev"

// gethReplay is an Ethereum JSON-RPC endpoint that answers from the
// recorded geth-dev folder, byte for byte, single calls and batches, with
// geth's strict quantities and its null for blocks it does not have.
type gethReplay struct {
	chainID, blockNumber json.RawMessage
	blocks, receipts     map[uint64]json.RawMessage
	txReceipts           map[string]json.RawMessage // by lower-case tx hash

	noBlockReceipts bool // answer eth_getBlockReceipts as a node without it
	// tamper, if set, may replace a result before it is sent.
	tamper func(method, param string, result json.RawMessage) json.RawMessage

	requests atomic.Int64
	calls    rpcserve.MethodCalls // answered
}

func newGethReplay(t *testing.T) *gethReplay {
	t.Helper()
	g := &gethReplay{
		chainID:     gethReplayResult(t, "chain_id.json"),
		blockNumber: gethReplayResult(t, "block_number.json"),
		blocks:      map[uint64]json.RawMessage{},
		receipts:    map[uint64]json.RawMessage{},
		txReceipts:  map[string]json.RawMessage{},
	}
	for h := uint64(0); ; h++ {
		if _, err := os.Stat(filepath.Join(gethReplayDir, fmt.Sprintf("block_%d.json", h))); err != nil {
			break
		}
		g.blocks[h] = gethReplayResult(t, fmt.Sprintf("block_%d.json", h))
		g.receipts[h] = gethReplayResult(t, fmt.Sprintf("receipts_%d.json", h))
		// Per-transaction answers: the recorded ones where there are, else
		// the element of the block's receipts (the README says they agree).
		var elems []json.RawMessage
		if err := json.Unmarshal(g.receipts[h], &elems); err != nil {
			t.Fatal(err)
		}
		for i, e := range elems {
			var r struct{ TransactionHash string }
			if err := json.Unmarshal(e, &r); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("tx_receipts/%d_%d.json", h, i)
			if _, err := os.Stat(filepath.Join(gethReplayDir, name)); err == nil {
				e = gethReplayResult(t, name)
			}
			g.txReceipts[strings.ToLower(r.TransactionHash)] = e
		}
	}
	if len(g.blocks) != 31 {
		t.Fatalf("%d recorded blocks, want 31", len(g.blocks))
	}
	return g
}

func gethReplayResult(t *testing.T, name string) json.RawMessage {
	return chaintest.RecordedResult(t, filepath.Join(gethReplayDir, name))
}

func (g *gethReplay) start(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv
}

func (g *gethReplay) called(method string) int {
	return g.calls.Of(method)
}

type gethRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params []json.RawMessage
}

func (g *gethReplay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.requests.Add(1)
	rpcserve.Serve(w, r, g.answer, nil)
}

func (g *gethReplay) answer(out []byte, req gethRequest) []byte {
	g.calls.Add(req.Method)
	out = rpcserve.OpenAnswer(out, req.ID)
	fail := func(code int, msg string) []byte {
		return fmt.Appendf(out, `,"error":{"code":%d,"message":%q}}`, code, msg)
	}
	result := func(res json.RawMessage, param string) []byte {
		if g.tamper != nil {
			res = g.tamper(req.Method, param, res)
		}
		return append(append(append(out, `,"result":`...), res...), '}')
	}
	var param string
	if len(req.Params) > 0 {
		if err := json.Unmarshal(req.Params[0], &param); err != nil {
			return fail(-32602, "invalid argument 0: hex string without 0x prefix")
		}
	}
	height := func() (uint64, []byte) {
		digits, ok := strings.CutPrefix(param, "0x")
		switch {
		case !ok:
			return 0, fail(-32602, "invalid argument 0: hex string without 0x prefix")
		case len(digits) > 1 && digits[0] == '0':
			return 0, fail(-32602, "invalid argument 0: hex number with leading zero digits")
		}
		h, err := strconv.ParseUint(digits, 16, 64)
		if err != nil {
			return 0, fail(-32602, "invalid argument 0: invalid hex")
		}
		return h, nil
	}
	switch req.Method {
	case "eth_chainId":
		return result(g.chainID, "")
	case "eth_blockNumber":
		return result(g.blockNumber, "")
	case "eth_getBlockByNumber":
		h, bad := height()
		if bad != nil {
			return bad
		}
		if len(req.Params) != 2 || string(req.Params[1]) != "true" {
			return fail(-32602, "the test node only serves full transactions")
		}
		if b, ok := g.blocks[h]; ok {
			return result(b, param)
		}
		return result(json.RawMessage("null"), param)
	case "eth_getBlockReceipts":
		if g.noBlockReceipts {
			return fail(-32601, "the method eth_getBlockReceipts does not exist/is not available")
		}
		h, bad := height()
		if bad != nil {
			return bad
		}
		if rs, ok := g.receipts[h]; ok {
			return result(rs, param)
		}
		return result(json.RawMessage("null"), param)
	case "eth_getTransactionReceipt":
		if rs, ok := g.txReceipts[strings.ToLower(param)]; ok {
			return result(rs, param)
		}
		return result(json.RawMessage("null"), param)
	}
	return fail(-32601, fmt.Sprintf("the method %s does not exist/is not available", req.Method))
}

func newGethRPCSource(t *testing.T, urls ...string) *RPCSource {
	t.Helper()
	c, err := jsonrpc.New(jsonrpc.Config{Endpoints: urls, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
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

type gethRPCExpected struct {
	Heights []struct {
		Height     uint64
		Hash       string
		ParentHash string `json:"parent_hash"`
		NumTxs     int    `json:"num_txs"`
		NumLogs    int    `json:"num_logs"`
	}
}

var gethReplaySpans = [][2]uint64{{0, 9}, {10, 19}, {20, 30}}

func fetchGethReplaySpans(t *testing.T, src *RPCSource) []chain.Block {
	t.Helper()
	var blocks []chain.Block
	for _, span := range gethReplaySpans {
		bs, err := src.Fetch(context.Background(), span[0], span[1])
		if err != nil {
			t.Fatalf("Fetch %v: %v", span, err)
		}
		blocks = append(blocks, bs...)
	}
	if len(blocks) != 31 {
		t.Fatalf("%d blocks, want 31", len(blocks))
	}
	return blocks
}

// The source fetches every recorded block in batches; each record is the
// node's answers byte for byte and decodes to what the node reported.
func TestRPCSourceReplaysGeth(t *testing.T) {
	exp := chaintest.ReadJSON[gethRPCExpected](t, filepath.Join(gethReplayDir, "expected.json"))
	node := newGethReplay(t)
	srv := node.start(t)
	src := newGethRPCSource(t, srv.URL)
	ctx := context.Background()
	if id, err := src.ChainID(ctx); err != nil || id != "1337" {
		t.Fatalf("ChainID = %q, %v", id, err)
	}
	if tip, err := src.Tip(ctx); err != nil || tip != 32 {
		t.Fatalf("Tip = %d, %v", tip, err)
	}
	blocks := fetchGethReplaySpans(t, src)
	if n := node.requests.Load(); n != 2+3 {
		t.Errorf("%d requests, want 2 single calls and one batch per span", n)
	}
	if src.PerTxReceipts() || node.called("eth_getTransactionReceipt") != 0 {
		t.Error("per-transaction receipts used against a node that has eth_getBlockReceipts")
	}
	d := NewDecoder()
	for i, b := range blocks {
		e := exp.Heights[i]
		if b.Height != e.Height {
			t.Fatalf("block %d has height %d", e.Height, b.Height)
		}
		if !bytes.Equal(b.Raw, MarshalRecord(node.blocks[e.Height], node.receipts[e.Height])) {
			t.Fatalf("height %d: raw record is not the node's answers byte for byte", e.Height)
		}
		if got := "0x" + hex.EncodeToString(b.Hash); got != e.Hash {
			t.Errorf("height %d: hash %s, want %s", e.Height, got, e.Hash)
		}
		if got := "0x" + hex.EncodeToString(b.ParentHash); got != e.ParentHash {
			t.Errorf("height %d: parent hash %s, want %s", e.Height, got, e.ParentHash)
		}
		rows := chain.NewRows(d.Tables())
		if err := d.Decode(b.Height, b.Raw, rows); err != nil {
			t.Fatalf("decode %d: %v", b.Height, err)
		}
		if rows.Len(TableBlocks) != 1 || rows.Len(TableTransactions) != e.NumTxs || rows.Len(TableLogs) != e.NumLogs {
			t.Errorf("height %d: %d/%d/%d block/tx/log rows, want 1/%d/%d", e.Height,
				rows.Len(TableBlocks), rows.Len(TableTransactions), rows.Len(TableLogs), e.NumTxs, e.NumLogs)
		}
	}
}

// Against a node without eth_getBlockReceipts the source notices once,
// then fetches receipts per transaction; the records decode to the same
// rows as those built from eth_getBlockReceipts.
func TestRPCSourcePerTxReceiptsFallback(t *testing.T) {
	node := newGethReplay(t)
	node.noBlockReceipts = true
	srv := node.start(t)
	src := newGethRPCSource(t, srv.URL)
	blocks := fetchGethReplaySpans(t, src)

	if !src.PerTxReceipts() {
		t.Error("source did not switch to per-transaction receipts")
	}
	first := int(gethReplaySpans[0][1] - gethReplaySpans[0][0] + 1)
	if n := node.called("eth_getBlockReceipts"); n != first {
		t.Errorf("eth_getBlockReceipts asked %d times, want %d (the first span only)", n, first)
	}
	if n, want := node.called("eth_getTransactionReceipt"), len(node.txReceipts); n != want {
		t.Errorf("eth_getTransactionReceipt asked %d times, want one per transaction (%d)", n, want)
	}
	// Two decoders, so that neither's pooled scratch can be shared by the
	// rows compared.
	dBlock, dTx := NewDecoder(), NewDecoder()
	for _, b := range blocks {
		ref := MarshalRecord(node.blocks[b.Height], node.receipts[b.Height])
		want := chain.NewRows(dBlock.Tables())
		if err := dBlock.Decode(b.Height, ref, want); err != nil {
			t.Fatal(err)
		}
		got := chain.NewRows(dTx.Tables())
		if err := dTx.Decode(b.Height, b.Raw, got); err != nil {
			t.Fatalf("decode per-transaction record %d: %v", b.Height, err)
		}
		for ti := range dBlock.Tables() {
			if !reflect.DeepEqual(got.Table(ti), want.Table(ti)) {
				t.Fatalf("height %d table %d: per-transaction rows differ:\n got %v\nwant %v", b.Height, ti, got.Table(ti), want.Table(ti))
			}
		}
	}
}

// Answers that are not what was asked for fail before they are returned,
// clearly and retryably; a block the node does not have fails at once.
func TestRPCSourceChecksAnswers(t *testing.T) {
	recorded := newGethReplay(t)
	var block4 map[string]json.RawMessage
	if err := json.Unmarshal(recorded.blocks[4], &block4); err != nil {
		t.Fatal(err)
	}
	var txs []struct{ Hash string }
	if err := json.Unmarshal(block4["transactions"], &txs); err != nil || len(txs) != 3 {
		t.Fatalf("block 4 transactions: %v", err)
	}
	hashes, _ := json.Marshal([]string{txs[0].Hash, txs[1].Hash, txs[2].Hash})
	block4["transactions"] = hashes
	hashesOnly, _ := json.Marshal(block4)
	var rcpts4 []json.RawMessage
	if err := json.Unmarshal(recorded.receipts[4], &rcpts4); err != nil {
		t.Fatal(err)
	}
	swapped, _ := json.Marshal([]json.RawMessage{rcpts4[1], rcpts4[0], rcpts4[2]})
	hash4 := []byte(strings.TrimPrefix(string(block4["hash"]), `"0x`)[:64])

	on := func(method, param string, with json.RawMessage) func(string, string, json.RawMessage) json.RawMessage {
		return func(m, p string, res json.RawMessage) json.RawMessage {
			if m == method && p == param {
				return with
			}
			return res
		}
	}
	for _, tc := range []struct {
		name     string
		perTx    bool
		tamper   func(string, string, json.RawMessage) json.RawMessage
		notFound bool
		want     string
	}{
		{name: "receipts of another block", tamper: on("eth_getBlockReceipts", "0x4", recorded.receipts[2]), want: "1 receipts for 3 transactions"},
		{name: "receipts out of order", tamper: on("eth_getBlockReceipts", "0x4", swapped), want: "receipt 0 is of transaction"},
		{name: "receipt with another blockHash", tamper: func(m, p string, res json.RawMessage) json.RawMessage {
			if m == "eth_getBlockReceipts" && p == "0x4" {
				return bytes.Replace(res, hash4, bytes.Repeat([]byte("a"), 64), 1)
			}
			return res
		}, want: "receipt 0 has blockHash 0xaaaa"},
		{name: "per-transaction receipt of another transaction", perTx: true,
			tamper: on("eth_getTransactionReceipt", strings.ToLower(txs[2].Hash), rcpts4[1]), want: "receipt 2 is of transaction"},
		{name: "block of another height", tamper: on("eth_getBlockByNumber", "0x4", recorded.blocks[5]), want: "block number is 5"},
		{name: "hashes instead of transactions", tamper: on("eth_getBlockByNumber", "0x4", hashesOnly), want: "not a transaction object"},
		{name: "malformed hash", tamper: func(m, p string, res json.RawMessage) json.RawMessage {
			if m == "eth_getBlockByNumber" && p == "0x4" {
				return bytes.Replace(res, hash4, hash4[:62], 1)
			}
			return res
		}, want: "not a 0x-prefixed 32-byte hash"},
		{name: "null block", tamper: on("eth_getBlockByNumber", "0x4", json.RawMessage("null")), notFound: true, want: "block 4 is not available yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newGethReplay(t)
			node.noBlockReceipts = tc.perTx
			node.tamper = tc.tamper
			srv := node.start(t)
			src := newGethRPCSource(t, srv.URL)
			_, err := src.Fetch(context.Background(), 3, 5)
			t.Logf("error: %v", err)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "block 4") || !strings.Contains(err.Error(), srv.URL) {
				t.Errorf("error %q does not say %q, the height and the endpoint", err, tc.want)
			}
			if tc.notFound {
				var nf *NotFoundError
				if !errors.As(err, &nf) || nf.Height != 4 || fault.Retryable(err) {
					t.Errorf("want a non-retryable *NotFoundError for block 4, got %v", err)
				}
				return
			}
			var be *BadResponseError
			if !errors.As(err, &be) || be.Height != 4 || !fault.Retryable(err) {
				t.Errorf("want a retryable *BadResponseError for block 4, got %v", err)
			}
		})
	}
}

// A node whose answers are well formed and link up, but whose contents are
// not what the header commits to — a transaction changed, a receipt
// changed, per block or per transaction — is refused with a named
// mismatch: asked again of the other endpoint, which answers the true
// block; or, when every endpoint lies, the error names the last one, the
// height, what is wrong and both values.
func TestRPCSourceRefusesWrongContents(t *testing.T) {
	recorded := newGethReplay(t)
	var rcpts4 []map[string]json.RawMessage
	if err := json.Unmarshal(recorded.receipts[4], &rcpts4); err != nil || len(rcpts4) != 3 {
		t.Fatalf("receipts 4: %v", err)
	}
	var txHash2 string
	json.Unmarshal(rcpts4[2]["transactionHash"], &txHash2)
	txHash2 = strings.ToLower(txHash2)
	changeGas := func(res json.RawMessage) json.RawMessage {
		var r map[string]json.RawMessage
		json.Unmarshal(res, &r)
		r["cumulativeGasUsed"] = json.RawMessage(`"0x1"`)
		out, _ := json.Marshal(r)
		return out
	}
	for _, tc := range []struct {
		name   string
		perTx  bool
		tamper func(method, param string, res json.RawMessage) json.RawMessage
		what   string
	}{
		{name: "a transaction's value", tamper: func(m, p string, res json.RawMessage) json.RawMessage {
			if m == "eth_getBlockByNumber" && p == "0x4" {
				return setDigits(res, bytes.LastIndex(res, []byte(`"value":"0x`)), "123")
			}
			return res
		}, what: "transaction 2 hash"},
		{name: "a receipt's gas", tamper: func(m, p string, res json.RawMessage) json.RawMessage {
			if m == "eth_getBlockReceipts" && p == "0x4" {
				rs := slices.Clone(rcpts4)
				rs[1] = nil // a map of its own, rcpts4's untouched
				json.Unmarshal(changeGas(mustJSON(rcpts4[1])), &rs[1])
				return mustJSON(rs)
			}
			return res
		}, what: "receiptsRoot"},
		{name: "a per-transaction receipt's gas", perTx: true, tamper: func(m, p string, res json.RawMessage) json.RawMessage {
			if m == "eth_getTransactionReceipt" && p == txHash2 {
				return changeGas(res)
			}
			return res
		}, what: "receiptsRoot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			liar := newGethReplay(t)
			liar.noBlockReceipts = tc.perTx
			liar.tamper = tc.tamper
			bad := liar.start(t)
			honest := newGethReplay(t)
			honest.noBlockReceipts = tc.perTx
			good := honest.start(t)

			// Every endpoint lies: a named mismatch.
			_, err := newGethRPCSource(t, bad.URL).Fetch(context.Background(), 3, 5)
			var hm *chain.HashMismatchError
			if !errors.As(err, &hm) {
				t.Fatalf("err = %v, want a *chain.HashMismatchError", err)
			}
			if hm.Height != 4 || hm.What != tc.what || hm.Endpoint != jsonrpc.Redact(bad.URL) || bytes.Equal(hm.Claimed, hm.Computed) || !fault.Retryable(err) {
				t.Fatalf("mismatch %v: want block 4, %q, endpoint %s, two values, retryable", err, tc.what, bad.URL)
			}

			// One of two lies: the other's answer, every time.
			src := newGethRPCSource(t, bad.URL, good.URL)
			before := liar.requests.Load()
			for range 6 {
				blocks, err := src.Fetch(context.Background(), 3, 5)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range blocks {
					if _, err := VerifyBlock(b.Raw); err != nil {
						t.Fatalf("block %d returned: %v", b.Height, err)
					}
				}
			}
			if liar.requests.Load() == before {
				t.Fatal("the lying endpoint was never asked")
			}
		})
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// --verify-blocks chooses what is recomputed: a changed transaction is
// caught only by full verification; a block hash that is not keccak256 of
// its header (as an EVM chain on a CometBFT engine answers, consistently
// in the block, its transactions and receipts) by full and header, and
// accepted as sent by links.
func TestRPCSourceVerificationLevels(t *testing.T) {
	recorded := newGethReplay(t)
	i := bytes.Index(recorded.blocks[5], []byte(`"hash":"0x`)) + len(`"hash":"`)
	trueHash := string(recorded.blocks[5][i : i+66])
	foreign := "0x" + strings.Repeat("ab", 32)
	otherValue := func(m, p string, res json.RawMessage) json.RawMessage {
		if m == "eth_getBlockByNumber" && p == "0x4" {
			return setDigits(res, bytes.LastIndex(res, []byte(`"value":"0x`)), "123")
		}
		return res
	}
	foreignHash := func(m, p string, res json.RawMessage) json.RawMessage {
		if p == "0x5" {
			return bytes.ReplaceAll(res, []byte(trueHash), []byte(foreign))
		}
		return res
	}
	for _, tc := range []struct {
		tamper   func(method, param string, res json.RawMessage) json.RawMessage
		level    chain.Verification
		refused  string // the mismatch's What, "" when accepted
		wantHash string // block 5's hash when accepted
	}{
		{otherValue, chain.VerifyFull, "transaction 2 hash", ""},
		{otherValue, chain.VerifyHeader, "", trueHash},
		{otherValue, chain.VerifyLinks, "", trueHash},
		{foreignHash, chain.VerifyFull, "block hash", ""},
		{foreignHash, chain.VerifyHeader, "block hash", ""},
		{foreignHash, chain.VerifyLinks, "", foreign},
	} {
		liar := newGethReplay(t)
		liar.tamper = tc.tamper
		srv := liar.start(t)
		c, err := jsonrpc.New(jsonrpc.Config{Endpoints: []string{srv.URL}, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		src, err := NewRPCSource(RPCConfig{Client: c, Verify: tc.level})
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := src.Fetch(context.Background(), 3, 5)
		var hm *chain.HashMismatchError
		switch {
		case tc.refused != "" && (!errors.As(err, &hm) || hm.What != tc.refused):
			t.Errorf("level %s: err = %v, want a %s mismatch", tc.level, err, tc.refused)
		case tc.refused == "" && err != nil:
			t.Errorf("level %s: %v, want the blocks as sent", tc.level, err)
		case tc.refused == "" && "0x"+hex.EncodeToString(blocks[2].Hash) != tc.wantHash:
			t.Errorf("level %s: block 5 has hash %x, want %s", tc.level, blocks[2].Hash, tc.wantHash)
		}
	}
}
