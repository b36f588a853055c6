// Package faultproxy is a fault-injecting HTTP reverse proxy for JSON-RPC,
// put in front of a test node (chain/jsonrpc/rpctest, bench.RPCServer) to
// see what blockhaul does with a node or network that misbehaves: throttling
// with Retry-After, server errors, answers that never come, truncated
// bodies, connection resets, a block of the wrong height, a block whose
// hash field was rewritten, and refused batches.
//
// Each fault class has a rate (the share of requests it hits) and an
// optional persistent variant: every request that asks for one chosen
// height gets the fault, on every attempt. Which requests a rate hits is
// decided by a hash of the seed, the request body and how many times that
// body has been seen, so a run is reproducible whatever order concurrent
// requests arrive in, and a retry of a faulted request is drawn afresh.
//
// A Proxy is safe for concurrent use; Close stops it and releases every
// request it holds.
package faultproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockhaul/blockhaul/internal/rpcserve"
)

// Class is a kind of fault.
type Class int

const (
	// Throttle answers HTTP 429 with a Retry-After header.
	Throttle Class = iota
	// ServerError answers HTTP 500, 502 or 503.
	ServerError
	// Hang sends nothing until the client gives up or the proxy closes.
	Hang
	// Truncate sends the first half of the node's answer and drops the
	// connection (the body is shorter than its Content-Length), or, drawn
	// at random, a complete response whose body is half a JSON document.
	Truncate
	// Reset drops the connection with a TCP reset before answering.
	Reset
	// WrongHeight rewrites the height of the block in the answer (one
	// above the one asked for).
	WrongHeight
	// WrongHash rewrites one hex digit of the block's hash field.
	WrongHash
	// BatchRefused answers an array body as nodes that do not take batches
	// do: HTTP 400 or a JSON-RPC error object, drawn at random.
	BatchRefused
	numClasses
)

// Classes lists every class, in order.
func Classes() []Class {
	cs := make([]Class, numClasses)
	for i := range cs {
		cs[i] = Class(i)
	}
	return cs
}

var classNames = [...]string{"throttle", "5xx", "hang", "truncate", "reset", "wrong-height", "wrong-hash", "batch-refused"}

func (c Class) String() string {
	if c >= 0 && c < numClasses {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// ParseClass is the inverse of Class.String.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if n == s {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("faultproxy: unknown fault class %q", s)
}

// Config configures a Proxy.
type Config struct {
	// Target is the URL of the node behind the proxy.
	Target string
	// Seed makes the draw of faulted requests reproducible.
	Seed uint64
	// Rates gives each class the share of requests it hits (0..1). The
	// classes are drawn from one number per request, so their rates add
	// up (a sum above 1 is an error).
	Rates map[Class]float64
	// Persistent gives classes that hit every request asking for one
	// height (in any call of a batch), on every attempt.
	Persistent map[Class]uint64
	// RetryAfter is the Retry-After header of a Throttle, in seconds.
	// Default "1".
	RetryAfter string
	// MaxHang bounds a Hang when the client never gives up. Default 2m.
	MaxHang time.Duration
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	*httptest.Server
	cfg    Config
	client *http.Client
	closed chan struct{}
	once   sync.Once

	requests atomic.Int64
	injected [numClasses]atomic.Int64

	mu   sync.Mutex
	seen map[[32]byte]uint64
}

// New starts a Proxy on 127.0.0.1.
func New(cfg Config) (*Proxy, error) {
	if cfg.Target == "" {
		return nil, errors.New("faultproxy: no target")
	}
	var sum float64
	for c, r := range cfg.Rates {
		if c < 0 || c >= numClasses || r < 0 {
			return nil, fmt.Errorf("faultproxy: bad rate %v for %v", r, c)
		}
		sum += r
	}
	if sum > 1 {
		return nil, fmt.Errorf("faultproxy: rates add up to %.2f > 1", sum)
	}
	if cfg.RetryAfter == "" {
		cfg.RetryAfter = "1"
	}
	if cfg.MaxHang <= 0 {
		cfg.MaxHang = 2 * time.Minute
	}
	p := &Proxy{
		cfg:    cfg,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}},
		closed: make(chan struct{}),
		seen:   make(map[[32]byte]uint64),
	}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p, nil
}

// Close releases held requests and stops the proxy.
func (p *Proxy) Close() {
	p.once.Do(func() { close(p.closed) })
	p.Server.CloseClientConnections()
	p.Server.Close()
	p.client.CloseIdleConnections()
}

// Requests is the number of HTTP requests received.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Injected is the number of requests class c was applied to.
func (p *Proxy) Injected(c Class) int64 { return p.injected[c].Load() }

// Summary lists the injected faults, "throttle=3 5xx=1", classes with none
// left out.
func (p *Proxy) Summary() string {
	var parts []string
	for _, c := range Classes() {
		if n := p.Injected(c); n > 0 {
			parts = append(parts, fmt.Sprintf("%v=%d", c, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// call is one JSON-RPC call of a request.
type call struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	height uint64
	hasH   bool
}

// blockMethods are the calls whose answer carries a block's height and hash.
var blockMethods = map[string]bool{"block": true, "eth_getBlockByNumber": true}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	calls, batch := parseCalls(body)
	key := requestKey(body, calls)
	fault, ok := p.choose(key, calls, batch)
	if ok {
		p.injected[fault].Add(1)
	}
	rng := p.rng(key, 1)
	if ok {
		switch fault {
		case Throttle:
			w.Header().Set("Retry-After", p.cfg.RetryAfter)
			writeJSON(w, http.StatusTooManyRequests, errorObject(-32005, "rate limited"))
			return
		case ServerError:
			st := []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}[rng.IntN(3)]
			writeJSON(w, st, errorObject(-32603, http.StatusText(st)))
			return
		case Hang:
			t := time.NewTimer(p.cfg.MaxHang)
			defer t.Stop()
			select {
			case <-r.Context().Done():
			case <-p.closed:
				rpcserve.ResetConn(w) // never an answer, not even an empty one
			case <-t.C:
				rpcserve.ResetConn(w)
			}
			return
		case Reset:
			rpcserve.ResetConn(w)
			return
		case BatchRefused:
			if rng.IntN(2) == 0 {
				writeJSON(w, http.StatusBadRequest, errorObject(-32600, "batch requests are not supported"))
			} else {
				writeJSON(w, http.StatusOK, errorObject(-32600, "batch requests are not supported"))
			}
			return
		}
	}
	status, resp, err := p.forward(r.Context(), r, body)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, errorObject(-32603, "faultproxy: upstream: "+err.Error()))
		return
	}
	if ok {
		switch fault {
		case WrongHeight, WrongHash:
			resp = rewrite(resp, calls, batch, fault, p.target(fault, calls))
		case Truncate:
			half := resp[:len(resp)/2]
			if rng.IntN(2) == 0 {
				writeJSON(w, status, half)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(resp)))
			w.WriteHeader(status)
			w.Write(half)
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			rpcserve.ResetConn(w)
			return
		}
	}
	writeJSON(w, status, resp)
}

// choose decides the fault of a request: a persistent class whose height it
// asks for, else a draw against the rates. Classes that cannot apply to the
// request (a batch refusal of a single call, a rewrite of a request without
// a block answer) are not drawn.
func (p *Proxy) choose(key []byte, calls []call, batch bool) (Class, bool) {
	for _, c := range Classes() {
		h, ok := p.cfg.Persistent[c]
		if !ok || !applies(c, calls, batch) {
			continue
		}
		for _, cl := range calls {
			if cl.hasH && cl.height == h && (!rewrites(c) || blockMethods[cl.Method]) {
				return c, true
			}
		}
	}
	if len(p.cfg.Rates) == 0 {
		return 0, false
	}
	x := p.rng(key, 0).Float64()
	for _, c := range Classes() {
		r := p.cfg.Rates[c]
		if x < r {
			if applies(c, calls, batch) {
				return c, true
			}
			return 0, false
		}
		x -= r
	}
	return 0, false
}

func rewrites(c Class) bool { return c == WrongHeight || c == WrongHash }

func applies(c Class, calls []call, batch bool) bool {
	switch c {
	case BatchRefused:
		return batch
	case WrongHeight, WrongHash:
		for _, cl := range calls {
			if cl.hasH && blockMethods[cl.Method] {
				return true
			}
		}
		return false
	}
	return true
}

// target is the height whose block a rewrite changes: the persistent one
// when the request asks for it, else the first block asked for.
func (p *Proxy) target(c Class, calls []call) uint64 {
	if h, ok := p.cfg.Persistent[c]; ok {
		for _, cl := range calls {
			if cl.hasH && cl.height == h && blockMethods[cl.Method] {
				return h
			}
		}
	}
	for _, cl := range calls {
		if cl.hasH && blockMethods[cl.Method] {
			return cl.height
		}
	}
	return 0
}

// rng returns the generator of a request's draws: seed, what the request
// asks (its calls' methods and params, ids left out, since a client numbers
// its retries afresh), and how many times that has been asked (counted once
// per request, on stream 0).
func (p *Proxy) rng(key []byte, stream uint64) *rand.Rand {
	sum := sha256.Sum256(key)
	var n uint64
	p.mu.Lock()
	if stream == 0 {
		p.seen[sum]++
	}
	n = p.seen[sum]
	p.mu.Unlock()
	k := binary.LittleEndian.Uint64(sum[:8]) ^ n*0x9e3779b97f4a7c15 ^ stream<<32
	return rand.New(rand.NewPCG(p.cfg.Seed, k))
}

func (p *Proxy) forward(ctx context.Context, r *http.Request, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.Target, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// requestKey is what a request asks, without its ids: the body when it
// cannot be read.
func requestKey(body []byte, calls []call) []byte {
	if len(calls) == 0 {
		return body
	}
	var k []byte
	for _, c := range calls {
		k = append(k, c.Method...)
		k = append(k, 0)
		k = append(k, bytes.TrimSpace(c.Params)...)
		k = append(k, 0)
	}
	return k
}

// parseCalls reads the calls of a request body and the height each asks
// for. A body it cannot read yields no calls.
func parseCalls(body []byte) ([]call, bool) {
	b := bytes.TrimSpace(body)
	var calls []call
	batch := len(b) > 0 && b[0] == '['
	if batch {
		if json.Unmarshal(b, &calls) != nil {
			return nil, true
		}
	} else {
		var c call
		if json.Unmarshal(b, &c) != nil {
			return nil, false
		}
		calls = []call{c}
	}
	for i := range calls {
		calls[i].height, calls[i].hasH = paramHeight(calls[i].Params)
	}
	return calls, batch
}

// paramHeight reads the height of a call: {"height": "5"|5} or ["5"|5|"0x5", …].
func paramHeight(params json.RawMessage) (uint64, bool) {
	h, err := rpcserve.ParamHeight(params)
	return h, err == nil
}

// rewrite changes, in the answer to the block call for height h, the
// block's height (WrongHeight) or its hash field (WrongHash), leaving every
// other byte as the node sent it. An answer it cannot find is left alone.
func rewrite(resp []byte, calls []call, batch bool, c Class, h uint64) []byte {
	ids := map[string]string{} // id → method, for the calls asking for h
	for _, cl := range calls {
		if cl.hasH && cl.height == h && blockMethods[cl.Method] {
			ids[string(bytes.TrimSpace(cl.ID))] = cl.Method
		}
	}
	// Locate each response object (one, or the elements of the array).
	var spans [][2]int
	if batch {
		spans = arrayElements(resp)
	} else {
		spans = [][2]int{{0, len(resp)}}
	}
	// Rewrite from the last span backwards so earlier offsets stay valid.
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] > spans[j][0] })
	for _, sp := range spans {
		obj := resp[sp[0]:sp[1]]
		idSpan, ok := locate(obj, "id")
		if !ok {
			continue
		}
		method, ok := ids[string(obj[idSpan[0]:idSpan[1]])]
		if !ok {
			continue
		}
		var path []string
		switch {
		case method == "block" && c == WrongHash:
			path = []string{"result", "block_id", "hash"}
		case method == "block":
			path = []string{"result", "block", "header", "height"}
		case c == WrongHash:
			path = []string{"result", "hash"}
		default:
			path = []string{"result", "number"}
		}
		vs, ok := locate(obj, path...)
		if !ok {
			continue
		}
		old := obj[vs[0]:vs[1]]
		var nv []byte
		if c == WrongHash {
			nv = flipHex(old)
		} else {
			nv = shiftHeight(old)
		}
		if nv == nil {
			continue
		}
		out := make([]byte, 0, len(resp)+len(nv)-len(old))
		out = append(out, resp[:sp[0]+vs[0]]...)
		out = append(out, nv...)
		out = append(out, resp[sp[0]+vs[1]:]...)
		resp = out
	}
	return resp
}

// flipHex changes the last hex digit of a JSON string value, keeping its
// case.
func flipHex(v []byte) []byte {
	out := bytes.Clone(v)
	for i := len(out) - 2; i >= 1; i-- {
		switch c := out[i]; {
		case c >= '0' && c <= '9':
			out[i] = '0' + (c-'0'+1)%10
			return out
		case c >= 'a' && c <= 'f':
			out[i] = 'a' + (c-'a'+1)%6
			return out
		case c >= 'A' && c <= 'F':
			out[i] = 'A' + (c-'A'+1)%6
			return out
		}
	}
	return nil
}

// shiftHeight returns the JSON value of a height one above v's, in v's form
// ("5", 5 or "0x5").
func shiftHeight(v []byte) []byte {
	s := string(v)
	quoted := strings.HasPrefix(s, `"`)
	s = strings.Trim(s, `"`)
	if rest, ok := strings.CutPrefix(s, "0x"); ok {
		n, err := strconv.ParseUint(rest, 16, 64)
		if err != nil {
			return nil
		}
		return []byte(`"0x` + strconv.FormatUint(n+1, 16) + `"`)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil
	}
	if quoted {
		return []byte(`"` + strconv.FormatUint(n+1, 10) + `"`)
	}
	return []byte(strconv.FormatUint(n+1, 10))
}

// locate returns the byte span of the value at path in the JSON object b.
func locate(b []byte, path ...string) ([2]int, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for depth, key := range path {
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return [2]int{}, false
		}
		found := false
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return [2]int{}, false
			}
			if t == key {
				found = true
				break
			}
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return [2]int{}, false
			}
		}
		if !found {
			return [2]int{}, false
		}
		if depth == len(path)-1 {
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return [2]int{}, false
			}
			end := int(dec.InputOffset())
			return [2]int{end - len(v), end}, true
		}
	}
	return [2]int{}, false
}

// arrayElements returns the byte spans of the elements of the JSON array b.
func arrayElements(b []byte) [][2]int {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return nil
	}
	var spans [][2]int
	for dec.More() {
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return spans
		}
		end := int(dec.InputOffset())
		spans = append(spans, [2]int{end - len(v), end})
	}
	return spans
}

func errorObject(code int, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	return b
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
