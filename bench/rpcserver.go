package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/rpcserve"
	"github.com/blockhaul/blockhaul/loader"
	"golang.org/x/sync/errgroup"
)

// RPCServer is a stand-in node on 127.0.0.1 that answers JSON-RPC 2.0 POSTs
// (single calls and batch arrays) for a fixed range of heights. Every
// block's answers are rendered before the server starts, so serving a call
// costs little more than copying bytes: what a client reaches against it is
// the ceiling of the machine, not of the server.
//
// It answers as the family's nodes do (family.Node): CometBFT's status,
// block, block_results (params {"height":"5"}, {"height":5} or ["5"]);
// EVM's eth_chainId, eth_blockNumber, net_version, eth_getBlockByNumber,
// eth_getBlockReceipts (params ["0x5", ...]).
//
// An RPCServer is safe for concurrent use; Close stops it and waits for its
// goroutines.
type RPCServer struct {
	node     *family.Node // how the family's nodes answer
	chainID  string
	from, to uint64
	// parts[h-from] holds block h's two results: /block and /block_results
	// for CometBFT, the block and its receipts for EVM.
	parts    [][2][]byte
	listener net.Listener
	srv      *http.Server
	served   chan struct{}

	requests atomic.Int64
	calls    atomic.Int64
	bytesOut atomic.Int64
}

// maxRequestBytes bounds a request body: a batch of a few thousand calls.
const maxRequestBytes = 4 << 20

// NewRPCServer renders the answers for heights [from, to] of src (a
// synthetic source, normally) and starts serving them on a free port of
// 127.0.0.1.
func NewRPCServer(ctx context.Context, src loader.Source, from, to uint64) (*RPCServer, error) {
	fam := family.Of(src.Family())
	if fam == nil || fam.Node.Info == nil {
		return nil, fmt.Errorf("bench: rpc server: unsupported chain family %s (its nodes do not speak JSON-RPC)", src.Family())
	}
	if to < from {
		return nil, fmt.Errorf("bench: rpc server: empty range %d-%d", from, to)
	}
	chainID, err := src.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: rpc server: chain id: %w", err)
	}
	s := &RPCServer{node: &fam.Node, chainID: chainID, from: from, to: to, parts: make([][2][]byte, to-from+1), served: make(chan struct{})}
	if err := s.render(ctx, src); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: rpc server: listen: %w", err)
	}
	s.listener = ln
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
}

// render splits every record of the range into the node's two answers,
// generating chunks of heights in parallel.
func (s *RPCServer) render(ctx context.Context, src loader.Source) error {
	const chunk = 256
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(2, runtime.NumCPU()))
	for lo := s.from; lo <= s.to; lo += chunk {
		hi := min(lo+chunk-1, s.to)
		g.Go(func() error {
			blocks, err := src.Fetch(gctx, lo, hi)
			if err != nil {
				return fmt.Errorf("bench: rpc server: generate %d-%d: %w", lo, hi, err)
			}
			for _, b := range blocks {
				if b.Height < lo || b.Height > hi {
					return fmt.Errorf("bench: rpc server: source returned height %d for %d-%d", b.Height, lo, hi)
				}
				p, err := splitRecord(s.node, b.Raw)
				if err != nil {
					return fmt.Errorf("bench: rpc server: block %d: %w", b.Height, err)
				}
				s.parts[b.Height-s.from] = p
			}
			return nil
		})
		if hi == s.to {
			break
		}
	}
	return g.Wait()
}

// splitRecord returns the two node answers a raw record embeds, under the
// keys of node's calls: {"block":…,"block_results":…} for CometBFT,
// {"block":…,"receipts":…} for EVM.
func splitRecord(node *family.Node, raw []byte) ([2][]byte, error) {
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rec); err != nil {
		return [2][]byte{}, fmt.Errorf("raw record: %w", err)
	}
	first, second := node.Calls[0].Field, node.Calls[1].Field
	a, b := rec[first], rec[second]
	if a == nil || b == nil {
		return [2][]byte{}, fmt.Errorf("raw record lacks %q or %q", first, second)
	}
	return [2][]byte{a, b}, nil
}

// URL is the server's endpoint, http://127.0.0.1:port/.
func (s *RPCServer) URL() string { return "http://" + s.listener.Addr().String() + "/" }

// Requests returns the HTTP requests and JSON-RPC calls served so far and
// the bytes of response bodies sent.
func (s *RPCServer) Requests() (requests, calls, bytesOut int64) {
	return s.requests.Load(), s.calls.Load(), s.bytesOut.Load()
}

// Close stops the server and waits until it no longer serves.
func (s *RPCServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.served
	return err
}

// rpcCall is one call of a request, id kept byte for byte.
type rpcCall struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// rpcAnswer is a call's answer: result bytes or an error.
type rpcAnswer struct {
	id     json.RawMessage
	result []byte
	code   int
	msg    string
	data   string
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (s *RPCServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "JSON-RPC over POST only", http.StatusMethodNotAllowed)
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() { buf.Reset(); bufPool.Put(buf) }()
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, maxRequestBytes+1)); err != nil {
		http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if buf.Len() > maxRequestBytes {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	body := bytes.TrimSpace(buf.Bytes())
	batch := len(body) > 0 && body[0] == '['
	var calls []rpcCall
	var err error
	if batch {
		err = json.Unmarshal(body, &calls)
	} else {
		calls = make([]rpcCall, 1)
		err = json.Unmarshal(body, &calls[0])
	}
	if err != nil || (batch && len(calls) == 0) {
		s.writeAnswers(w, false, []rpcAnswer{{id: json.RawMessage("null"), code: -32700, msg: "Parse error"}})
		return
	}
	s.calls.Add(int64(len(calls)))
	answers := make([]rpcAnswer, len(calls))
	for i, c := range calls {
		answers[i] = s.answer(c)
	}
	s.writeAnswers(w, batch, answers)
}

// writeAnswers writes the response with its exact Content-Length, copying
// the pre-rendered results straight into the connection's buffer.
func (s *RPCServer) writeAnswers(w http.ResponseWriter, batch bool, answers []rpcAnswer) {
	heads := make([][]byte, len(answers))
	n := 0
	for i, a := range answers {
		id := a.id
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		h := make([]byte, 0, 48+len(id))
		h = append(h, `{"jsonrpc":"2.0","id":`...)
		h = append(h, id...)
		if a.result != nil {
			h = append(h, `,"result":`...)
		} else {
			e, _ := json.Marshal(struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Data    string `json:"data,omitempty"`
			}{a.code, a.msg, a.data})
			h = append(h, `,"error":`...)
			h = append(h, e...)
		}
		heads[i] = h
		n += len(h) + len(a.result) + 1
	}
	if batch {
		n += 2 + max(0, len(answers)-1)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	if batch {
		_, _ = io.WriteString(w, "[")
	}
	for i, a := range answers {
		if batch && i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		_, _ = w.Write(heads[i])
		if a.result != nil {
			_, _ = w.Write(a.result)
		}
		_, _ = io.WriteString(w, "}")
	}
	if batch {
		_, _ = io.WriteString(w, "]")
	}
	s.bytesOut.Add(int64(n))
}

var resultNull = []byte("null")

func (s *RPCServer) answer(c rpcCall) rpcAnswer {
	a := rpcAnswer{id: c.ID}
	fail := func(code int, msg, data string) rpcAnswer {
		a.code, a.msg, a.data = code, msg, data
		return a
	}
	part := -1
	for i, nc := range s.node.Calls {
		if nc.Method == c.Method {
			part = i
		}
	}
	if part < 0 {
		result, found, err := s.node.Info(c.Method, s.chainID, s.from, s.to)
		if err != nil {
			return fail(-32603, "Internal error", err.Error())
		}
		if found {
			a.result = result
			return a
		}
	}
	if part < 0 {
		return fail(-32601, "Method not found", c.Method)
	}
	h, err := rpcserve.ParamHeight(c.Params)
	if err != nil {
		return fail(-32602, "Invalid params", err.Error())
	}
	if h < s.from || h > s.to {
		if s.node.AbsentIsNull {
			a.result = resultNull // what geth answers for a block it does not have
			return a
		}
		return fail(-32603, "Internal error", fmt.Sprintf("height %d is not available, served heights are %d to %d", h, s.from, s.to))
	}
	a.result = s.parts[h-s.from][part]
	return a
}
