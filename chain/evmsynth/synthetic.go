package evmsynth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
	"github.com/blockhaul/blockhaul/internal/hashchain"
)

// Defaults of SyntheticConfig.
const (
	DefaultSyntheticChainID      = 31337 // the usual local development chain id
	DefaultSyntheticTxPerBlock   = 150   // about mainnet's average
	DefaultSyntheticLogsPerBlock = 400
	// DefaultSyntheticTip is the tip of a synthetic chain whose config has
	// no Tip: high enough that no run reaches it.
	DefaultSyntheticTip = 1 << 40

	maxSyntheticPerBlock = 20000 // bounds the memory of one generated block
)

// SyntheticConfig configures a synthetic EVM chain. The zero value of a
// field selects its default.
type SyntheticConfig struct {
	// Seed selects the chain: the same seed always yields the same blocks,
	// byte for byte; different seeds yield unrelated chains.
	Seed int64
	// ChainID is reported by ChainID and written into transactions.
	// Default DefaultSyntheticChainID.
	ChainID uint64
	// TxPerBlock is the mean number of transactions per block; each block
	// draws its count around it. Default DefaultSyntheticTxPerBlock.
	TxPerBlock float64
	// LogsPerBlock is the mean number of logs per block. Default
	// DefaultSyntheticLogsPerBlock.
	LogsPerBlock float64
	// Tip, if set, is consulted by every Tip call, so a test can move the
	// head. Default: a fixed DefaultSyntheticTip.
	Tip func() uint64
	// Fork, if set, makes this chain a fork of another: its block Fork.At
	// names Fork.Parent (the other chain's block At-1) as its parent, and
	// it has no blocks below At (see chain/synthreorg).
	Fork *SyntheticFork
}

// SyntheticFork is where a synthetic chain branches off another; At ≥ 1.
type SyntheticFork = synthreorg.Fork

// Validate reports every invalid field at once.
func (c SyntheticConfig) Validate() error {
	var errs []error
	check := func(name string, v float64) {
		if math.IsNaN(v) || v < 0 || v > maxSyntheticPerBlock {
			errs = append(errs, fmt.Errorf("evm: synthetic %s %v must be within [0, %d]", name, v, maxSyntheticPerBlock))
		}
	}
	check("TxPerBlock", c.TxPerBlock)
	check("LogsPerBlock", c.LogsPerBlock)
	if c.Fork != nil && (c.Fork.At < 1 || len(c.Fork.Parent) != 32) {
		errs = append(errs, fmt.Errorf("evm: synthetic Fork: want At ≥ 1 and a 32-byte Parent, got %d and %d bytes", c.Fork.At, len(c.Fork.Parent)))
	}
	return errors.Join(errs...)
}

func (c *SyntheticConfig) ensureDefaults() {
	c.ChainID = cmp.Or(c.ChainID, DefaultSyntheticChainID)
	c.TxPerBlock = cmp.Or(c.TxPerBlock, DefaultSyntheticTxPerBlock)
	c.LogsPerBlock = cmp.Or(c.LogsPerBlock, DefaultSyntheticLogsPerBlock)
}

// Synthetic is a deterministic, seedable EVM chain that produces the raw
// records a geth node would (see MarshalRecord): blocks with full
// transactions of types 0 to 4 in a mainnet-like mix, and their receipts
// and logs, at mainnet-like density.
//
// The chain starts at height 0, an empty genesis block whose parent hash
// is zero. Block hashes are real: keccak256 of the block's RLP header, as
// geth computes it (VerifyBlock reproduces it), every header naming its
// parent's hash. So a block's hash is known only once its parent's is: the
// chain is produced in order, spans in parallel (hashchain), and a height
// far above any produced yet costs generating the blocks below it once per
// Synthetic. Transaction hashes are keccak256 of the transactions'
// encodings, and the transactions, receipts and withdrawals roots are the
// roots of their tries, as VerifyBlock recomputes them; the state root,
// signatures and blooms have the right shapes but commit to nothing.
//
// Synthetic is safe for concurrent use.
type Synthetic struct {
	cfg   SyntheticConfig
	seed  uint64
	pools *pools
	gens  sync.Pool // *generator

	hashes *hashchain.Chain
	// first is the lowest height (0, or a fork's At); base the hash its
	// first block names as parent (zero for genesis).
	first uint64
	base  [32]byte
}

// NewSynthetic returns a synthetic chain. cfg's zero fields take their
// defaults; invalid densities (see Validate) are clamped into range.
func NewSynthetic(cfg SyntheticConfig) *Synthetic {
	cfg.ensureDefaults()
	clamp := func(v float64) float64 {
		if math.IsNaN(v) || v < 0 {
			return 0
		}
		return min(v, maxSyntheticPerBlock)
	}
	cfg.TxPerBlock, cfg.LogsPerBlock = clamp(cfg.TxPerBlock), clamp(cfg.LogsPerBlock)
	// Every parameter that shapes the blocks goes into the seed that all
	// values derive from (hashchain.Seed), so that chains of different
	// parameters share no block hash at any height, genesis included.
	seed := hashchain.Seed("evm", cfg.Seed,
		[]uint64{cfg.ChainID, math.Float64bits(cfg.TxPerBlock), math.Float64bits(cfg.LogsPerBlock)},
		[]uint64{DefaultSyntheticChainID, math.Float64bits(DefaultSyntheticTxPerBlock), math.Float64bits(DefaultSyntheticLogsPerBlock)})
	s := &Synthetic{cfg: cfg, seed: seed}
	s.pools = newPools(s.seed)
	s.hashes = hashchain.New()
	if f := cfg.Fork; f != nil && f.At >= 1 && len(f.Parent) == 32 {
		s.first, s.base = f.At, [32]byte(f.Parent)
	}
	return s
}

// Family reports chain.FamilyEVM.
func (s *Synthetic) Family() chain.Family { return chain.FamilyEVM }

// ChainID returns the configured chain id in decimal.
func (s *Synthetic) ChainID(ctx context.Context) (string, error) {
	return strconv.FormatUint(s.cfg.ChainID, 10), nil
}

// Tip returns the configured tip.
func (s *Synthetic) Tip(ctx context.Context) (uint64, error) {
	return s.tip(), nil
}

func (s *Synthetic) tip() uint64 {
	if s.cfg.Tip != nil {
		return s.cfg.Tip()
	}
	return DefaultSyntheticTip
}

// Fetch generates the blocks from..to inclusive. The records are rendered
// first, then chained from block from-1's hash (see hashOf).
func (s *Synthetic) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if from > to {
		return nil, fmt.Errorf("evm: synthetic fetch %d-%d: empty range", from, to)
	}
	if from < s.first {
		return nil, fmt.Errorf("evm: synthetic fetch %d-%d: this fork starts at %d", from, to, s.first)
	}
	if tip := s.tip(); to > tip {
		return nil, fmt.Errorf("evm: synthetic fetch %d-%d: beyond tip %d", from, to, tip)
	}
	release := s.hashes.Claim(from, to)
	defer release()
	out := make([]chain.Block, 0, to-from+1)
	pend := make([]pendingBlock, 0, to-from+1)
	g := s.generator()
	for h := from; ; h++ {
		if err := ctx.Err(); err != nil {
			s.gens.Put(g)
			return nil, fmt.Errorf("evm: synthetic fetch block %d: %w", h, err)
		}
		raw, p := g.render(s, h)
		out = append(out, chain.Block{Height: h, Raw: raw})
		pend = append(pend, p)
		if h == to {
			break
		}
	}
	s.gens.Put(g)
	var parent [32]byte
	if from > 0 {
		var err error
		if parent, err = s.hashOf(ctx, from-1); err != nil {
			return nil, fmt.Errorf("evm: synthetic fetch %d-%d: %w", from, to, err)
		}
	}
	for i := range out {
		b := &out[i]
		b.ParentHash = append([]byte(nil), parent[:]...)
		parent = pend[i].finish(b.Raw, parent)
		b.Hash = append([]byte(nil), parent[:]...)
		s.hashes.Put(b.Height, parent)
	}
	return out, nil
}

func (s *Synthetic) generator() *generator {
	g, _ := s.gens.Get().(*generator)
	if g == nil {
		g = &generator{}
	}
	return g
}

// Block generates the block at height h.
func (s *Synthetic) Block(h uint64) chain.Block {
	bs, err := s.Fetch(context.Background(), h, h)
	if err != nil {
		panic(err) // h is above the tip
	}
	return bs[0]
}

// Record returns the raw record of block h.
func (s *Synthetic) Record(h uint64) []byte {
	var parent [32]byte
	if h > 0 {
		parent, _ = s.hashOf(context.Background(), h-1)
	}
	g := s.generator()
	raw, p := g.render(s, h)
	s.gens.Put(g)
	s.hashes.Put(h, p.finish(raw, parent))
	return raw
}

// BlockHash returns the hash of block h.
func (s *Synthetic) BlockHash(h uint64) []byte {
	sum, err := s.hashOf(context.Background(), h)
	if err != nil {
		panic(err) // only ctx ends a walk, and this one has none
	}
	return sum[:]
}

// hashOf returns the hash of block h: known, being produced by a Fetch (it
// waits for it), or produced here by walking from the highest known height
// below it (hashchain.Chain.Walk).
func (s *Synthetic) hashOf(ctx context.Context, h uint64) ([32]byte, error) {
	var g *generator
	defer func() {
		if g != nil {
			s.gens.Put(g)
		}
	}()
	return s.hashes.Walk(ctx, h, s.first, s.base, 16, func(k uint64, parent [32]byte) [32]byte {
		if g == nil {
			g = s.generator()
		}
		raw, p := g.render(s, k)
		return p.finish(raw, parent)
	})
}

// ExpectedCounts returns the number of transactions and logs block h
// holds, from the generator's own parameters and without generating it.
func (s *Synthetic) ExpectedCounts(h uint64) (txs, logs int) {
	if h == 0 {
		return 0, 0 // genesis
	}
	r := newRNG(s.seed, h, streamCounts)
	mean := s.cfg.TxPerBlock
	if mean == 0 || r.float() < 0.01 {
		return 0, 0 // about one block in a hundred is empty, as on mainnet
	}
	txs = int(mean*(0.5+r.float()) + 0.5)
	if txs == 0 {
		return 0, 0
	}
	logs = int(s.cfg.LogsPerBlock*float64(txs)/mean*(0.75+0.5*r.float()) + 0.5)
	return txs, logs
}
