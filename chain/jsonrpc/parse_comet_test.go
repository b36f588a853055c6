package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
)

// cometBatchBody renders the batch response a CometBFT node sends for
// heights 1..span (block and block_results of each, ids 1..2*span), from
// the synthetic chain, in the node's envelope.
func cometBatchBody(tb testing.TB, span int) []byte {
	tb.Helper()
	syn := cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 1})
	var body []byte
	body = append(body, '[')
	id := 1
	for h := 1; h <= span; h++ {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(syn.Block(uint64(h)).Raw, &rec); err != nil {
			tb.Fatal(err)
		}
		for _, part := range []string{"block", "block_results"} {
			if id > 1 {
				body = append(body, ',')
			}
			body = append(body, `{"jsonrpc":"2.0","id":`...)
			body = strconv.AppendInt(body, int64(id), 10)
			body = append(body, `,"result":`...)
			body = append(body, rec[part]...)
			body = append(body, '}')
			id++
		}
	}
	return append(body, ']')
}

// TestParseBatchCometBody parses a realistic batch response and checks the
// raw results against encoding/json, then cuts the body short at many
// points: no cut body may answer any call.
func TestParseBatchCometBody(t *testing.T) {
	const span = 16
	body := cometBatchBody(t, span)
	var want []struct {
		ID     int
		Result json.RawMessage
	}
	if err := json.Unmarshal(body, &want); err != nil || len(want) != 2*span {
		t.Fatalf("reference decode: %d responses, %v", len(want), err)
	}
	results := make([]json.RawMessage, 2*span)
	calls := make([]jsonrpc.Call, 2*span)
	for i := range calls {
		calls[i] = jsonrpc.Call{Method: "block", Result: &results[i]}
	}
	if n, err := jsonrpc.ParseBatchBody(body, calls); n != 0 || err != nil {
		t.Fatalf("%d calls unanswered: %v", n, err)
	}
	for _, w := range want {
		if got := results[w.ID-1]; !bytes.Equal(got, w.Result) {
			t.Errorf("id %d: result of %d bytes differs from encoding/json's (%d bytes)", w.ID, len(got), len(w.Result))
		}
	}
	for cut := 0; cut < len(body); cut += len(body)/500 + 1 {
		clear(results)
		n, err := jsonrpc.ParseBatchBody(body[:cut], calls)
		if err == nil || n != len(calls) {
			t.Fatalf("body cut at %d of %d bytes: %d calls unanswered, err %v; want all, and an error", cut, len(body), n, err)
		}
		for i := range results {
			if results[i] != nil {
				t.Fatalf("body cut at %d: call %d got a result", cut, i)
			}
		}
	}
}

// BenchmarkParseBatch parses one span's batch response of blocks and block
// results, as the CometBFT source asks for them: kept raw (copied out of
// the response buffer), or discarded (the scan alone).
func BenchmarkParseBatch(b *testing.B) {
	const span = 16
	body := cometBatchBody(b, span)
	for _, keep := range []bool{true, false} {
		name := "raw"
		if !keep {
			name = "discard"
		}
		b.Run(name, func(b *testing.B) {
			results := make([]json.RawMessage, 2*span)
			calls := make([]jsonrpc.Call, 2*span)
			for i := range calls {
				calls[i] = jsonrpc.Call{Method: "block"}
				if keep {
					calls[i].Result = &results[i]
				}
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if n, err := jsonrpc.ParseBatchBody(body, calls); n != 0 || err != nil {
					b.Fatalf("%d calls unanswered: %v", n, err)
				}
			}
			b.StopTimer()
			for i := range results {
				if keep && len(results[i]) == 0 || calls[i].Err != nil {
					b.Fatalf("call %d: result %d bytes, err %v", i, len(results[i]), calls[i].Err)
				}
			}
		})
	}
}
