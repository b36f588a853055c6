package evm

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/blockhaul/blockhaul/chain"
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
}

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
	return errors.Join(errs...)
}

func (c *SyntheticConfig) ensureDefaults() {
	if c.ChainID == 0 {
		c.ChainID = DefaultSyntheticChainID
	}
	if c.TxPerBlock == 0 {
		c.TxPerBlock = DefaultSyntheticTxPerBlock
	}
	if c.LogsPerBlock == 0 {
		c.LogsPerBlock = DefaultSyntheticLogsPerBlock
	}
}

// Synthetic is a deterministic, seedable EVM chain that produces the raw
// records a geth node would (see MarshalRecord): blocks with full
// transactions of types 0 to 4 in a mainnet-like mix, and their receipts
// and logs, at mainnet-like density.
//
// Every block is a pure function of (seed, height), so any height can be
// generated on its own, in any order, from any number of goroutines. The
// chain starts at height 0, an empty genesis block whose parent hash is
// zero; the hash of block h is sha256(seed || h), so that block h+1 can
// name its parent without generating it. Hashes, roots, signatures and
// blooms have the right shapes but are not the real keccak/RLP
// commitments: nothing downstream recomputes them.
//
// Synthetic is safe for concurrent use.
type Synthetic struct {
	cfg   SyntheticConfig
	seed  uint64
	pools *pools
	gens  sync.Pool // *generator
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
	s := &Synthetic{cfg: cfg, seed: uint64(cfg.Seed)}
	s.pools = newPools(s.seed)
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

// Fetch generates the blocks from..to inclusive.
func (s *Synthetic) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if from > to {
		return nil, fmt.Errorf("evm: synthetic fetch %d-%d: empty range", from, to)
	}
	if tip := s.tip(); to > tip {
		return nil, fmt.Errorf("evm: synthetic fetch %d-%d: beyond tip %d", from, to, tip)
	}
	out := make([]chain.Block, 0, to-from+1)
	for h := from; ; h++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("evm: synthetic fetch block %d: %w", h, err)
		}
		out = append(out, s.Block(h))
		if h == to {
			return out, nil
		}
	}
}

// Block generates the block at height h.
func (s *Synthetic) Block(h uint64) chain.Block {
	hash := s.BlockHash(h)
	parent := make([]byte, 32)
	if h > 0 {
		parent = s.BlockHash(h - 1)
	}
	return chain.Block{Height: h, Hash: hash, ParentHash: parent, Raw: s.Record(h)}
}

// Record returns the raw record of block h.
func (s *Synthetic) Record(h uint64) []byte {
	g, _ := s.gens.Get().(*generator)
	if g == nil {
		g = &generator{}
	}
	raw := g.record(s, h)
	s.gens.Put(g)
	return raw
}

// BlockHash returns the hash of block h: sha256(seed || h), both
// big-endian.
func (s *Synthetic) BlockHash(h uint64) []byte {
	var in [16]byte
	binary.BigEndian.PutUint64(in[:8], s.seed)
	binary.BigEndian.PutUint64(in[8:], h)
	sum := sha256.Sum256(in[:])
	return sum[:]
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
