// Package rpctest runs a JSON-RPC 2.0 server over HTTP for tests of
// blockhaul's RPC clients and sources, with faults injected on a
// deterministic schedule: throttling with Retry-After, server errors,
// responses that never come, truncated bodies, refused batches, connection
// resets and a server that dies after N requests. It counts what it
// receives so tests can assert on traffic, not on timing.
package rpctest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/blockhaul/blockhaul/internal/rpcserve"
)

// Error is a JSON-RPC error object, as a Handler returns it.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// Handler answers one call. The result is marshalled with encoding/json (a
// json.RawMessage is sent as is); a non-nil *Error is sent instead of it.
// It is called concurrently.
type Handler func(method string, params json.RawMessage) (result any, err *Error)

// Echo answers every call with its params.
func Echo(_ string, params json.RawMessage) (any, *Error) {
	if params == nil {
		return nil, nil
	}
	return params, nil
}

// FaultKind is what a Fault does to a request.
type FaultKind int

const (
	// None serves the request normally.
	None FaultKind = iota
	// Status answers with HTTP Fault.Status (and Fault.RetryAfter as
	// Retry-After when set) and a JSON-RPC error body.
	Status
	// Hang sends nothing until the client gives up (its context ends or
	// it closes the connection): a response slower than any timeout.
	Hang
	// Truncate serves the response with its body cut in half.
	Truncate
	// Reset closes the connection with a TCP reset and no response.
	Reset
	// RPCError answers with one JSON-RPC error object (Fault.Code,
	// Fault.Message; Retry-After when set), whatever the request was.
	RPCError
)

// Fault is what happens to one request.
type Fault struct {
	Kind       FaultKind
	Status     int    // for Status
	RetryAfter string // Retry-After header, for Status and RPCError
	Code       int    // for RPCError
	Message    string // for RPCError
}

// Schedule returns the fault for the n-th request the server receives
// (n from 1, counting every HTTP request). It must be deterministic in n and
// safe for concurrent use; the helpers below are.
type Schedule func(n int64) Fault

// Sequence gives the i-th request faults[i-1] and later ones none.
func Sequence(faults ...Fault) Schedule {
	return func(n int64) Fault {
		if n >= 1 && n <= int64(len(faults)) {
			return faults[n-1]
		}
		return Fault{}
	}
}

// Always gives every request f.
func Always(f Fault) Schedule { return func(int64) Fault { return f } }

// Every gives every k-th request f (k, 2k, ...).
func Every(k int64, f Fault) Schedule {
	return func(n int64) Fault {
		if k > 0 && n%k == 0 {
			return f
		}
		return Fault{}
	}
}

// Random gives each request f with probability p, decided by a hash of
// seed and the request number alone, so a run is reproducible whatever
// the order requests arrive in.
func Random(seed uint64, p float64, f Fault) Schedule {
	return func(n int64) Fault {
		r := rand.New(rand.NewPCG(seed, uint64(n)))
		if r.Float64() < p {
			return f
		}
		return Fault{}
	}
}

// BatchPolicy is how the server treats an array body.
type BatchPolicy int

const (
	// BatchAccept answers batches.
	BatchAccept BatchPolicy = iota
	// BatchRefuseHTTP answers an array body with HTTP 400.
	BatchRefuseHTTP
	// BatchRefuseRPC answers an array body with one JSON-RPC error object
	// saying batches are not supported.
	BatchRefuseRPC
)

// Config configures a Server.
type Config struct {
	Handler Handler // default Echo
	Faults  Schedule
	Batch   BatchPolicy
	// MaxBatch, when > 0, answers larger batches with HTTP 413.
	MaxBatch int
	// Shuffle sends a batch's responses in an order drawn from Seed.
	Shuffle bool
	Seed    uint64
	// DieAfter, when > 0, kills the server (see Kill) at request
	// DieAfter+1, which gets a connection reset.
	DieAfter int64
	// Gzip compresses responses for clients that accept gzip.
	Gzip bool
}

// Server is a running JSON-RPC test server. Its counters are safe to read
// at any time. Close it when done (it embeds *httptest.Server).
type Server struct {
	*httptest.Server
	cfg Config

	requests, batches, calls atomic.Int64
	gzipped                  atomic.Int64
	inFlight, maxInFlight    atomic.Int64
	dead                     atomic.Bool
	killOnce                 sync.Once
	shuffleN                 atomic.Uint64

	mu      sync.Mutex
	methods map[string]int64
	sizes   []int
}

// NewServer starts a Server.
func NewServer(cfg Config) *Server {
	if cfg.Handler == nil {
		cfg.Handler = Echo
	}
	s := &Server{cfg: cfg, methods: make(map[string]int64)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Requests is the number of HTTP requests received, faulted ones included.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Batches is the number of array bodies received, refused ones included.
func (s *Server) Batches() int64 { return s.batches.Load() }

// Calls is the number of calls answered by the Handler.
func (s *Server) Calls() int64 { return s.calls.Load() }

// MethodCalls is the number of calls of method answered by the Handler.
func (s *Server) MethodCalls(method string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.methods[method]
}

// BatchSizes lists the length of every array body received, in order.
func (s *Server) BatchSizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.sizes...)
}

// Gzipped is the number of responses sent gzip-compressed.
func (s *Server) Gzipped() int64 { return s.gzipped.Load() }

// MaxInFlight is the most requests the server has held at once.
func (s *Server) MaxInFlight() int64 { return s.maxInFlight.Load() }

// Kill makes the server die: it stops accepting connections, drops the
// open ones, and resets any request that still reaches it.
func (s *Server) Kill() {
	s.stopListening()
	s.CloseClientConnections()
}

// stopListening marks the server dead and closes its listener, so that a
// client seeing the server die can only get "connection refused" next.
func (s *Server) stopListening() {
	s.killOnce.Do(func() {
		s.dead.Store(true)
		s.Listener.Close()
	})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	in := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxInFlight.Load()
		if in <= m || s.maxInFlight.CompareAndSwap(m, in) {
			break
		}
	}
	if s.cfg.DieAfter > 0 && n > s.cfg.DieAfter {
		s.stopListening()
		rpcserve.ResetConn(w)
		s.Kill()
		return
	}
	if s.dead.Load() {
		rpcserve.ResetConn(w)
		return
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		return
	}
	var fault Fault
	if s.cfg.Faults != nil {
		fault = s.cfg.Faults(n)
	}
	switch fault.Kind {
	case Status:
		if fault.RetryAfter != "" {
			w.Header().Set("Retry-After", fault.RetryAfter)
		}
		s.writeJSON(w, r, fault.Status, errorObject(fault.Status, http.StatusText(fault.Status)))
		return
	case Hang:
		<-r.Context().Done()
		return
	case Reset:
		rpcserve.ResetConn(w)
		return
	case RPCError:
		if fault.RetryAfter != "" {
			w.Header().Set("Retry-After", fault.RetryAfter)
		}
		s.writeJSON(w, r, http.StatusOK, errorObject(fault.Code, fault.Message))
		return
	}

	out, status := s.answer(body.Bytes())
	if fault.Kind == Truncate {
		out = out[:len(out)/2]
	}
	s.writeJSON(w, r, status, out)
}

// answer computes the response body to a request body.
func (s *Server) answer(body []byte) ([]byte, int) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		var req message
		if err := json.Unmarshal(trimmed, &req); err != nil {
			return errorObject(-32700, "parse error"), http.StatusOK
		}
		return mustMarshal(s.call(req)), http.StatusOK
	}
	s.batches.Add(1)
	var reqs []message
	if err := json.Unmarshal(trimmed, &reqs); err != nil {
		return errorObject(-32700, "parse error"), http.StatusOK
	}
	s.mu.Lock()
	s.sizes = append(s.sizes, len(reqs))
	s.mu.Unlock()
	switch {
	case s.cfg.Batch == BatchRefuseHTTP:
		return errorObject(-32600, "batch requests are not supported"), http.StatusBadRequest
	case s.cfg.Batch == BatchRefuseRPC:
		return errorObject(-32600, "batch requests are not supported"), http.StatusOK
	case s.cfg.MaxBatch > 0 && len(reqs) > s.cfg.MaxBatch:
		return errorObject(-32600, "batch too large"), http.StatusRequestEntityTooLarge
	}
	resps := make([]reply, 0, len(reqs))
	for _, req := range reqs {
		if req.ID != nil {
			resps = append(resps, s.call(req))
		}
	}
	if s.cfg.Shuffle {
		r := rand.New(rand.NewPCG(s.cfg.Seed, s.shuffleN.Add(1)))
		r.Shuffle(len(resps), func(i, j int) { resps[i], resps[j] = resps[j], resps[i] })
	}
	return mustMarshal(resps), http.StatusOK
}

type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

func (s *Server) call(req message) reply {
	result, rpcErr := s.cfg.Handler(req.Method, req.Params)
	s.calls.Add(1)
	s.mu.Lock()
	s.methods[req.Method]++
	s.mu.Unlock()
	rep := reply{JSONRPC: "2.0", ID: req.ID}
	if rpcErr != nil {
		rep.Error = rpcErr
	} else if result == nil {
		rep.Result = json.RawMessage("null")
	} else {
		rep.Result = result
	}
	return rep
}

func errorObject(code int, msg string) []byte {
	return mustMarshal(reply{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &Error{Code: code, Message: msg}})
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a Handler's result can fail to marshal: the test is wrong.
		panic("rpctest: marshal response: " + err.Error())
	}
	return b
}

func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if s.cfg.Gzip && acceptsGzip(r) {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(body)
		zw.Close()
		body = zb.Bytes()
		h.Set("Content-Encoding", "gzip")
		s.gzipped.Add(1)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, enc := range strings.Split(v, ",") {
			if strings.TrimSpace(strings.SplitN(enc, ";", 2)[0]) == "gzip" {
				return true
			}
		}
	}
	return false
}
