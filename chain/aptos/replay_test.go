package aptos_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/blockhaul/blockhaul/chain/aptos"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
)

// The recorded answers (testdata/real, SOURCES.md): whole blocks of Aptos
// mainnet as its fullnodes answered them.
var realBlocks = []uint64{57347454, 445814139, 456015808}

func readReal(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/real/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// envelope is a /v1/blocks answer split into its fields, each kept as sent.
type envelope struct {
	fields map[string]json.RawMessage
	txs    []json.RawMessage
}

func parseEnvelope(t testing.TB, raw []byte) envelope {
	t.Helper()
	e := envelope{}
	if err := json.Unmarshal(raw, &e.fields); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.fields["transactions"], &e.txs); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e envelope) u64(t testing.TB, key string) uint64 {
	t.Helper()
	var s string
	if err := json.Unmarshal(e.fields[key], &s); err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// with returns the answer with transactions txs (nil: null), its other
// fields as sent.
func (e envelope) with(txs []json.RawMessage) []byte {
	m := make(map[string]json.RawMessage, len(e.fields))
	for k, v := range e.fields {
		m[k] = v
	}
	if txs == nil {
		m["transactions"] = json.RawMessage("null")
	} else {
		m["transactions"] = joinJSON(txs)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as a node writes it
	enc.Encode(m)
	return bytes.TrimSpace(b.Bytes())
}

// replay is a local Aptos fullnode serving recorded answers: the ledger
// info, blocks by height (with or without their transactions, at most
// maxBlockTxs of them in a block's answer as a node's
// max_block_transactions_page_size cuts them), and transactions by
// version (/v1/transactions?start=&limit=). Every answer carries the
// X-Aptos-Chain-Id header of chainID.
type replay struct {
	t           testing.TB
	chainID     string
	ledger      []byte
	blocks      map[uint64]envelope
	raw         map[uint64][]byte // the block answers exactly as recorded
	txs         map[uint64]json.RawMessage
	maxBlockTxs int

	mu        sync.Mutex
	paths     []string
	auth      []string
	throttle  int    // 429 to this many requests still
	retryHdr  string // their Retry-After, "" for none
	answerFor map[uint64]uint64
}

func newReplay(t testing.TB, chainID string) *replay {
	return &replay{t: t, chainID: chainID, blocks: map[uint64]envelope{}, raw: map[uint64][]byte{}, txs: map[uint64]json.RawMessage{}, answerFor: map[uint64]uint64{}}
}

// add serves a block answer (raw, as a node sent it) and its transactions.
func (r *replay) add(raw []byte) envelope {
	e := parseEnvelope(r.t, raw)
	h := e.u64(r.t, "block_height")
	first := e.u64(r.t, "first_version")
	r.blocks[h], r.raw[h] = e, raw
	for i, tx := range e.txs {
		r.txs[first+uint64(i)] = tx
	}
	return e
}

// addReal serves a recorded mainnet block and the header of the block
// before it. The recordings hold no answer for the blocks before, so that
// header is assembled: its last version is the one before the block's
// first, its hash a stand-in (SHA-256 of "assembled parent of block N"),
// and it carries no transactions. Nothing of the recorded block is
// changed.
func (r *replay) addReal(h uint64) envelope {
	e := r.add(readReal(r.t, fmt.Sprintf("mainnet_block_%d.json", h)))
	first := e.u64(r.t, "first_version")
	r.blocks[h-1] = envelope{fields: map[string]json.RawMessage{
		"block_height":    json.RawMessage(strconv.Quote(strconv.FormatUint(h-1, 10))),
		"block_hash":      json.RawMessage(strconv.Quote(assembledParentHash(h))),
		"block_timestamp": e.fields["block_timestamp"],
		"first_version":   json.RawMessage(strconv.Quote(strconv.FormatUint(first-1, 10))),
		"last_version":    json.RawMessage(strconv.Quote(strconv.FormatUint(first-1, 10))),
	}}
	return e
}

// joinJSON is a JSON array of values, each as given.
func joinJSON(vs []json.RawMessage) []byte {
	b := []byte{'['}
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ']')
}

func assembledParentHash(h uint64) string {
	s := sha256.Sum256([]byte(fmt.Sprintf("assembled parent of block %d", h)))
	return fmt.Sprintf("0x%x", s)
}

func (r *replay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.RequestURI())
	r.auth = append(r.auth, req.Header.Get("Authorization"))
	throttled := r.throttle > 0
	if throttled {
		r.throttle--
	}
	r.mu.Unlock()
	if throttled {
		if r.retryHdr != "" {
			w.Header().Set("Retry-After", r.retryHdr)
		}
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Aptos-Chain-Id", r.chainID)
	notFound := func(code, msg string) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"message":%q,"error_code":%q,"vm_error_code":null}`, msg, code)
	}
	path := strings.TrimPrefix(req.URL.Path, "/v1")
	switch {
	case path == "" || path == "/":
		w.Write(r.ledger)
	case strings.HasPrefix(path, "/blocks/by_height/"):
		h, err := strconv.ParseUint(strings.TrimPrefix(path, "/blocks/by_height/"), 10, 64)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		if other, ok := r.answerFor[h]; ok {
			h = other
		}
		r.mu.Unlock()
		e, ok := r.blocks[h]
		if !ok {
			notFound("block_not_found", fmt.Sprintf("Block not found by Height(%d)", h))
			return
		}
		switch {
		case req.URL.Query().Get("with_transactions") != "true":
			w.Write(e.with(nil))
		case e.txs == nil:
			r.t.Errorf("replay: block %d is a header only, asked with its transactions", h)
			w.WriteHeader(http.StatusInternalServerError)
		case r.maxBlockTxs > 0 && len(e.txs) > r.maxBlockTxs:
			w.Write(e.with(e.txs[:r.maxBlockTxs]))
		case r.raw[h] != nil:
			w.Write(r.raw[h])
		default:
			w.Write(e.with(e.txs))
		}
	case path == "/transactions":
		q := req.URL.Query()
		start, err1 := strconv.ParseUint(q.Get("start"), 10, 64)
		limit, err2 := strconv.ParseUint(q.Get("limit"), 10, 64)
		if err1 != nil || err2 != nil || limit == 0 || limit > 100 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var out []json.RawMessage
		for v := start; v < start+limit; v++ {
			tx, ok := r.txs[v]
			if !ok {
				break
			}
			out = append(out, tx)
		}
		if out == nil {
			notFound("transaction_not_found", fmt.Sprintf("Transaction not found by Ledger version(%d)", start))
			return
		}
		w.Write(joinJSON(out))
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (r *replay) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

// serve starts r on a local port; the URL is the node's /v1.
func (r *replay) serve(t testing.TB) string {
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// newSource returns a source on endpoints, fast retries.
func newSource(t testing.TB, key string, endpoints ...string) *aptos.Source {
	t.Helper()
	c, err := jsonrpc.New(jsonrpc.Config{Endpoints: endpoints, MaxRetries: 4, BaseBackoff: 1, MaxBackoff: 2, ProbeInterval: 1, MaxProbeInterval: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := aptos.NewSource(aptos.SourceConfig{Client: c, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
