package evm

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// RPCConfig configures an RPCSource.
type RPCConfig struct {
	// Client sends the calls; required. The source does not own it: the
	// caller closes it when done.
	Client *jsonrpc.Client
	// Logger is told once when the source falls back to per-transaction
	// receipts. Default: discard.
	Logger *slog.Logger
	// Verify is how much of each block is recomputed (chain.VerifyFull by
	// default; see chain.Verification).
	Verify chain.Verification
}

// RPCSource fetches blocks from Ethereum JSON-RPC nodes. For a span of
// heights it sends one batch of eth_getBlockByNumber (full transactions)
// and eth_getBlockReceipts calls, and joins each height's two results, byte
// for byte, into a raw record (MarshalRecord).
//
// A node without eth_getBlockReceipts is detected at its first refusal
// (method not found): from then on the source asks for the blocks alone and
// then for every transaction's receipt (eth_getTransactionReceipt), in one
// more batch per span. The client cannot tell which endpoint answered, so
// the choice is made for the whole source: with mixed endpoints, per-
// transaction receipts are correct everywhere, only slower.
//
// Every answer is checked before it is returned: the block is the height
// asked for, its hashes are well formed, it carries full transactions,
// there is one receipt per transaction, in order, each naming the block's
// hash, and the record is what its header commits to (VerifyBlock: the
// block hash, every transaction's hash, the transactions, withdrawals and
// receipts roots). A span with a block that fails VerifyBlock is asked of
// the other endpoints in turn, and when all fail it the
// *chain.HashMismatchError names the last endpoint that sent it. A block the node does not have (a null result) is an immediate
// error; an answer that fails the checks is retryable, since another
// attempt may reach a sound node.
//
// An RPCSource is safe for concurrent use.
type RPCSource struct {
	c     *jsonrpc.Client
	log   *slog.Logger
	via   string      // the redacted endpoints, for errors no single endpoint can be blamed for
	perTx atomic.Bool // some endpoint lacks eth_getBlockReceipts
	level chain.Verification
}

// NewRPCSource returns a source that fetches through cfg.Client. It
// contacts nothing.
func NewRPCSource(cfg RPCConfig) (*RPCSource, error) {
	if cfg.Client == nil {
		return nil, errors.New("evm: rpc source: no client")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &RPCSource{c: cfg.Client, log: log, via: strings.Join(cfg.Client.Endpoints(), ", "), level: cfg.Verify}, nil
}

// Family returns chain.FamilyEVM.
func (s *RPCSource) Family() chain.Family { return chain.FamilyEVM }

// PerTxReceipts reports whether the source has fallen back to fetching
// receipts one transaction at a time.
func (s *RPCSource) PerTxReceipts() bool { return s.perTx.Load() }

var noRPCParams = json.RawMessage(`[]`)

// ChainID returns eth_chainId as a decimal string ("1" for mainnet).
func (s *RPCSource) ChainID(ctx context.Context) (string, error) {
	id, err := s.quantity(ctx, "eth_chainId")
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(id, 10), nil
}

// Tip returns eth_blockNumber.
func (s *RPCSource) Tip(ctx context.Context) (uint64, error) {
	return s.quantity(ctx, "eth_blockNumber")
}

func (s *RPCSource) quantity(ctx context.Context, method string) (uint64, error) {
	var q string
	if err := s.c.Call(ctx, method, noRPCParams, &q); err != nil {
		return 0, fmt.Errorf("evm: %s: %w", method, err)
	}
	v, err := parseHexQuantity(q)
	if err != nil {
		return 0, &BadResponseError{Via: s.via, Method: method, Reason: fmt.Sprintf("result %q: %v", q, err)}
	}
	return v, nil
}

// parseHexQuantity reads a JSON-RPC quantity: 0x and 1 to 16 hex digits.
func parseHexQuantity(q string) (uint64, error) {
	digits, ok := strings.CutPrefix(q, "0x")
	if !ok || digits == "" || len(digits) > 16 {
		return 0, errors.New("not a 0x-prefixed quantity")
	}
	return strconv.ParseUint(digits, 16, 64)
}

// hexQuantity formats h as the node wants it: 0x-hex without leading zeros.
func hexQuantity(h uint64) string { return "0x" + strconv.FormatUint(h, 16) }

// Fetch returns the blocks of heights from..to, in order, each checked to be
// the block asked for.
func (s *RPCSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if to < from {
		return nil, fmt.Errorf("evm: fetch: empty range %d-%d", from, to)
	}
	n := int(to - from + 1)
	perTx := s.perTx.Load()
	per := 2
	if perTx {
		per = 1
	}
	results := make([]json.RawMessage, per*n)
	calls := make([]jsonrpc.Call, per*n)
	for i := range n {
		q := hexQuantity(from + uint64(i))
		calls[per*i] = jsonrpc.Call{Method: "eth_getBlockByNumber", Params: json.RawMessage(`["` + q + `",true]`), Result: &results[per*i]}
		if !perTx {
			calls[per*i+1] = jsonrpc.Call{Method: "eth_getBlockReceipts", Params: json.RawMessage(`["` + q + `"]`), Result: &results[per*i+1]}
		}
	}
	if err := s.c.Batch(ctx, calls); err != nil {
		return nil, fmt.Errorf("evm: fetch blocks %d-%d: %w", from, to, err)
	}

	heads := make([]blockHead, n)
	for i := range n {
		h := from + uint64(i)
		c := calls[per*i]
		if c.Err != nil {
			return nil, fmt.Errorf("evm: eth_getBlockByNumber %d: %w", h, c.Err)
		}
		head, err := s.parseBlock(h, results[per*i])
		var hm *chain.HashMismatchError
		if errors.As(err, &hm) {
			hm.Endpoint = c.Endpoint
			return s.elsewhere(ctx, from, to, hm)
		}
		if err != nil {
			return nil, err
		}
		heads[i] = head
	}
	if !perTx {
		missing, err := s.receiptsMissing(from, calls)
		if err != nil {
			return nil, err
		}
		perTx = missing
	}

	blocks := make([]chain.Block, n)
	if perTx {
		recs, eps, err := s.txReceipts(ctx, heads)
		if err != nil {
			return nil, err
		}
		for i := range n {
			blocks[i] = heads[i].chainBlock(MarshalRecordReceipts(heads[i].raw, recs[i]))
			if err := s.verifyRecord(blocks[i].Raw, calls[i].Endpoint, eps[i]); err != nil {
				return s.elsewhere(ctx, from, to, err)
			}
		}
		return blocks, nil
	}
	return s.withBlockReceipts(ctx, from, to, heads, calls, results)
}

// receiptsMissing reads the eth_getBlockReceipts answers of a batch (calls
// paired block, receipts from height from): true when the node lacks the
// method, from then on fetching receipts per transaction; an error for any
// other failure.
func (s *RPCSource) receiptsMissing(from uint64, calls []jsonrpc.Call) (bool, error) {
	for i := range len(calls) / 2 {
		if err := calls[2*i+1].Err; err != nil {
			if !methodMissing(err) {
				return false, fmt.Errorf("evm: eth_getBlockReceipts %d: %w", from+uint64(i), err)
			}
			if s.perTx.CompareAndSwap(false, true) {
				s.log.Warn("evm: node lacks eth_getBlockReceipts, fetching receipts per transaction", "endpoints", s.via, "err", err)
			}
			return true, nil
		}
	}
	return false, nil
}

// withBlockReceipts makes the blocks from-to of their heads and the
// eth_getBlockReceipts answers of the batch (calls and results paired
// block, receipts), each checked against its head and verified.
func (s *RPCSource) withBlockReceipts(ctx context.Context, from, to uint64, heads []blockHead, calls []jsonrpc.Call, results []json.RawMessage) ([]chain.Block, error) {
	n := len(heads)
	blocks := make([]chain.Block, n)
	for i := range n {
		h := from + uint64(i)
		rec := results[2*i+1]
		if nullResult(rec) {
			return nil, &UnavailableError{Via: s.via, Height: h, What: "receipts",
				Detail: "eth_getBlockReceipts returned null for a block the node has (receipts pruned?)"}
		}
		var rs []receiptRef
		if err := json.Unmarshal(rec, &rs); err != nil {
			return nil, &BadResponseError{Via: s.via, Method: "eth_getBlockReceipts", Height: h, Reason: err.Error()}
		}
		if err := s.checkReceipts(&heads[i], rs); err != nil {
			return nil, err
		}
		blocks[i] = heads[i].chainBlock(MarshalRecord(heads[i].raw, rec))
		if err := s.verifyRecord(blocks[i].Raw, calls[2*i].Endpoint, calls[2*i+1].Endpoint); err != nil {
			return s.elsewhere(ctx, from, to, err)
		}
	}
	return blocks, nil
}

// verifyRecord checks a record's contents against its header (VerifyBlock)
// and names the endpoint that sent what does not match: the receipts'
// endpoint for the receipts root, the block's for the rest.
func (s *RPCSource) verifyRecord(raw []byte, blockEndpoint, receiptsEndpoint string) *chain.HashMismatchError {
	if s.level != chain.VerifyFull {
		return nil // the header, if at all, was checked by parseBlock
	}
	_, err := VerifyBlock(raw)
	var hm *chain.HashMismatchError
	if !errors.As(err, &hm) {
		// The block passed parseBlock's checks and the receipts theirs: a
		// record that cannot be read here is caught again, and named, by
		// the loader's verification and the decoder.
		return nil
	}
	hm.Endpoint = blockEndpoint
	if hm.What == "receiptsRoot" {
		hm.Endpoint = receiptsEndpoint
	}
	return hm
}

// elsewhere fetches from..to again from the endpoints that have not yet
// sent a block failing verification (hm is the latest such answer): the
// whole span, since the receipts fetched with the wrong block may be from
// the same node. When every endpoint has, or the one that answered is not
// known, it returns hm: the loader's retries may still find a sound answer
// later, and when they run out the job fails naming the block, the
// endpoint and both hashes.
func (s *RPCSource) elsewhere(ctx context.Context, from, to uint64, hm *chain.HashMismatchError) ([]chain.Block, error) {
	if hm.Endpoint == "" || slices.Contains(jsonrpc.Avoided(ctx), hm.Endpoint) {
		return nil, hm
	}
	ctx = jsonrpc.Avoid(ctx, hm.Endpoint)
	if len(jsonrpc.Avoided(ctx)) >= len(s.c.Endpoints()) {
		return nil, hm
	}
	return s.Fetch(ctx, from, to)
}

// txReceipts fetches the receipt of every transaction of heads in one
// batch and returns them per block, in transaction order, each checked.
// It also returns, per block, the endpoint that answered its first
// receipt ("" for a block without transactions).
func (s *RPCSource) txReceipts(ctx context.Context, heads []blockHead) ([][]json.RawMessage, []string, error) {
	total := 0
	for i := range heads {
		total += len(heads[i].txs)
	}
	out := make([][]json.RawMessage, len(heads))
	eps := make([]string, len(heads))
	if total == 0 {
		return out, eps, nil
	}
	results := make([]json.RawMessage, total)
	calls := make([]jsonrpc.Call, 0, total)
	for i := range heads {
		for _, tx := range heads[i].txs {
			calls = append(calls, jsonrpc.Call{Method: "eth_getTransactionReceipt",
				Params: json.RawMessage(`["` + tx + `"]`), Result: &results[len(calls)]})
		}
	}
	if err := s.c.Batch(ctx, calls); err != nil {
		return nil, nil, fmt.Errorf("evm: fetch receipts of blocks %d-%d: %w", heads[0].height, heads[len(heads)-1].height, err)
	}
	k := 0
	for i := range heads {
		hd := &heads[i]
		recs := results[k : k+len(hd.txs)]
		for j, tx := range hd.txs {
			c := calls[k+j]
			if c.Err != nil {
				if isIndexing(c.Err) {
					return nil, nil, &BadResponseError{Via: s.via, Method: c.Method, Height: hd.height,
						Reason: fmt.Sprintf("receipt of transaction %d (%s): node is still indexing transactions: %v", j, tx, c.Err)}
				}
				return nil, nil, fmt.Errorf("evm: eth_getTransactionReceipt %s (block %d, transaction %d): %w", tx, hd.height, j, c.Err)
			}
			if nullResult(recs[j]) {
				return nil, nil, &UnavailableError{Via: s.via, Height: hd.height, What: "receipts",
					Detail: fmt.Sprintf("eth_getTransactionReceipt returned null for transaction %d (%s) (transaction index limited?)", j, tx)}
			}
		}
		rs := make([]receiptRef, len(recs))
		for j, r := range recs {
			if err := json.Unmarshal(r, &rs[j]); err != nil {
				return nil, nil, &BadResponseError{Via: s.via, Method: "eth_getTransactionReceipt", Height: hd.height,
					Reason: fmt.Sprintf("receipt of transaction %d: %v", j, err)}
			}
		}
		if err := s.checkReceipts(hd, rs); err != nil {
			return nil, nil, err
		}
		out[i] = recs
		if len(hd.txs) > 0 {
			eps[i] = calls[k].Endpoint
		}
		k += len(hd.txs)
	}
	return out, eps, nil
}

// blockHead is what the checks need of a block.
type blockHead struct {
	height       uint64
	hash, parent []byte
	hashHex      string
	txs          []string // transaction hashes, in block order
	raw          json.RawMessage
}

func (b *blockHead) chainBlock(raw []byte) chain.Block {
	return chain.Block{Height: b.height, Hash: b.hash, ParentHash: b.parent, Raw: raw}
}

// parseBlock checks an eth_getBlockByNumber result for height h.
func (s *RPCSource) parseBlock(h uint64, raw json.RawMessage) (blockHead, error) {
	bad := func(format string, args ...any) error {
		return &BadResponseError{Via: s.via, Method: "eth_getBlockByNumber", Height: h, Reason: fmt.Sprintf(format, args...)}
	}
	if nullResult(raw) {
		return blockHead{}, &NotFoundError{Via: s.via, Height: h}
	}
	var b struct {
		Number       string            `json:"number"`
		Hash         string            `json:"hash"`
		ParentHash   string            `json:"parentHash"`
		Transactions []json.RawMessage `json:"transactions"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return blockHead{}, bad("%v", err)
	}
	num, err := parseHexQuantity(b.Number)
	if err != nil {
		return blockHead{}, bad("number %q: %v", b.Number, err)
	}
	if num != h {
		return blockHead{}, bad("block number is %d", num)
	}
	hd := blockHead{height: h, hashHex: strings.ToLower(b.Hash), raw: raw}
	if hd.hash, err = hash32(b.Hash); err != nil {
		return blockHead{}, bad("hash %q: %v", b.Hash, err)
	}
	if s.level == chain.VerifyLinks {
		// The chain's block hash is not keccak256 of this header.
	} else if _, err := VerifyHeader(raw); err != nil {
		var hm *chain.HashMismatchError
		if errors.As(err, &hm) {
			return blockHead{}, hm
		}
		return blockHead{}, bad("%s", strings.TrimPrefix(err.Error(), "evm: "))
	}
	if hd.parent, err = hash32(b.ParentHash); err != nil {
		return blockHead{}, bad("parentHash %q: %v", b.ParentHash, err)
	}
	hd.txs = make([]string, len(b.Transactions))
	for i, t := range b.Transactions {
		var tx struct {
			Hash string `json:"hash"`
		}
		if rpcFirstByte(t) != '{' || json.Unmarshal(t, &tx) != nil {
			return blockHead{}, bad("transaction %d is not a transaction object (full transactions were asked for)", i)
		}
		if _, err := hash32(tx.Hash); err != nil {
			return blockHead{}, bad("transaction %d hash %q: %v", i, tx.Hash, err)
		}
		hd.txs[i] = strings.ToLower(tx.Hash)
	}
	return hd, nil
}

// receiptRef is what the checks need of a receipt.
type receiptRef struct {
	BlockHash       string `json:"blockHash"`
	TransactionHash string `json:"transactionHash"`
}

// checkReceipts checks that rs are the receipts of the block: one per
// transaction, in order, each naming the block's hash. The decoder checks
// the same; failing here names the node, and the fetch is retried.
func (s *RPCSource) checkReceipts(hd *blockHead, rs []receiptRef) error {
	bad := func(format string, args ...any) error {
		return &BadResponseError{Via: s.via, Method: "receipts", Height: hd.height,
			Reason: "receipts do not belong to the block: " + fmt.Sprintf(format, args...)}
	}
	if len(rs) != len(hd.txs) {
		return bad("%d receipts for %d transactions", len(rs), len(hd.txs))
	}
	for i, r := range rs {
		if strings.ToLower(r.BlockHash) != hd.hashHex {
			return bad("receipt %d has blockHash %s, the block's hash is %s", i, r.BlockHash, hd.hashHex)
		}
		if strings.ToLower(r.TransactionHash) != hd.txs[i] {
			return bad("receipt %d is of transaction %s, the block's transaction %d is %s", i, r.TransactionHash, i, hd.txs[i])
		}
	}
	return nil
}

// hash32 decodes a 0x-prefixed 32-byte hex hash.
func hash32(s string) ([]byte, error) {
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok || len(digits) != 64 {
		return nil, errors.New("not a 0x-prefixed 32-byte hash")
	}
	b, err := hex.DecodeString(digits)
	if err != nil {
		return nil, errors.New("not hex")
	}
	return b, nil
}

func nullResult(b json.RawMessage) bool {
	t := bytes.TrimSpace(b)
	return len(t) == 0 || string(t) == "null"
}

func rpcFirstByte(b []byte) byte {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 {
		return t[0]
	}
	return 0
}

// methodMissing recognises a node saying it has no such method: -32601 is
// JSON-RPC's "method not found"; providers also answer in words.
func methodMissing(err error) bool {
	var re *jsonrpc.RPCError
	if !errors.As(err, &re) {
		return false
	}
	if re.Code == -32601 {
		return true
	}
	m := strings.ToLower(re.Message)
	if !strings.Contains(m, "method") {
		return false
	}
	for _, s := range []string{"not found", "does not exist", "not available", "not supported", "unsupported", "not allowed", "not whitelisted"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// isIndexing recognises geth's answer while it (re)builds its transaction
// index, which passes.
func isIndexing(err error) bool {
	var re *jsonrpc.RPCError
	return errors.As(err, &re) && strings.Contains(strings.ToLower(re.Message), "indexing is in progress")
}

// NotFoundError is a block the node does not have: eth_getBlockByNumber
// answered null, as for a height above its head. The plan never asks past
// the tip, so the node is behind the one that reported it, or not synced.
// It is not retryable.
type NotFoundError struct {
	Via    string // the redacted endpoints
	Height uint64
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("evm: block %d is not available yet from %s (eth_getBlockByNumber returned null: above the node's head?)", e.Height, e.Via)
}

// Fault marks the error failed: not transient, the node is behind.
func (e *NotFoundError) Fault() fault.Class { return fault.Failed }

// UnavailableError is a block the node has without all that makes its
// record: receipts it has pruned or cannot look up. It is not retryable:
// the range needs a node that keeps them (an archive node, or a full
// transaction index).
type UnavailableError struct {
	Via    string // the redacted endpoints
	Height uint64
	What   string // "receipts"
	Detail string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("evm: %s of block %d are not available from %s: %s; this range needs an archive node", e.What, e.Height, e.Via, e.Detail)
}

// Fault marks the error failed: not transient, the node will not have it later.
func (e *UnavailableError) Fault() fault.Class { return fault.Failed }

// BadResponseError is an answer that is not what was asked for: another
// block, malformed hashes, receipts of another block. The client cannot
// say which of its endpoints answered, so Via names them all. It is
// retryable: another attempt may reach a sound node; a node that always
// answers so exhausts the loader's retries.
type BadResponseError struct {
	Via    string // the redacted endpoints
	Method string
	Height uint64 // unset for eth_chainId and eth_blockNumber
	Reason string
}

func (e *BadResponseError) Error() string {
	if e.Method == "eth_chainId" || e.Method == "eth_blockNumber" {
		return fmt.Sprintf("evm: bad %s answer from %s: %s", e.Method, e.Via, e.Reason)
	}
	return fmt.Sprintf("evm: bad %s answer for block %d from %s: %s", e.Method, e.Height, e.Via, e.Reason)
}

// Fault marks the error transient: another attempt may reach a sound node.
func (e *BadResponseError) Fault() fault.Class { return fault.Transient }

// FailedHeight is the height asked for (a fetch charges the failure to it).
func (e *BadResponseError) FailedHeight() uint64 { return e.Height }
