package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/rpctest"
)

// node answers block calls of both families with a small block whose
// height, number and hash fields the proxy rewrites.
func node(t *testing.T) *rpctest.Server {
	t.Helper()
	srv := rpctest.NewServer(rpctest.Config{Handler: func(method string, params json.RawMessage) (any, *rpctest.Error) {
		h, ok := paramHeight(params)
		if !ok {
			return nil, &rpctest.Error{Code: -32602, Message: "no height"}
		}
		switch method {
		case "block":
			return json.RawMessage(fmt.Sprintf(`{"block_id":{"hash":"%064X","parts":{"hash":"AA"}},"block":{"header":{"height":"%d","last_block_id":{"hash":"%064X"}}}}`, h, h, h-1)), nil
		case "block_results":
			return json.RawMessage(fmt.Sprintf(`{"height":"%d"}`, h)), nil
		case "eth_getBlockByNumber":
			return json.RawMessage(fmt.Sprintf(`{"number":"0x%x","hash":"0x%064x","parentHash":"0x%064x"}`, h, h, h-1)), nil
		}
		return nil, &rpctest.Error{Code: -32601, Message: "method not found"}
	}})
	t.Cleanup(srv.Close)
	return srv
}

func start(t *testing.T, cfg Config) *Proxy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func post(t *testing.T, url, body string, timeout time.Duration) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

func single(method string, h uint64) string {
	if method == "block" {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"block","params":{"height":"%d"}}`, h)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":["0x%x",true]}`, method, h)
}

func batch(from, to uint64) string {
	var parts []string
	id := 1
	for h := from; h <= to; h++ {
		parts = append(parts, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"block","params":{"height":"%d"}}`, id, h),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"block_results","params":{"height":"%d"}}`, id+1, h))
		id += 2
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestEachClassDoesWhatItSays(t *testing.T) {
	up := node(t)
	clean := func(body string) []byte {
		a := post(t, up.URL, body, 5*time.Second)
		if a.err != nil || a.status != 200 {
			t.Fatalf("upstream: %v %d", a.err, a.status)
		}
		return a.body
	}
	for _, c := range Classes() {
		t.Run(c.String(), func(t *testing.T) {
			p := start(t, Config{Target: up.URL, Rates: map[Class]float64{c: 1}, RetryAfter: "7", MaxHang: time.Minute})
			body := single("block", 5)
			if c == BatchRefused {
				body = batch(5, 6)
			}
			a := post(t, p.URL, body, 500*time.Millisecond)
			want := clean(body)
			switch c {
			case Throttle:
				if a.status != 429 || a.header.Get("Retry-After") != "7" {
					t.Fatalf("status %d Retry-After %q", a.status, a.header.Get("Retry-After"))
				}
			case ServerError:
				if a.status < 500 || a.status > 599 {
					t.Fatalf("status %d", a.status)
				}
			case Hang:
				if !errors.Is(a.err, context.DeadlineExceeded) {
					t.Fatalf("hang ended with %v, status %d", a.err, a.status)
				}
			case Truncate:
				if a.err == nil && (json.Valid(a.body) || len(a.body) != len(want)/2) {
					t.Fatalf("truncated answer is %d bytes of %d, valid %v", len(a.body), len(want), json.Valid(a.body))
				}
			case Reset:
				if a.err == nil {
					t.Fatalf("reset answered %d", a.status)
				}
			case WrongHeight:
				if a.err != nil || !bytes.Equal(a.body, bytes.Replace(want, []byte(`"height":"5"`), []byte(`"height":"6"`), 1)) || bytes.Equal(a.body, want) {
					t.Fatalf("got %s\nfrom %s", a.body, want)
				}
			case WrongHash:
				if a.err != nil || len(a.body) != len(want) || bytes.Equal(a.body, want) {
					t.Fatalf("got %s\nfrom %s", a.body, want)
				}
				if d := diffAt(a.body, want); d < 0 || !bytes.Contains(want[:d+1], []byte(`"block_id":{"hash":"`)) || bytes.Contains(want[:d], []byte(`"parts"`)) {
					t.Fatalf("changed byte %d, outside block_id.hash: %s", d, a.body)
				}
			case BatchRefused:
				if a.err != nil || bytes.Contains(a.body, []byte(`"result"`)) || !bytes.Contains(a.body, []byte("batch")) {
					t.Fatalf("got %d %s", a.status, a.body)
				}
				// A single call passes.
				if s := post(t, p.URL, single("block", 5), time.Second); s.err != nil || !bytes.Equal(s.body, clean(single("block", 5))) {
					t.Fatalf("single call through a batch-refusing proxy: %v %s", s.err, s.body)
				}
			}
			if p.Injected(c) != 1 {
				t.Fatalf("Injected(%v) = %d, want 1", c, p.Injected(c))
			}
		})
	}
}

func diffAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func TestRewritesInBatchesTouchOnlyTheTargetBlock(t *testing.T) {
	up := node(t)
	p := start(t, Config{Target: up.URL, Persistent: map[Class]uint64{WrongHeight: 7}})
	body := batch(5, 9)
	want := post(t, up.URL, body, 5*time.Second).body
	got := post(t, p.URL, body, 5*time.Second)
	// block_results keeps its height; only block 7's header changes.
	exp := bytes.Replace(want, []byte(`"header":{"height":"7"`), []byte(`"header":{"height":"8"`), 1)
	if got.err != nil || !bytes.Equal(got.body, exp) || bytes.Equal(exp, want) {
		t.Fatalf("got %s\nwant %s", got.body, exp)
	}

	p2 := start(t, Config{Target: up.URL, Persistent: map[Class]uint64{WrongHash: 3}})
	evm := single("eth_getBlockByNumber", 3)
	want = post(t, up.URL, evm, 5*time.Second).body
	got = post(t, p2.URL, evm, 5*time.Second)
	if got.err != nil || len(got.body) != len(want) || bytes.Equal(got.body, want) {
		t.Fatalf("got %s\nwant %s", got.body, want)
	}
	if d := diffAt(got.body, want); !bytes.HasSuffix(want[:d], []byte(`"hash":"0x`+strings.Repeat("0", 63))) {
		t.Fatalf("changed byte %d is not the hash's last digit: %s", d, got.body)
	}
	if other := post(t, p2.URL, single("eth_getBlockByNumber", 4), 5*time.Second); !bytes.Equal(other.body, post(t, up.URL, single("eth_getBlockByNumber", 4), 5*time.Second).body) {
		t.Fatalf("height 4 changed: %s", other.body)
	}
}

func TestPersistentHitsOneHeightOnEveryAttempt(t *testing.T) {
	up := node(t)
	p := start(t, Config{Target: up.URL, Persistent: map[Class]uint64{ServerError: 42}})
	for attempt := range 5 {
		if a := post(t, p.URL, batch(40, 43), time.Second); a.status < 500 {
			t.Fatalf("attempt %d at the persistent height: status %d", attempt, a.status)
		}
		if a := post(t, p.URL, batch(44, 47), time.Second); a.status != 200 {
			t.Fatalf("attempt %d elsewhere: status %d", attempt, a.status)
		}
	}
	if p.Injected(ServerError) != 5 || p.Requests() != 10 {
		t.Fatalf("injected %d of %d requests", p.Injected(ServerError), p.Requests())
	}
}

// TestRatesAreSeededAndFresh checks that the draw is reproducible from the
// seed whatever the ids, that it hits close to the rate, and that a retry of
// a faulted request is drawn again rather than failing forever.
func TestRatesAreSeededAndFresh(t *testing.T) {
	up := node(t)
	draw := func(seed uint64, idOffset int) []bool {
		p := start(t, Config{Target: up.URL, Seed: seed, Rates: map[Class]float64{ServerError: 0.2}})
		var hit []bool
		for h := uint64(1); h <= 300; h++ {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"block","params":{"height":"%d"}}`, int(h)+idOffset, h)
			hit = append(hit, post(t, p.URL, body, time.Second).status >= 500)
		}
		return hit
	}
	a, b, c := draw(1, 0), draw(1, 1000), draw(2, 0)
	n, same, other := 0, 0, 0
	for i := range a {
		if a[i] {
			n++
		}
		if a[i] == b[i] {
			same++
		}
		if a[i] == c[i] {
			other++
		}
	}
	if same != len(a) {
		t.Errorf("same seed, other ids: %d of %d draws agree", same, len(a))
	}
	if other == len(a) {
		t.Errorf("another seed drew the same faults")
	}
	if n < 35 || n > 85 {
		t.Errorf("rate 0.2 hit %d of 300", n)
	}
	// Retrying one request: some attempts fail, and one soon passes.
	p := start(t, Config{Target: up.URL, Seed: 1, Rates: map[Class]float64{Reset: 0.5}})
	ok := false
	for range 30 {
		if post(t, p.URL, single("block", 9), time.Second).err == nil {
			ok = true
			break
		}
	}
	if !ok {
		t.Fatal("30 retries of one request all reset at rate 0.5")
	}
}

func TestConfigRejectsRatesAboveOne(t *testing.T) {
	if _, err := New(Config{Target: "http://127.0.0.1:1", Rates: map[Class]float64{Hang: 0.6, Reset: 0.6}}); err == nil {
		t.Fatal("rates adding up to 1.2 accepted")
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("no target accepted")
	}
	for _, c := range Classes() {
		if got, err := ParseClass(c.String()); err != nil || got != c {
			t.Fatalf("ParseClass(%q) = %v, %v", c.String(), got, err)
		}
	}
}

func TestCloseReleasesHangingRequests(t *testing.T) {
	up := node(t)
	p := start(t, Config{Target: up.URL, Rates: map[Class]float64{Hang: 1}, MaxHang: time.Hour})
	done := make(chan answer, 1)
	go func() { done <- post(t, p.URL, single("block", 1), time.Hour) }()
	for p.Requests() == 0 {
		time.Sleep(time.Millisecond) // waiting for the request to arrive, not for a result
	}
	p.Close()
	select {
	case a := <-done:
		if a.err == nil && a.status == 200 {
			t.Fatalf("hung request answered: %s", a.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close left a hanging request held")
	}
}
