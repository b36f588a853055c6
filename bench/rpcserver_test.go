package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

func newTestServer(t *testing.T, fam chain.Family, from, to uint64) *RPCServer {
	t.Helper()
	srv, err := NewRPCServer(context.Background(), newSynthetic(fam, 7), from, to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

type answer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    string `json:"data"`
	} `json:"error"`
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestRPCServerCometBFTBatch(t *testing.T) {
	srv := newTestServer(t, chain.FamilyCometBFT, 5, 20)
	syn := newSynthetic(chain.FamilyCometBFT, 7).(*cometbftsynth.Synthetic)
	status, body := post(t, srv.URL(), string(appendBatchRequest(nil, chain.FamilyCometBFT, 6, 9)))
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var got []answer
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("response is not a JSON array: %v", err)
	}
	if len(got) != 8 {
		t.Fatalf("%d answers, want 8", len(got))
	}
	for i := 0; i < len(got); i += 2 {
		h := uint64(6 + i/2)
		if string(got[i].ID) != strconv.Itoa(i+1) || string(got[i+1].ID) != strconv.Itoa(i+2) {
			t.Fatalf("ids %s %s, want %d %d", got[i].ID, got[i+1].ID, i+1, i+2)
		}
		// The two answers must rebuild the synthetic record byte for byte.
		if rec := cometbft.MarshalRecord(got[i].Result, got[i+1].Result); !bytes.Equal(rec, syn.Block(h).Raw) {
			t.Fatalf("height %d: block + block_results do not rebuild the raw record", h)
		}
	}
	req, calls, sent := srv.Requests()
	if req != 1 || calls != 8 || sent != int64(len(body)) {
		t.Errorf("counters: %d requests, %d calls, %d bytes; want 1, 8, %d", req, calls, sent, len(body))
	}
}

func TestRPCServerSingleCallsAndErrors(t *testing.T) {
	srv := newTestServer(t, chain.FamilyCometBFT, 5, 20)
	tests := []struct {
		name, body string
		wantCode   int    // 0: a result
		wantIn     string // in the result or the error data
	}{
		{"status", `{"jsonrpc":"2.0","id":"s","method":"status"}`, 0, `"latest_block_height":"20"`},
		{"height as number", `{"jsonrpc":"2.0","id":1,"method":"block","params":{"height":7}}`, 0, `"height":"7"`},
		{"height positional", `{"jsonrpc":"2.0","id":1,"method":"block_results","params":["8"]}`, 0, `"height":"8"`},
		{"below range", `{"jsonrpc":"2.0","id":1,"method":"block","params":{"height":"4"}}`, -32603, "height 4 is not available"},
		{"above range", `{"jsonrpc":"2.0","id":1,"method":"block","params":{"height":"21"}}`, -32603, "height 21"},
		{"bad height", `{"jsonrpc":"2.0","id":1,"method":"block","params":{"height":"x"}}`, -32602, "height"},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"block"}`, -32602, "no height"},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`, -32601, "eth_blockNumber"},
		{"not JSON", `{"jsonrpc":`, -32700, ""},
		{"empty batch", `[]`, -32700, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, srv.URL(), tc.body)
			if status != http.StatusOK {
				t.Fatalf("HTTP %d", status)
			}
			var a answer
			if err := json.Unmarshal(body, &a); err != nil {
				t.Fatalf("not one JSON-RPC answer: %v: %s", err, body)
			}
			switch {
			case tc.wantCode == 0 && (a.Error != nil || !strings.Contains(string(a.Result), tc.wantIn)):
				t.Fatalf("want a result containing %q, got %s", tc.wantIn, body)
			case tc.wantCode != 0 && (a.Error == nil || a.Error.Code != tc.wantCode || !strings.Contains(a.Error.Data, tc.wantIn)):
				t.Fatalf("want error %d mentioning %q, got %s", tc.wantCode, tc.wantIn, body)
			}
		})
	}
	resp, err := http.Get(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: HTTP %d, want 405", resp.StatusCode)
	}
}

func TestRPCServerEVM(t *testing.T) {
	srv := newTestServer(t, chain.FamilyEVM, 1, 6)
	syn := newSynthetic(chain.FamilyEVM, 7).(*evmsynth.Synthetic)
	_, body := post(t, srv.URL(), `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber"},`+
		`{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["0x3",true]},{"jsonrpc":"2.0","id":4,"method":"eth_getBlockReceipts","params":["0x3"]},`+
		`{"jsonrpc":"2.0","id":5,"method":"eth_getBlockByNumber","params":["0x7",true]}]`)
	var got []answer
	if err := json.Unmarshal(body, &got); err != nil || len(got) != 5 {
		t.Fatalf("answers %v: %s", err, body)
	}
	if string(got[0].Result) != `"0x7a69"` || string(got[1].Result) != `"0x6"` {
		t.Errorf("chain id %s, block number %s", got[0].Result, got[1].Result)
	}
	if rec := evm.MarshalRecord(got[2].Result, got[3].Result); !bytes.Equal(rec, syn.Block(3).Raw) {
		t.Error("block 3 and its receipts do not rebuild the raw record")
	}
	if string(got[4].Result) != "null" || got[4].Error != nil {
		t.Errorf("block above the range: %s, want null as geth answers", body)
	}
}

func TestMinimalFetchCountsEverySpan(t *testing.T) {
	srv := newTestServer(t, chain.FamilyCometBFT, 1, 100)
	run, err := minimalFetch(context.Background(), srv.URL(), chain.FamilyCometBFT, 1, 100, 3, 16)
	if err != nil {
		t.Fatal(err)
	}
	req, calls, sent := srv.Requests()
	if run.Blocks != 100 || run.Requests != 7 || req != 7 || calls != 200 {
		t.Errorf("run %+v; server saw %d requests, %d calls; want 7 requests of 200 calls", run, req, calls)
	}
	if run.MBPerSec*run.Seconds*1e6 < float64(sent)*0.99 {
		t.Errorf("client read %.0f bytes, server sent %d", run.MBPerSec*run.Seconds*1e6, sent)
	}
	if _, err := minimalFetch(context.Background(), srv.URL(), chain.FamilyCometBFT, 90, 110, 2, 16); err != nil {
		t.Errorf("a span partly above the range should still be served (as errors): %v", err)
	}
}

// The fetch section's blockhaul side: each family's RPC source over the
// server, into a real staging store, stages exactly the synthetic chain.
func TestFetchThroughServerStagesTheSyntheticChain(t *testing.T) {
	for _, fam := range []chain.Family{chain.FamilyCometBFT, chain.FamilyEVM} {
		t.Run(fam.String(), func(t *testing.T) {
			srv := newTestServer(t, fam, 1, 40)
			src, err := RPCSource(fam, 4)(srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer src.(interface{ Close() }).Close()
			store := stagingtest.Open(t, t.TempDir(), staging.Options{})
			defer store.Close()
			st, err := loader.Fetch(context.Background(), src, store, 1, 40, loader.Config{Workers: 4, Span: 8}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Blocks != 40 {
				t.Fatalf("staged %d blocks", st.Blocks)
			}
			syn := newSynthetic(fam, 7)
			for _, h := range []uint64{1, 2, 33, 40} {
				b, err := store.Get(h)
				if err != nil {
					t.Fatal(err)
				}
				want, err := syn.Fetch(context.Background(), h, h)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b.Raw, want[0].Raw) || !bytes.Equal(b.Hash, want[0].Hash) {
					t.Fatalf("height %d: staged block differs from the synthetic one", h)
				}
			}
		})
	}
}
