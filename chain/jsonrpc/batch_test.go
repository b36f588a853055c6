package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/internal/rpctest"
)

// numbered builds n calls whose params are [i], results kept raw.
func numbered(n int) ([]Call, []json.RawMessage) {
	calls := make([]Call, n)
	results := make([]json.RawMessage, n)
	for i := range calls {
		calls[i] = Call{Method: "echo", Params: []int{i}, Result: &results[i]}
	}
	return calls, results
}

func checkEchoed(t *testing.T, calls []Call, results []json.RawMessage) {
	t.Helper()
	for i := range calls {
		if calls[i].Err != nil {
			t.Errorf("call %d: %v", i, calls[i].Err)
			continue
		}
		if want := fmt.Sprintf("[%d]", i); string(results[i]) != want {
			t.Errorf("call %d: result %s, want %s", i, results[i], want)
		}
	}
}

func TestCallKeepsResultBytes(t *testing.T) {
	const block = `{"hash":"0xabc","number":"0x10","txs":[{"z":1,"a":2}],"extra":null}`
	s := newServer(t, rpctest.Config{Handler: func(method string, params json.RawMessage) (any, *rpctest.Error) {
		if method != "eth_getBlockByNumber" || string(params) != `["0x10",true]` {
			return nil, &rpctest.Error{Code: -32602, Message: "bad call " + method + string(params)}
		}
		return json.RawMessage(block), nil
	}})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})

	var raw json.RawMessage
	if err := c.Call(context.Background(), "eth_getBlockByNumber", []any{"0x10", true}, &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw) != block {
		t.Errorf("raw result %s, want it verbatim: %s", raw, block)
	}
	var typed struct{ Hash, Number string }
	if err := c.Call(context.Background(), "eth_getBlockByNumber", json.RawMessage(`["0x10",true]`), &typed); err != nil {
		t.Fatal(err)
	}
	if typed.Hash != "0xabc" || typed.Number != "0x10" {
		t.Errorf("typed result %+v", typed)
	}
}

func TestCallGzip(t *testing.T) {
	s := newServer(t, rpctest.Config{Gzip: true})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})
	callEcho(t, c, "compressed")
	if s.Gzipped() != 1 {
		t.Errorf("server sent %d gzip responses, want 1 (client must accept gzip)", s.Gzipped())
	}
}

func TestBatchMatchesShuffledResponsesByID(t *testing.T) {
	s := newServer(t, rpctest.Config{Shuffle: true, Seed: 7})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}, MaxBatch: 100})
	calls, results := numbered(60)
	if err := c.Batch(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	checkEchoed(t, calls, results)
	if s.Batches() != 1 || s.Requests() != 1 {
		t.Errorf("server saw %d requests, %d batches; want one batch", s.Requests(), s.Batches())
	}
}

func TestBatchPerCallErrors(t *testing.T) {
	s := newServer(t, rpctest.Config{Handler: func(_ string, params json.RawMessage) (any, *rpctest.Error) {
		var p []int
		json.Unmarshal(params, &p)
		if p[0]%3 == 0 {
			return nil, &rpctest.Error{Code: -32000, Message: "height " + strconv.Itoa(p[0]) + " is not available"}
		}
		return params, nil
	}})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})
	calls, results := numbered(10)
	if err := c.Batch(context.Background(), calls); err != nil {
		t.Fatalf("Batch returned %v; per-call errors belong in Call.Err", err)
	}
	for i := range calls {
		if i%3 != 0 {
			if calls[i].Err != nil || string(results[i]) != fmt.Sprintf("[%d]", i) {
				t.Errorf("call %d: err %v result %s", i, calls[i].Err, results[i])
			}
			continue
		}
		var re *RPCError
		if !errors.As(calls[i].Err, &re) {
			t.Fatalf("call %d: err %v, want *RPCError", i, calls[i].Err)
		}
		if re.Code != -32000 || re.Message != fmt.Sprintf("height %d is not available", i) || re.Endpoint != c.Endpoints()[0] {
			t.Errorf("call %d: %+v", i, re)
		}
		if fault.Retryable(calls[i].Err) {
			t.Errorf("call %d: application error classified retryable", i)
		}
		assertNoSecrets(t, "error", calls[i].Err.Error())
	}
	if s.Requests() != 1 {
		t.Errorf("server saw %d requests; per-call errors must not be retried", s.Requests())
	}
}

func TestBatchSplitsAtMaxBatch(t *testing.T) {
	s := newServer(t, rpctest.Config{})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}, MaxBatch: 10})
	calls, results := numbered(35)
	if err := c.Batch(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	checkEchoed(t, calls, results)
	sizes := s.BatchSizes()
	total := 0
	for _, n := range sizes {
		if n > 10 {
			t.Errorf("batch of %d sent, MaxBatch is 10", n)
		}
		total += n
	}
	if len(sizes) != 4 || total != 35 {
		t.Errorf("batch sizes %v, want 4 batches of 35 calls in all", sizes)
	}
}

func TestBatchRefusedFallsBackToSinglesAndRemembers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy rpctest.BatchPolicy
	}{
		{"http 400", rpctest.BatchRefuseHTTP},
		{"rpc error object", rpctest.BatchRefuseRPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, rpctest.Config{Batch: tc.policy})
			c, logs := newClient(t, Config{Endpoints: []string{credURL(s)}})
			for round := 1; round <= 2; round++ {
				calls, results := numbered(8)
				if err := c.Batch(context.Background(), calls); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				checkEchoed(t, calls, results)
				if s.Batches() != 1 {
					t.Errorf("round %d: server saw %d batches; the refusal must be remembered", round, s.Batches())
				}
				if want := int64(8 * round); s.Calls() != want {
					t.Errorf("round %d: %d single calls answered, want %d", round, s.Calls(), want)
				}
			}
			if st := c.Stats()[0]; st.Batches {
				t.Errorf("stats say the endpoint takes batches: %+v", st)
			}
			if !contains(logs.String(), "refuses batches") {
				t.Errorf("refusal not logged:\n%s", logs)
			}
		})
	}
}

func TestBatchShrinksWhenTooLarge(t *testing.T) {
	s := newServer(t, rpctest.Config{MaxBatch: 8})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}, MaxBatch: 32})
	calls, results := numbered(32)
	if err := c.Batch(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	checkEchoed(t, calls, results)
	if st := c.Stats()[0]; st.BatchSize > 8 || !st.Healthy {
		t.Errorf("after 413s: %+v, want batch size <= 8 and healthy", st)
	}
	refusedBefore := countOver(s.BatchSizes(), 8)
	if refusedBefore != 2 {
		t.Errorf("batch sizes %v: want exactly 32 and 16 refused before settling at 8", s.BatchSizes())
	}
	calls, results = numbered(32)
	if err := c.Batch(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	checkEchoed(t, calls, results)
	if n := countOver(s.BatchSizes(), 8); n != refusedBefore {
		t.Errorf("second batch sent %d oversized batches again; sizes %v", n-refusedBefore, s.BatchSizes())
	}
}

func countOver(sizes []int, limit int) int {
	n := 0
	for _, s := range sizes {
		if s > limit {
			n++
		}
	}
	return n
}

func TestBatchSendsLoneCallAsSingle(t *testing.T) {
	s := newServer(t, rpctest.Config{})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})
	calls, results := numbered(1)
	if err := c.Batch(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	checkEchoed(t, calls, results)
	if s.Batches() != 0 {
		t.Errorf("a batch of one went out as an array")
	}
}

func TestBatchUnencodableParams(t *testing.T) {
	s := newServer(t, rpctest.Config{})
	c, _ := newClient(t, Config{Endpoints: []string{credURL(s)}})
	var ok json.RawMessage
	calls := []Call{
		{Method: "echo", Params: []int{1}, Result: &ok},
		{Method: "bad", Params: func() {}},
	}
	err := c.Batch(context.Background(), calls)
	if err == nil || calls[1].Err == nil || calls[0].Err != nil || string(ok) != "[1]" {
		t.Fatalf("Batch: %v; calls: %v / %v", err, calls[0].Err, calls[1].Err)
	}
	if s.Calls() != 1 {
		t.Errorf("server answered %d calls, want only the encodable one", s.Calls())
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// CometBFT answers a batch above its limit (10 by default) with one error
// object whose data, not message, says so: the client shrinks its batches
// instead of giving up on batching.
func TestBatchShrinksOnCometBFTBatchLimit(t *testing.T) {
	var sizes []int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var reqs []struct {
			ID     json.RawMessage `json:"id"`
			Params json.RawMessage `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &reqs); err != nil {
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"singles not expected"}}`))
			return
		}
		mu.Lock()
		sizes = append(sizes, len(reqs))
		mu.Unlock()
		if len(reqs) > 10 {
			w.Write([]byte(`{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request","data":"batch request exceeds maximum (10) allowed number of requests"}}`))
			return
		}
		out := make([]string, len(reqs))
		for i, q := range reqs {
			out[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, q.ID, q.Params)
		}
		w.Write([]byte("[" + strings.Join(out, ",") + "]"))
	}))
	defer srv.Close()
	c, _ := newClient(t, Config{Endpoints: []string{srv.URL}, MaxBatch: 32})
	calls := make([]Call, 24)
	results := make([]json.RawMessage, 24)
	for i := range calls {
		calls[i] = Call{Method: "echo", Params: []int{i}, Result: &results[i]}
	}
	if err := c.Batch(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		if calls[i].Err != nil || string(results[i]) != fmt.Sprintf("[%d]", i) {
			t.Fatalf("call %d: %v %s", i, calls[i].Err, results[i])
		}
	}
	if st := c.Stats()[0]; !st.Batches || st.BatchSize > 10 {
		t.Fatalf("after the limit: %+v, want batches of at most 10", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if countOver(sizes, 10) == 0 || countOver(sizes, 10) > 2 {
		t.Fatalf("batch sizes %v", sizes)
	}
}
