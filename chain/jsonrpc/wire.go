package jsonrpc

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// request is one call ready to be written: method and params are encoded
// once, when the call is accepted, and reused on every attempt.
type request struct {
	call   *Call
	method []byte // JSON string
	params []byte // JSON value, nil to omit
}

func newRequest(call *Call) (request, error) {
	method, err := json.Marshal(call.Method)
	if err != nil {
		return request{}, err
	}
	r := request{call: call, method: method}
	switch p := call.Params.(type) {
	case nil:
	case json.RawMessage:
		r.params = p
	default:
		if r.params, err = json.Marshal(p); err != nil {
			return request{}, err
		}
	}
	return r, nil
}

// asked names what r asks for in a log line or an error: the method and
// its params, cut at 80 bytes.
func asked(r request) string {
	p := string(r.params)
	if len(p) > 80 {
		p = p[:80] + "…"
	}
	if p == "" {
		return r.call.Method
	}
	return r.call.Method + " " + p
}

// appendRequest writes r as a JSON-RPC 2.0 request object with id.
func appendRequest(b *bytes.Buffer, r request, id uint64) {
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	var num [20]byte
	b.Write(strconv.AppendUint(num[:0], id, 10))
	b.WriteString(`,"method":`)
	b.Write(r.method)
	if r.params != nil {
		b.WriteString(`,"params":`)
		b.Write(r.params)
	}
	b.WriteByte('}')
}

// response is one JSON-RPC response object, as encoding/json reads it for
// the small bodies of failed requests (peekRPCError). Successful bodies are
// split by splitSingle and splitBatch instead.
type response struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// parseID reads a response id as the client wrote it: a number, or the
// same number quoted by servers that echo ids as strings.
func parseID(raw []byte) (uint64, bool) {
	s := raw
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	id, err := strconv.ParseUint(string(s), 10, 64)
	return id, err == nil
}

// decodeResult stores a result, a slice of the response buffer, into the
// call's target: a copy of the bytes for a *json.RawMessage (the one copy
// they get; the buffer goes back to the pool), else json.Unmarshal, which
// keeps none of its input.
func decodeResult(raw []byte, target any) error {
	if raw == nil {
		raw = null
	}
	switch t := target.(type) {
	case nil:
		return nil
	case *json.RawMessage:
		*t = bytes.Clone(raw)
		return nil
	}
	return json.Unmarshal(raw, target)
}

// null stands for an absent result.
var null = []byte("null")

// firstByte returns the first non-whitespace byte of b, or 0.
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// Buffers for responses. Nothing parsed out of a response aliases its
// buffer once parsing is done (results are copied or unmarshalled), so a
// buffer is free again as soon as it is parsed. Huge ones are dropped
// rather than kept alive. Request bodies are not pooled: the transport may
// still read one after Do returns.
var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBuffer = 16 << 20

func getBuffer() *bytes.Buffer { return bufferPool.Get().(*bytes.Buffer) }

func putBuffer(b *bytes.Buffer) {
	if b == nil || b.Cap() > maxPooledBuffer {
		return
	}
	b.Reset()
	bufferPool.Put(b)
}

// parseRetryAfter reads a Retry-After value, delay-seconds or an HTTP date,
// as a duration from now. It returns 0 when absent, malformed or past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
