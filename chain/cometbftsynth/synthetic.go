package cometbftsynth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
	"github.com/blockhaul/blockhaul/internal/hashchain"
)

// Defaults of SyntheticConfig.
const (
	// DefaultTxPerBlock is Cosmos Hub's long-run mean.
	DefaultTxPerBlock = 4.5
	// DefaultValidators sizes the validator set, which sets much of a
	// record's size: each validator adds a commit signature and two or
	// three block events, ~170 bytes of the compressed record. With 4 a
	// record compresses (zstd) to ~5.4 KB, near the size blockhaul's
	// benchmarks are calibrated to; Cosmos Hub's 180 give ~34 KB.
	DefaultValidators = 4
	// DefaultTip is the tip of a synthetic chain without Tip: in effect
	// unbounded (34 billion blocks), yet low enough that every block's time
	// is before year 10000, which RFC 3339 and PostgreSQL need.
	DefaultTip = uint64(1) << 35
	// MaxValidators bounds SyntheticConfig.Validators.
	MaxValidators = 1000
)

// SyntheticConfig configures a synthetic CometBFT chain.
type SyntheticConfig struct {
	// Seed selects the chain: the same seed gives the same chain, byte for
	// byte, on every run and machine.
	Seed int64
	// ChainID defaults to "blockhaul-synthetic-<seed>".
	ChainID string
	// TxPerBlock is the mean number of transactions per block; 0 means
	// DefaultTxPerBlock. The rate varies by stretches of 200 blocks (quiet
	// stretches of nearly empty blocks, bursts at 3.5×) around this mean.
	TxPerBlock float64
	// Steady gives every block the mean rate: no quiet stretches or bursts,
	// so that any range has the same density (benchmarks of scaling).
	Steady bool
	// Validators is the size of the validator set; 0 means
	// DefaultValidators.
	Validators int
	// Tip returns the chain's current tip; nil means DefaultTip. A test
	// can move it to play a growing chain.
	Tip func() uint64
	// Fork, if set, makes this chain a fork of another: its block Fork.At
	// names Fork.Parent (the other chain's block At-1) as its parent, and
	// it has no blocks below At. Tests play reorganisations with it.
	Fork *SyntheticFork
}

// SyntheticFork is where a synthetic chain branches off another; At ≥ 2.
type SyntheticFork = synthreorg.Fork

// Validate returns every problem of the configuration at once.
func (c SyntheticConfig) Validate() error {
	var errs []error
	if math.IsNaN(c.TxPerBlock) || math.IsInf(c.TxPerBlock, 0) || c.TxPerBlock < 0 || c.TxPerBlock > 10000 {
		errs = append(errs, fmt.Errorf("cometbft: synthetic TxPerBlock %v: want 0 (default) to 10000", c.TxPerBlock))
	}
	if c.Validators < 0 || c.Validators > MaxValidators {
		errs = append(errs, fmt.Errorf("cometbft: synthetic Validators %d: want 0 (default) to %d", c.Validators, MaxValidators))
	}
	if c.Fork != nil && (c.Fork.At < 2 || len(c.Fork.Parent) != 32) {
		errs = append(errs, fmt.Errorf("cometbft: synthetic Fork: want At ≥ 2 and a 32-byte Parent, got %d and %d bytes", c.Fork.At, len(c.Fork.Parent)))
	}
	if strings.ContainsAny(c.ChainID, "\"\\") || strings.ContainsFunc(c.ChainID, func(r rune) bool { return r < 0x20 || r > 0x7e }) || len(c.ChainID) > 50 {
		errs = append(errs, fmt.Errorf("cometbft: synthetic ChainID %q: want at most 50 printable ASCII characters without quotes or backslashes", c.ChainID))
	}
	return errors.Join(errs...)
}

// Synthetic is a deterministic CometBFT chain: every height's raw record is
// a pure function of (seed, height), so any height can be generated on its
// own, in any order, at the same cost. Records have the exact shapes of
// CometBFT 0.38's /block and /block_results with a Cosmos SDK 0.50
// application on top (bank, IBC, distribution, staking, gov transactions
// and their events; mint, distribution and slashing block events), sized
// like a Cosmos Hub-like mainnet.
//
// The hashes a consumer can check are real: block h's hash is its header's
// hash as CometBFT computes it (VerifyBlock reproduces it), its data_hash
// the Merkle root of its txs, its last_block_id block h-1's block_id,
// block_results' app_hash the next header's app_hash, its
// last_results_hash the hash of the previous block's results, its
// validators, next validators and consensus hashes the sets and parameters
// its updates made (synthetic_vals.go), and its last commit is signed by
// the validators with ed25519: the chain proves itself from its Genesis. Since every hash names its parent's, a block's hash is known
// only once its parent's is: the chain is produced in order, spans in
// parallel (hashchain), and a height far above any produced yet costs
// generating the blocks below it once per Synthetic.
//
// A Synthetic is safe for concurrent use; its only mutable state is the
// memo of hashes.
type Synthetic struct {
	seed       uint64
	chainID    string
	txPerBlock float64
	steady     bool
	tip        func() uint64

	vals     []validator
	accounts []string // cosmos1… addresses
	// accountKeys are the accounts' secp256k1 public keys (compressed; not
	// points of the curve): each address is the SDK's address of its key.
	accountKeys  [][33]byte
	remote       [][]string
	modules      moduleAddrs
	chainIDBytes []byte

	hashes *hashchain.Chain
	// first is the lowest height (1, or a fork's At); base the hash its
	// first block names as parent (zero for block 1).
	first uint64
	base  [32]byte

	sets     setCache     // the validator sets of the heights being generated
	results  resultsCache // the results hashes of the heights last generated
	gens     sync.Pool    // *generator
	sizeHint atomic.Int64 // size of the last record, to size the next one
}

// validator is a slot of the validator set as the application names it
// (its consensus keys are the slot's generations: synthetic_vals.go).
type validator struct {
	operator string // cosmosvaloper1…
	cons     string // cosmosvalcons1…
}

type moduleAddrs struct {
	feeCollector, distribution, mint, bonded, notBonded, transfer string
}

// NewSynthetic returns the synthetic chain of cfg. It panics if
// cfg.Validate fails: configurations from users are validated before.
func NewSynthetic(cfg SyntheticConfig) *Synthetic {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	s := &Synthetic{
		seed:       uint64(cfg.Seed),
		chainID:    cfg.ChainID,
		txPerBlock: cfg.TxPerBlock,
		steady:     cfg.Steady,
		tip:        cfg.Tip,
	}
	if s.chainID == "" {
		s.chainID = "blockhaul-synthetic-" + strconv.FormatInt(cfg.Seed, 10)
	}
	if s.txPerBlock == 0 {
		s.txPerBlock = DefaultTxPerBlock
	}
	nv := cfg.Validators
	if nv == 0 {
		nv = DefaultValidators
	}
	// Every parameter that shapes the blocks goes into the seed that all
	// values derive from (hashchain.Seed), so that chains of different
	// parameters share no block hash at any height; the chain id is in
	// every header, and so in every hash, already.
	steady := uint64(0)
	if s.steady {
		steady = 1
	}
	s.seed = hashchain.Seed("cometbft", cfg.Seed,
		[]uint64{math.Float64bits(s.txPerBlock), steady, uint64(nv)},
		[]uint64{math.Float64bits(DefaultTxPerBlock), 0, DefaultValidators})

	// Identities derive from the seed only, like everything else.
	s.vals = make([]validator, nv)
	for i := range s.vals {
		id := s.derive('v', uint64(i))
		s.vals[i] = validator{
			operator: cometbft.Bech32Encode("cosmosvaloper", id[12:32]),
			cons:     cometbft.Bech32Encode("cosmosvalcons", id[:20]),
		}
	}
	s.accounts = make([]string, 4096)
	s.accountKeys = make([][33]byte, len(s.accounts))
	for i := range s.accounts {
		id := s.derive('a', uint64(i))
		k := &s.accountKeys[i]
		k[0] = 2 + id[31]&1
		copy(k[1:], id[:])
		s.accounts[i] = cometbft.Bech32Encode("cosmos", cometbft.AccountAddress([]byte("/cosmos.crypto.secp256k1.PubKey"), k[:]))
	}
	s.remote = make([][]string, len(ibcRoutes))
	for j, route := range ibcRoutes {
		s.remote[j] = make([]string, 256)
		for i := range s.remote[j] {
			id := s.derive('r', uint64(j)<<32|uint64(i))
			s.remote[j][i] = cometbft.Bech32Encode(route.prefix, id[:20])
		}
	}
	s.modules = moduleAddrs{
		feeCollector: moduleAddress("fee_collector"),
		distribution: moduleAddress("distribution"),
		mint:         moduleAddress("mint"),
		bonded:       moduleAddress("bonded_tokens_pool"),
		notBonded:    moduleAddress("not_bonded_tokens_pool"),
		transfer:     moduleAddress("transfer"),
	}
	s.chainIDBytes = []byte(s.chainID)
	s.hashes = hashchain.New()
	s.first = 1
	if f := cfg.Fork; f != nil {
		s.first, s.base = f.At, [32]byte(f.Parent)
	}
	s.gens.New = func() any { return &generator{s: s} }
	return s
}

// moduleAddress is a Cosmos SDK module account's address, as the SDK
// derives it (the first 20 bytes of SHA-256 of the module name).
func moduleAddress(name string) string {
	sum := sha256.Sum256([]byte(name))
	return cometbft.Bech32Encode("cosmos", sum[:20])
}

// derive returns the 32-byte value of tag and n on this chain: SHA-256 of
// (tag, seed, n). Block hashes and other values that one height shares with
// another are derived this way, so that each height can compute its
// neighbours' without generating them.
func (s *Synthetic) derive(tag byte, n uint64) [32]byte {
	var in [17]byte
	in[0] = tag
	binary.LittleEndian.PutUint64(in[1:], s.seed)
	binary.BigEndian.PutUint64(in[9:], n)
	return sha256.Sum256(in[:])
}

// Tags of derive.
const (
	tagBlockHash = 'b'
	tagPartsHash = 'p'
	tagAppHash   = 'h'
)

// BlockHash returns the hash of block h (h ≥ 1).
func (s *Synthetic) BlockHash(h uint64) []byte {
	sum, err := s.hashOf(context.Background(), h)
	if err != nil {
		panic(err) // only ctx ends a walk, and this one has none
	}
	return sum[:]
}

// hashOf returns the hash of block h (h ≥ 1): known, being produced by a
// Fetch (it waits for it), or produced here by walking from the highest
// known height below it (hashchain.Chain.Walk).
func (s *Synthetic) hashOf(ctx context.Context, h uint64) ([32]byte, error) {
	var g *generator
	var buf []byte
	defer func() {
		if g != nil {
			s.gens.Put(g)
		}
	}()
	return s.hashes.Walk(ctx, h, s.first, s.base, 64, func(k uint64, parent [32]byte) [32]byte {
		if g == nil {
			g = s.gens.Get().(*generator)
		}
		buf = g.record(buf[:0], k)
		return g.finish(buf, parent)
	})
}

// Family returns chain.FamilyCometBFT.
func (s *Synthetic) Family() chain.Family { return chain.FamilyCometBFT }

// ChainID returns the chain's id.
func (s *Synthetic) ChainID(ctx context.Context) (string, error) { return s.chainID, nil }

// Tip returns the chain's current tip.
func (s *Synthetic) Tip(ctx context.Context) (uint64, error) { return s.tipNow(), nil }

func (s *Synthetic) tipNow() uint64 {
	if s.tip == nil {
		return DefaultTip
	}
	return s.tip()
}

// Fetch returns the blocks from..to inclusive. The records are rendered
// first, then chained from block from-1's hash (see hashOf).
func (s *Synthetic) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if from < s.first || to < from {
		return nil, fmt.Errorf("cometbft: synthetic fetch %d..%d: invalid range (heights start at %d)", from, to, s.first)
	}
	if tip := s.tipNow(); to > tip {
		return nil, fmt.Errorf("cometbft: synthetic fetch %d..%d: beyond tip %d", from, to, tip)
	}
	release := s.hashes.Claim(from, to)
	defer release()
	n := to - from + 1
	out := make([]chain.Block, 0, min(n, 4096))
	type pending struct {
		offHash, offParent, offCommitParent, offLastCommit int
		commit                                             pendingCommit
	}
	hdrs := make([]cometbft.HeaderFields, 0, min(n, 4096))
	offs := make([]pending, 0, min(n, 4096))
	g := s.gens.Get().(*generator)
	defer s.gens.Put(g)
	for h := from; ; h++ {
		if (h-from)%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("cometbft: synthetic fetch %d..%d: %w", from, to, err)
			}
		}
		raw := g.record(make([]byte, 0, s.sizeHint.Load()+4096), h)
		s.sizeHint.Store(int64(len(raw)))
		out = append(out, chain.Block{Height: h, Raw: raw})
		hdr := g.hdr.Detach()
		// Detach leaves what a header shares with its chain; these are the
		// generator's scratch here.
		hdr.Vals, hdr.NextVals, hdr.Consensus = append([]byte(nil), hdr.Vals...), append([]byte(nil), hdr.NextVals...), append([]byte(nil), hdr.Consensus...)
		hdrs = append(hdrs, hdr)
		offs = append(offs, pending{g.offHash, g.offParent, g.offCommitParent, g.offLastCommit, g.commit.clone()})
		if h == to {
			break
		}
	}
	var parent [32]byte
	if from > 1 {
		var err error
		if parent, err = s.hashOf(ctx, from-1); err != nil {
			return nil, fmt.Errorf("cometbft: synthetic fetch %d..%d: %w", from, to, err)
		}
	}
	for i := range out {
		g.hdr = hdrs[i]
		g.offHash, g.offParent, g.offCommitParent, g.offLastCommit = offs[i].offHash, offs[i].offParent, offs[i].offCommitParent, offs[i].offLastCommit
		g.commit = offs[i].commit
		b := &out[i]
		if b.Height > 1 {
			b.ParentHash = append([]byte(nil), parent[:]...)
		}
		parent = g.finish(b.Raw, parent)
		b.Hash = append([]byte(nil), parent[:]...)
		s.hashes.Put(b.Height, parent)
	}
	return out, nil
}

// Block returns block h (h ≥ 1) with its identity filled.
func (s *Synthetic) Block(h uint64) chain.Block {
	bs, err := s.Fetch(context.Background(), h, h)
	if err != nil {
		panic(err) // h is above the tip, or 0
	}
	return bs[0]
}

// AppendUnchained appends block h's record as if its parent's hash were
// parent: the content of a height far above any produced, for tests of
// what does not depend on the hashes (times, sizes).
func (s *Synthetic) AppendUnchained(dst []byte, h uint64, parent [32]byte) []byte {
	g := s.gens.Get().(*generator)
	start := len(dst)
	dst = g.record(dst, h)
	g.finish(dst[start:], parent)
	s.gens.Put(g)
	return dst
}

// AppendRecord appends the raw record of block h (h ≥ 1) to dst: the same
// bytes MarshalRecord would build from a node's answers.
func (s *Synthetic) AppendRecord(dst []byte, h uint64) []byte {
	if h == 0 {
		panic("cometbft: synthetic block 0: heights start at 1")
	}
	var parent [32]byte
	if h > 1 {
		parent, _ = s.hashOf(context.Background(), h-1)
	}
	g := s.gens.Get().(*generator)
	start := len(dst)
	dst = g.record(dst, h)
	sum := g.finish(dst[start:], parent)
	s.gens.Put(g)
	s.hashes.Put(h, sum)
	return dst
}
