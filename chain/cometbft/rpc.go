package cometbft

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// RPCMaxBatch is the largest JSON-RPC batch a CometBFT node takes with its
// default configuration ([rpc] max_request_batch_size = 10). A larger batch
// is refused whole ("batch request exceeds maximum (10) allowed number of
// requests"), so a client for CometBFT nodes should split at this size
// (jsonrpc.Config.MaxBatch): the parts of one span then go in parallel.
const RPCMaxBatch = 10

// RPCConfig configures an RPCSource.
type RPCConfig struct {
	// Client sends the calls; required. The source does not own it: the
	// caller closes it when done.
	Client *jsonrpc.Client
	// Verify is how much of each block is recomputed (chain.VerifyFull by
	// default; VerifyHeader is the same here, VerifyLinks recomputes
	// nothing).
	Verify chain.Verification
}

// RPCSource fetches blocks from CometBFT nodes over JSON-RPC: for a span of
// heights, one batch of block and block_results calls (the client splits
// it, or sends single calls to an endpoint that refuses batches), joined
// per height into a raw record (MarshalRecord) from the node's result bytes
// as they came.
//
// Every answer is checked before it is returned: the block is the height
// asked for, its hash is a 32-byte hex hash and the hash of its header
// (VerifyBlock, which also checks data_hash against the txs), block_results
// is for the same height. A block that fails verification is asked of the
// other endpoints in turn (jsonrpc.Avoid); when all fail it, the
// *chain.HashMismatchError names the last endpoint that sent it. A height the node no longer has, or above its tip, is an
// immediate error that retrying cannot fix; an answer that fails the checks
// is retryable, since another attempt may reach another node.
//
// An RPCSource is safe for concurrent use and holds no state of its own
// besides the client.
type RPCSource struct {
	c     *jsonrpc.Client
	via   string // the redacted endpoints, for errors no single endpoint can be blamed for
	level chain.Verification
}

// NewRPCSource returns a source that fetches through cfg.Client. It
// contacts nothing.
func NewRPCSource(cfg RPCConfig) (*RPCSource, error) {
	if cfg.Client == nil {
		return nil, errors.New("cometbft: rpc source: no client")
	}
	return &RPCSource{c: cfg.Client, via: strings.Join(cfg.Client.Endpoints(), ", "), level: cfg.Verify}, nil
}

// Family returns chain.FamilyCometBFT.
func (s *RPCSource) Family() chain.Family { return chain.FamilyCometBFT }

type statusResult struct {
	NodeInfo struct {
		Network string `json:"network"`
	} `json:"node_info"`
	SyncInfo struct {
		LatestBlockHeight string `json:"latest_block_height"`
	} `json:"sync_info"`
}

var noRPCParams = json.RawMessage(`{}`)

func (s *RPCSource) status(ctx context.Context) (statusResult, error) {
	var st statusResult
	if err := s.c.Call(ctx, "status", noRPCParams, &st); err != nil {
		return st, fmt.Errorf("cometbft: status: %w", err)
	}
	return st, nil
}

// ChainID returns the node's network name (status node_info.network).
func (s *RPCSource) ChainID(ctx context.Context) (string, error) {
	st, err := s.status(ctx)
	if err != nil {
		return "", err
	}
	if st.NodeInfo.Network == "" {
		return "", &BadResponseError{Via: s.via, Method: "status", Reason: "node_info.network is empty"}
	}
	return st.NodeInfo.Network, nil
}

// Tip returns the node's latest height (status sync_info.latest_block_height).
func (s *RPCSource) Tip(ctx context.Context) (uint64, error) {
	st, err := s.status(ctx)
	if err != nil {
		return 0, err
	}
	h, err := strconv.ParseUint(st.SyncInfo.LatestBlockHeight, 10, 64)
	if err != nil {
		return 0, &BadResponseError{Via: s.via, Method: "status",
			Reason: fmt.Sprintf("sync_info.latest_block_height %q is not a height", st.SyncInfo.LatestBlockHeight)}
	}
	return h, nil
}

// Fetch returns the blocks of heights from..to, in order, each checked to be
// the block asked for.
func (s *RPCSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if to < from {
		return nil, fmt.Errorf("cometbft: fetch: empty range %d-%d", from, to)
	}
	n := int(to - from + 1)
	results := make([]json.RawMessage, 2*n)
	calls := make([]jsonrpc.Call, 2*n)
	for i := range n {
		// The node reads heights as strings only: {"height":5} is refused.
		p := json.RawMessage(`{"height":"` + strconv.FormatUint(from+uint64(i), 10) + `"}`)
		calls[2*i] = jsonrpc.Call{Method: "block", Params: p, Result: &results[2*i]}
		calls[2*i+1] = jsonrpc.Call{Method: "block_results", Params: p, Result: &results[2*i+1]}
	}
	if err := s.c.Batch(ctx, calls); err != nil {
		return nil, fmt.Errorf("cometbft: fetch blocks %d-%d: %w", from, to, err)
	}
	blocks := make([]chain.Block, n)
	for i := range n {
		h := from + uint64(i)
		for _, c := range calls[2*i : 2*i+2] {
			if c.Err != nil {
				return nil, callError(c.Method, h, c.Err)
			}
		}
		b, err := s.block(h, results[2*i], results[2*i+1])
		var hm *chain.HashMismatchError
		if errors.As(err, &hm) {
			hm.Endpoint = calls[2*i].Endpoint
			b, err = s.elsewhere(ctx, h, hm)
		}
		if err != nil {
			return nil, err
		}
		blocks[i] = b
	}
	return blocks, nil
}

// elsewhere fetches height h again from the endpoints that have not yet
// sent a block failing verification (hm is the latest such answer). When
// every endpoint has, or the one that answered is not known, it returns hm:
// the loader's retries may still find a sound answer later, and when they
// run out the job fails naming the block, the endpoint and both hashes.
func (s *RPCSource) elsewhere(ctx context.Context, h uint64, hm *chain.HashMismatchError) (chain.Block, error) {
	if hm.Endpoint == "" || slices.Contains(jsonrpc.Avoided(ctx), hm.Endpoint) {
		return chain.Block{}, hm
	}
	ctx = jsonrpc.Avoid(ctx, hm.Endpoint)
	if len(jsonrpc.Avoided(ctx)) >= len(s.c.Endpoints()) {
		return chain.Block{}, hm
	}
	bs, err := s.Fetch(ctx, h, h)
	if err != nil {
		return chain.Block{}, err
	}
	return bs[0], nil
}

// block checks one height's answers and builds its chain.Block.
func (s *RPCSource) block(h uint64, blockRes, resultsRes json.RawMessage) (chain.Block, error) {
	bad := func(method, format string, args ...any) error {
		return &BadResponseError{Via: s.via, Method: method, Height: h, Reason: fmt.Sprintf(format, args...)}
	}
	if nullResult(blockRes) {
		return chain.Block{}, bad("block", "result is null")
	}
	if nullResult(resultsRes) {
		return chain.Block{}, bad("block_results", "result is null")
	}
	raw := MarshalRecord(blockRes, resultsRes)
	hash, parent, got, err := BlockIdentity(raw)
	if err != nil {
		return chain.Block{}, bad("block", "%s", strings.TrimPrefix(err.Error(), "cometbft: "))
	}
	if got != h {
		return chain.Block{}, bad("block", "block header height is %d", got)
	}
	if len(hash) != 32 {
		return chain.Block{}, bad("block", "block_id.hash has %d bytes, want 32", len(hash))
	}
	if s.level == chain.VerifyLinks {
		// Nothing is recomputed: the chain's hashes are not CometBFT's.
	} else if _, err := VerifyBlock(raw); err != nil {
		var hm *chain.HashMismatchError
		if errors.As(err, &hm) {
			return chain.Block{}, hm
		}
		return chain.Block{}, bad("block", "%s", strings.TrimPrefix(err.Error(), "cometbft: "))
	}
	if parent != nil && len(parent) != 32 {
		return chain.Block{}, bad("block", "header.last_block_id.hash has %d bytes, want 32", len(parent))
	}
	rh, err := resultsHeight(resultsRes)
	if err != nil {
		return chain.Block{}, bad("block_results", "%v", err)
	}
	if rh != h {
		return chain.Block{}, bad("block_results", "height is %d", rh)
	}
	return chain.Block{Height: h, Hash: hash, ParentHash: parent, Raw: raw}, nil
}

func nullResult(b json.RawMessage) bool {
	return len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null"
}

// resultsHeight reads the top-level height of a block_results result. The
// node writes it first, so the decoder stops after a few bytes even on a
// block_results of many megabytes.
func resultsHeight(raw json.RawMessage) (uint64, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, errors.New("result is not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, err
		}
		if tok != "height" {
			continue
		}
		s := string(v)
		if unq, err := strconv.Unquote(s); err == nil {
			s = unq
		}
		h, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("height %s is not a height", v)
		}
		return h, nil
	}
	return 0, errors.New("no height")
}

// ErrUnavailable is matched (errors.Is) by an *UnavailableError.
var ErrUnavailable = errors.New("cometbft: height not available on this node")

// UnavailableError is a height a node does not have and will never have:
// pruned from its block store, or block results it does not keep. Only
// another node (an archive node) can serve it, so it is not retryable.
type UnavailableError struct {
	Endpoint string // redacted
	Method   string // "block" or "block_results"
	Height   uint64
	Lowest   uint64 // lowest height the node keeps, when it said; else 0
	Detail   string // the node's words
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("cometbft: height %d is not available from %s (%s: %s): this range needs an archive node (one that keeps every block and its block results)",
		e.Height, e.Endpoint, e.Method, e.Detail)
}

// Fault marks the error failed: not transient, the node will not have the
// height later.
func (e *UnavailableError) Fault() fault.Class { return fault.Failed }

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// AboveTipError is a height above the node's latest block. The plan never
// asks for one (a range past the tip is refused), so meeting one means the
// node is behind the one that reported the tip.
type AboveTipError struct {
	Endpoint string // redacted
	Method   string
	Height   uint64
	Detail   string // the node's words
}

func (e *AboveTipError) Error() string {
	return fmt.Sprintf("cometbft: height %d is above the latest height of %s (%s: %s)", e.Height, e.Endpoint, e.Method, e.Detail)
}

// Fault marks the error failed: not transient.
func (e *AboveTipError) Fault() fault.Class { return fault.Failed }

// BadResponseError is an answer that is not what was asked for: another
// height, a malformed hash, a null result. The client cannot say which of
// its endpoints answered a call, so Via names them all. It is retryable:
// another attempt may reach a sound node; a node that always answers so
// exhausts the loader's retries.
type BadResponseError struct {
	Via    string // the redacted endpoints
	Method string
	Height uint64 // 0 for status
	Reason string
}

func (e *BadResponseError) Error() string {
	if e.Method == "status" {
		return fmt.Sprintf("cometbft: bad %s answer from %s: %s", e.Method, e.Via, e.Reason)
	}
	return fmt.Sprintf("cometbft: bad %s answer for height %d from %s: %s", e.Method, e.Height, e.Via, e.Reason)
}

// Fault marks the error transient: another attempt may reach a sound node.
func (e *BadResponseError) Fault() fault.Class { return fault.Transient }

// FailedHeight is the height asked for (a fetch charges the failure to it).
func (e *BadResponseError) FailedHeight() uint64 { return e.Height }

var lowestRE = regexp.MustCompile(`lowest height is (\d+)`)

// callError classifies the error of one call for height h. The node says
// what went wrong in the error's data, its message being a generic
// "Internal error".
func callError(method string, h uint64, err error) error {
	var re *jsonrpc.RPCError
	if !errors.As(err, &re) {
		return fmt.Errorf("cometbft: %s %d: %w", method, h, err)
	}
	detail := rpcDetail(re)
	d := strings.ToLower(detail)
	switch {
	case strings.Contains(d, "is not available, lowest height is"),
		// block_results of a node with discard_abci_responses (0.37:
		// "abci responses", 0.38: "finalize block responses"), or of a
		// 0.34 node that has pruned them.
		strings.Contains(d, "not persisting"),
		strings.Contains(d, "could not find results for height"):
		ue := &UnavailableError{Endpoint: re.Endpoint, Method: method, Height: h, Detail: detail}
		if m := lowestRE.FindStringSubmatch(detail); m != nil {
			ue.Lowest, _ = strconv.ParseUint(m[1], 10, 64)
		}
		return ue
	case strings.Contains(d, "must be less than or equal to the current blockchain height"):
		return &AboveTipError{Endpoint: re.Endpoint, Method: method, Height: h, Detail: detail}
	}
	return fmt.Errorf("cometbft: %s %d: %w", method, h, err)
}

// rpcDetail joins an RPC error's message and its data, which CometBFT
// sends as a JSON string.
func rpcDetail(re *jsonrpc.RPCError) string {
	data := strings.TrimSpace(string(re.Data))
	var s string
	if json.Unmarshal(re.Data, &s) == nil {
		data = s
	}
	switch {
	case data == "" || data == "null":
		return re.Message
	case re.Message == "":
		return data
	}
	return re.Message + ": " + data
}
