// Package rpcserve is what the programs that answer JSON-RPC as a node would
// share (the test servers, the fault proxy, bench's node): reading a
// call's height and dropping a connection with a TCP reset.
package rpcserve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// ParamHeight reads the height of a call: {"height": "5"|5} or ["5"|5|"0x5", …].
func ParamHeight(params json.RawMessage) (uint64, error) {
	p := bytes.TrimSpace(params)
	var v json.RawMessage
	switch {
	case len(p) > 0 && p[0] == '{':
		var o struct {
			Height json.RawMessage `json:"height"`
		}
		if err := json.Unmarshal(p, &o); err != nil {
			return 0, err
		}
		v = o.Height
	case len(p) > 0 && p[0] == '[':
		var arr []json.RawMessage
		if err := json.Unmarshal(p, &arr); err != nil {
			return 0, err
		}
		if len(arr) > 0 {
			v = arr[0]
		}
	}
	if len(v) == 0 {
		return 0, errors.New("no height")
	}
	str := string(v)
	if str[0] == '"' {
		if err := json.Unmarshal(v, &str); err != nil {
			return 0, err
		}
	}
	var h uint64
	var err error
	if rest, ok := strings.CutPrefix(str, "0x"); ok {
		h, err = strconv.ParseUint(rest, 16, 64)
	} else {
		h, err = strconv.ParseUint(str, 10, 64)
	}
	if err != nil {
		return 0, fmt.Errorf("height %s: %w", v, err)
	}
	return h, nil
}

// ResetConn drops the connection under w with a TCP reset, so the client
// sees "connection reset by peer" rather than a clean close. It ends the
// handler by panicking with http.ErrAbortHandler when w cannot be hijacked.
func ResetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// Serve answers the JSON-RPC body of r, one call or a batch, as a node
// would: each call, decoded into a C, is answered by answer, which
// appends the call's response to out; a batch's responses go out as one
// array, in the calls' order. onBatch, if not nil, sees a batch's calls
// first and may answer it itself (returning true): a node that refuses
// batches, or one too large. A body that is not JSON is answered 400.
func Serve[C any](w http.ResponseWriter, r *http.Request, answer func(out []byte, call C) []byte, onBatch func(w http.ResponseWriter, calls []C) bool) {
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	b := bytes.TrimSpace(body.Bytes())
	if len(b) > 0 && b[0] == '[' {
		var calls []C
		if err := json.Unmarshal(b, &calls); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if onBatch != nil && onBatch(w, calls) {
			return
		}
		out := []byte{'['}
		for i, c := range calls {
			if i > 0 {
				out = append(out, ',')
			}
			out = answer(out, c)
		}
		w.Write(append(out, ']'))
		return
	}
	var c C
	if err := json.Unmarshal(b, &c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Write(answer(nil, c))
}

// MethodCalls counts the calls a server answered, by method. Its zero
// value is ready; it is safe for concurrent use.
type MethodCalls struct {
	mu sync.Mutex
	n  map[string]int
}

// Add counts one call of method.
func (c *MethodCalls) Add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[method]++
}

// Of is how many calls of method were counted.
func (c *MethodCalls) Of(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// OpenAnswer appends the start of the response to the call id,
// `{"jsonrpc":"2.0","id":<id>`; the caller appends the result or error
// member and the closing brace.
func OpenAnswer(out []byte, id json.RawMessage) []byte {
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	return append(out, id...)
}
