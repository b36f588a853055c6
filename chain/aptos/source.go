package aptos

import (
	"context"
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

// APIKeyEnv is the environment variable whose value is sent as the bearer
// token (Authorization: Bearer) to endpoints whose URL carries none in its
// userinfo. It is never printed.
const APIKeyEnv = "APTOS_API_KEY"

// DefaultPageLimit is how many transactions one /v1/transactions answer is
// asked for: a fullnode's default max_transactions_page_size.
const DefaultPageLimit = 100

// SourceConfig configures a Source.
type SourceConfig struct {
	// Client sends the requests (its endpoints are the nodes' /v1 URLs);
	// required. The source does not own it.
	Client *jsonrpc.Client
	// APIKey is the bearer token for endpoints without userinfo; "" sends
	// none.
	APIKey string
	// Verify is how much of each block is recomputed (see VerifyBlock).
	Verify chain.Verification
	// PageLimit is the limit of a /v1/transactions request; 0 is
	// DefaultPageLimit.
	PageLimit int
	// Logger; default discard.
	Logger *slog.Logger
}

// Source fetches blocks from Aptos fullnodes' REST API. For a span of
// heights it asks for the header of the block before the span (its hash
// and last version, the first block's parent), then for each block with
// its transactions, following with /v1/transactions pages while the answer
// holds fewer transactions than the block's versions. Every answer is
// checked before it is returned: the height is the one asked for, the
// X-Aptos-Chain-Id header (when sent) is the chain's, and the record
// passes Check (and, at full verification, VerifyBlock's recomputed
// hashes). A span is asked of one endpoint; one with a block that fails is
// asked of the other endpoints in turn, and when all fail it the error
// names the height, the field and the last endpoint.
//
// A Source is safe for concurrent use.
type Source struct {
	c       *jsonrpc.Client
	key     string
	level   chain.Verification
	limit   int
	log     *slog.Logger
	via     string
	chainID atomic.Pointer[string]
	turn    atomic.Uint64 // the endpoint the next span is asked of
}

// NewSource returns a source that fetches through cfg.Client. It contacts
// nothing.
func NewSource(cfg SourceConfig) (*Source, error) {
	if cfg.Client == nil {
		return nil, errors.New("aptos: rest source: no client")
	}
	s := &Source{c: cfg.Client, key: cfg.APIKey, level: cfg.Verify, limit: cfg.PageLimit, log: cfg.Logger,
		via: strings.Join(cfg.Client.Endpoints(), ", ")}
	if s.limit <= 0 {
		s.limit = DefaultPageLimit
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Family returns chain.FamilyAptos.
func (s *Source) Family() chain.Family { return chain.FamilyAptos }

// LedgerInfo is the node's /v1 answer.
type LedgerInfo struct {
	ChainID           uint64
	LedgerVersion     uint64
	BlockHeight       uint64 // the tip
	OldestBlockHeight uint64 // the lowest height the node still serves
}

// Ledger asks a node for its ledger info.
func (s *Source) Ledger(ctx context.Context) (LedgerInfo, error) {
	resp, err := s.c.Get(ctx, "", s.key)
	if err != nil {
		return LedgerInfo{}, fmt.Errorf("aptos: ledger info: %w", err)
	}
	var li struct {
		ChainID           *uint64 `json:"chain_id"`
		LedgerVersion     string  `json:"ledger_version"`
		BlockHeight       string  `json:"block_height"`
		OldestBlockHeight string  `json:"oldest_block_height"`
	}
	bad := func(format string, args ...any) error {
		return &BadAnswerError{Endpoint: resp.Endpoint, What: "ledger info (/v1)", Reason: fmt.Sprintf(format, args...)}
	}
	if err := json.Unmarshal(resp.Body, &li); err != nil {
		return LedgerInfo{}, bad("%v", err)
	}
	if li.ChainID == nil {
		return LedgerInfo{}, bad("no chain_id (is the URL the node's /v1?)")
	}
	out := LedgerInfo{ChainID: *li.ChainID}
	for _, f := range []struct {
		name string
		s    string
		p    *uint64
	}{{"ledger_version", li.LedgerVersion, &out.LedgerVersion}, {"block_height", li.BlockHeight, &out.BlockHeight}, {"oldest_block_height", li.OldestBlockHeight, &out.OldestBlockHeight}} {
		v, err := parseU64(f.s)
		if err != nil {
			return LedgerInfo{}, bad("%s %q: %v", f.name, f.s, err)
		}
		*f.p = v
	}
	if err := s.sameChain(resp, strconv.FormatUint(out.ChainID, 10), 0, "chain_id"); err != nil {
		return LedgerInfo{}, err
	}
	return out, nil
}

// ChainID returns the chain id of the ledger info, in decimal ("1" is
// mainnet, "2" testnet).
func (s *Source) ChainID(ctx context.Context) (string, error) {
	li, err := s.Ledger(ctx)
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(li.ChainID, 10), nil
}

// Tip returns the ledger info's block height.
func (s *Source) Tip(ctx context.Context) (uint64, error) {
	li, err := s.Ledger(ctx)
	return li.BlockHeight, err
}

// CheckRange refuses a range that starts below the oldest height the node
// still serves (a pruned node), naming it, before anything is fetched.
func (s *Source) CheckRange(ctx context.Context, from, to uint64) error {
	li, err := s.Ledger(ctx)
	if err != nil {
		return err
	}
	if from < li.OldestBlockHeight {
		return fmt.Errorf("%w: aptos: %s serves blocks from height %d (oldest_block_height; older ones are pruned), the range starts at %d",
			chain.ErrSourceRefused, s.via, li.OldestBlockHeight, from)
	}
	return nil
}

// sameChain checks that an answer's X-Aptos-Chain-Id header, when the
// node sends one, names the chain the source first saw (or id, the chain
// a ledger info names; "" when the answer names none).
func (s *Source) sameChain(resp *jsonrpc.Response, id string, height uint64, field string) error {
	hdr := resp.Header.Get("X-Aptos-Chain-Id")
	if id == "" {
		id = hdr
	} else if hdr != "" && hdr != id {
		return &RecordError{Height: height, Field: "X-Aptos-Chain-Id", Reason: fmt.Sprintf("header %s beside %s %s", hdr, field, id), Endpoint: resp.Endpoint}
	}
	if id == "" {
		return nil
	}
	if s.chainID.CompareAndSwap(nil, &id) {
		return nil
	}
	if known := *s.chainID.Load(); known != id {
		f := field
		if hdr != "" {
			f = "X-Aptos-Chain-Id"
		}
		return &RecordError{Height: height, Field: f, Reason: fmt.Sprintf("chain id %s, the chain's is %s", id, known), Endpoint: resp.Endpoint}
	}
	return nil
}

// Fetch returns the blocks of heights from..to, in order, each checked.
// A span is asked of one endpoint (the next in turn), so that what fails
// the checks is that endpoint's answer: a block's first version that does
// not follow its parent's last version cannot be blamed on a node that
// answered one of the two. A span that fails is asked of the next
// endpoint, until every one has been; the error is then the last one's.
func (s *Source) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if to < from {
		return nil, fmt.Errorf("aptos: fetch: empty range %d-%d", from, to)
	}
	eps := s.c.Endpoints()
	start := int(s.turn.Add(1)-1) % len(eps)
	tried := jsonrpc.Avoided(ctx)
	var last error
	for i := range eps {
		ep := eps[(start+i)%len(eps)]
		if slices.Contains(tried, ep) {
			continue
		}
		// The others are asked only when ep fails a request (a transient
		// fault, which the client fails over).
		blocks, err := s.fetchSpan(jsonrpc.Avoid(ctx, slices.DeleteFunc(slices.Clone(eps), func(e string) bool { return e == ep })...), from, to)
		var re *RecordError
		var hm *chain.HashMismatchError
		if err == nil || !errors.As(err, &re) && !errors.As(err, &hm) {
			return blocks, err
		}
		last = err
		tried = append(tried, ep)
		if len(tried) < len(eps) {
			s.log.Warn("aptos: a node's answer failed the checks, asking another endpoint", "endpoint", ep, "err", err)
		}
	}
	if last == nil {
		return nil, fmt.Errorf("aptos: fetch %d-%d: every endpoint was avoided", from, to)
	}
	return nil, last
}

// fetchSpan fetches from..to, checking every answer.
func (s *Source) fetchSpan(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	var parent *Parent
	if from > GenesisHeight {
		resp, hd, err := s.block(ctx, from-1, false)
		if err != nil {
			return nil, err
		}
		if err := s.sameChain(resp, "", from-1, "block"); err != nil {
			return nil, err
		}
		parent = &Parent{BlockHash: hd.BlockHash, LastVersion: hd.LastVersion}
	}
	out := make([]chain.Block, 0, to-from+1)
	for h := from; h <= to; h++ {
		b, err := s.fetchOne(ctx, h, parent)
		if err != nil {
			return nil, err
		}
		out = append(out, b.Block)
		parent = &Parent{BlockHash: fmt.Sprintf("0x%x", b.Hash), LastVersion: b.lastVersion}
	}
	return out, nil
}

type fetched struct {
	chain.Block
	lastVersion string
}

// fetchOne fetches and checks block h, whose parent is parent.
func (s *Source) fetchOne(ctx context.Context, h uint64, parent *Parent) (fetched, error) {
	resp, hd, err := s.block(ctx, h, true)
	if err != nil {
		return fetched{}, err
	}
	if err := s.sameChain(resp, "", h, "block"); err != nil {
		return fetched{}, err
	}
	first, err1 := parseU64(hd.FirstVersion)
	last, err2 := parseU64(hd.LastVersion)
	if err := errors.Join(err1, err2); err != nil || last < first {
		return fetched{}, &RecordError{Height: h, Field: "first_version", Reason: fmt.Sprintf("versions %q-%q", hd.FirstVersion, hd.LastVersion), Endpoint: resp.Endpoint}
	}
	var pages []json.RawMessage
	have := uint64(len(hd.Transactions))
	for next := first + have; next <= last; {
		n := min(last-next+1, uint64(s.limit))
		path := fmt.Sprintf("/transactions?start=%d&limit=%d", next, n)
		pr, err := s.c.Get(ctx, path, s.key)
		if err != nil {
			return fetched{}, fmt.Errorf("aptos: block %d: transactions %d-%d: %w", h, next, next+n-1, err)
		}
		if err := s.sameChain(pr, "", h, "transactions"); err != nil {
			return fetched{}, err
		}
		var page []json.RawMessage
		if err := json.Unmarshal(pr.Body, &page); err != nil {
			return fetched{}, &RecordError{Height: h, Field: "transactions", Reason: fmt.Sprintf("page from version %d: %v", next, err), Endpoint: pr.Endpoint}
		}
		if len(page) == 0 || uint64(len(page)) > n {
			return fetched{}, &RecordError{Height: h, Field: "transactions", Reason: fmt.Sprintf("page from version %d has %d transactions, %d asked", next, len(page), n), Endpoint: pr.Endpoint}
		}
		pages = append(pages, pr.Body)
		next += uint64(len(page))
	}
	raw := MarshalRecord(resp.Body, pages, parent)
	verify := VerifyRecordHeader
	if s.level == chain.VerifyFull {
		verify = VerifyBlock
	}
	hash, err := verify(raw)
	if err != nil {
		var re *RecordError
		var hm *chain.HashMismatchError
		switch {
		case errors.As(err, &re):
			re.Endpoint = resp.Endpoint
		case errors.As(err, &hm):
			hm.Endpoint = resp.Endpoint
		default:
			return fetched{}, &RecordError{Height: h, Field: "block", Reason: err.Error(), Endpoint: resp.Endpoint}
		}
		return fetched{}, err
	}
	var ph []byte
	if parent != nil {
		ph, _ = ParseHash(parent.BlockHash)
	}
	return fetched{Block: chain.Block{Height: h, Hash: hash, ParentHash: ph, Raw: raw}, lastVersion: hd.LastVersion}, nil
}

// block asks for block h, with its transactions or without, and checks
// that the answer is block h.
func (s *Source) block(ctx context.Context, h uint64, withTxs bool) (*jsonrpc.Response, restBlock, error) {
	resp, err := s.c.Get(ctx, fmt.Sprintf("/blocks/by_height/%d?with_transactions=%t", h, withTxs), s.key)
	if err != nil {
		var se *jsonrpc.StatusError
		if errors.As(err, &se) {
			switch se.Code {
			case "block_not_found":
				return nil, restBlock{}, &NotFoundError{Endpoint: se.Endpoint, Height: h, Detail: se.Message}
			case "block_pruned":
				return nil, restBlock{}, &NotFoundError{Endpoint: se.Endpoint, Height: h, Pruned: true, Detail: se.Message}
			}
		}
		return nil, restBlock{}, fmt.Errorf("aptos: block %d: %w", h, err)
	}
	var hd restBlock
	if err := json.Unmarshal(resp.Body, &hd); err != nil {
		return nil, restBlock{}, &RecordError{Height: h, Field: "block", Reason: err.Error(), Endpoint: resp.Endpoint}
	}
	if got, err := parseU64(hd.BlockHeight); err != nil || got != h {
		return nil, restBlock{}, &RecordError{Height: h, Field: "block_height", Reason: fmt.Sprintf("asked for %d, answered with block %q", h, hd.BlockHeight), Endpoint: resp.Endpoint}
	}
	return resp, hd, nil
}

// NotFoundError is a block the node does not serve: above its tip, or
// pruned. It is not retried.
type NotFoundError struct {
	Endpoint string
	Height   uint64
	Pruned   bool
	Detail   string
}

func (e *NotFoundError) Error() string {
	what := "is not available yet (above the node's tip?)"
	if e.Pruned {
		what = "is pruned (below the node's oldest_block_height)"
	}
	s := fmt.Sprintf("aptos: block %d %s at %s", e.Height, what, e.Endpoint)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Fault marks the error failed: the node will not serve it.
func (e *NotFoundError) Fault() fault.Class { return fault.Failed }

// FailedHeight is the height asked for.
func (e *NotFoundError) FailedHeight() uint64 { return e.Height }

// BadAnswerError is an answer that is not of the shape asked for (a
// ledger info without a chain id). It is retried.
type BadAnswerError struct {
	Endpoint string
	What     string
	Reason   string
}

func (e *BadAnswerError) Error() string {
	return fmt.Sprintf("aptos: bad %s from %s: %s", e.What, e.Endpoint, e.Reason)
}

// Fault marks the error transient: another attempt may reach a sound node.
func (e *BadAnswerError) Fault() fault.Class { return fault.Transient }
