// Package aptossynth is a deterministic synthetic Aptos chain: the records
// an Aptos fullnode's REST API would give (chain/aptos's record: a block
// with its transactions and its parent), for the embedded default of
// --chain aptos without --rpc and the benchmark's workload.
//
// Its blocks are those of a modern mainnet: a genesis transaction at
// height 0; then each block a block metadata transaction (with a
// randomness extension, a NewBlockEvent handle event and four resource
// writes), user transactions with entry function payloads, and a block
// epilogue. The densities are mainnet's (docs/aptos.md): about 3.3 billion
// versions over 460 million blocks by late 2025, so ≈7 transactions a
// block of which ≈5.5 are user transactions; a user transaction carries
// ≈3 events (mostly module events: fungible asset withdraw and deposit,
// the fee statement; a few handle events) and ≈9 write set changes
// (resources, a table item of the coin supply, now and then a deleted
// one or a module), and ≈2% of them fail. An epoch is EpochBlocks blocks
// (mainnet's is two hours, ≈30,000 blocks: shorter here so that short
// runs cross epochs); the block that ends one emits the NewEpochEvent and
// carries no user transactions.
//
// Version ranges depend only on the height and the density, not on the
// seed, so a reorganising chain's branches (chain/synthreorg) share them
// and differ in hashes: what a node that answers a height differently than
// before looks like.
package aptossynth

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"golang.org/x/crypto/sha3"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/aptos"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
)

// Defaults of Config.
const (
	DefaultChainID     = 4 // a local testing chain's id
	DefaultTxPerBlock  = 5.5
	DefaultTip         = 1 << 40
	EpochBlocks        = 3600
	maxTxPerBlock      = 5000
	EventsPerUserTx    = 3 // the mean
	ChangesPerUserTx   = 9 // the mean
	FailedUserTxPer100 = 2
)

// Config configures a synthetic Aptos chain; zero fields take defaults.
type Config struct {
	Seed    int64
	ChainID uint64
	// TxPerBlock is the mean number of user transactions a block.
	TxPerBlock float64
	// Steady gives every block the mean.
	Steady bool
	Tip    func() uint64
	// Fork makes the chain a fork of another at Fork.At (chain/synthreorg).
	Fork *synthreorg.Fork
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if math.IsNaN(c.TxPerBlock) || c.TxPerBlock < 0 || c.TxPerBlock > maxTxPerBlock {
		errs = append(errs, fmt.Errorf("aptos: synthetic TxPerBlock %v must be within [0, %d]", c.TxPerBlock, maxTxPerBlock))
	}
	if c.Fork != nil && (c.Fork.At < 1 || len(c.Fork.Parent) != 32) {
		errs = append(errs, fmt.Errorf("aptos: synthetic Fork: want At ≥ 1 and a 32-byte Parent"))
	}
	return errors.Join(errs...)
}

// Chain is a synthetic Aptos chain (a loader.Source). It is safe for
// concurrent use.
type Chain struct {
	cfg    Config
	weight [16]uint64 // user transactions by height residue
	period uint64     // their sum
}

// New returns the chain of cfg; it panics if cfg does not validate
// (configurations from users are validated before).
func New(cfg Config) *Chain {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg.ChainID = cmp.Or(cfg.ChainID, DefaultChainID)
	cfg.TxPerBlock = cmp.Or(cfg.TxPerBlock, DefaultTxPerBlock)
	c := &Chain{cfg: cfg}
	// A block's user transactions cycle through 16 weights whose mean is
	// TxPerBlock (0 to twice it), so a range's version count has a closed
	// form.
	pattern := [16]float64{0, 2, 4, 6, 8, 10, 12, 14, 16, 14, 12, 10, 8, 6, 4, 2}
	for i, w := range pattern {
		if cfg.Steady {
			w = 8
		}
		c.weight[i] = uint64(math.Round(cfg.TxPerBlock * w / 8))
		c.period += c.weight[i]
	}
	return c
}

// NewReorging returns the chain of cfg reorganising as r says; its
// branches share its version ranges.
func NewReorging(cfg Config, r synthreorg.Reorgs) *synthreorg.Chain {
	if err := errors.Join(cfg.Validate(), r.Validate()); err != nil {
		panic(err)
	}
	tip := cfg.Tip
	if tip == nil {
		tip = func() uint64 { return DefaultTip }
	}
	rc := synthreorg.Config{Reorgs: r, Family: chain.FamilyAptos, ChainID: strconv.FormatUint(cmp.Or(cfg.ChainID, DefaultChainID), 10), First: aptos.GenesisHeight, Tip: tip}
	return synthreorg.Seeded(rc, "aptos", cfg.Seed, func(seed int64, fork *synthreorg.Fork) synthreorg.Branch {
		b := cfg
		b.Seed, b.Fork = seed, fork
		return New(b)
	})
}

// Family returns chain.FamilyAptos.
func (*Chain) Family() chain.Family { return chain.FamilyAptos }

// ChainID returns the configured chain id.
func (c *Chain) ChainID(context.Context) (string, error) {
	return strconv.FormatUint(c.cfg.ChainID, 10), nil
}

// Tip returns the configured tip.
func (c *Chain) Tip(context.Context) (uint64, error) {
	if c.cfg.Tip != nil {
		return c.cfg.Tip(), nil
	}
	return DefaultTip, nil
}

// epochEnd reports whether block h ends its epoch.
func epochEnd(h uint64) bool { return h > 0 && h%EpochBlocks == 0 }

// users is the number of user transactions of block h ≥ 1.
func (c *Chain) users(h uint64) uint64 {
	if epochEnd(h) {
		return 0
	}
	return c.weight[(h*7)%16]
}

// userSum is Σ users(k) for k in 1..n.
func (c *Chain) userSum(n uint64) uint64 {
	s := n / 16 * c.period
	for k := n/16*16 + 1; k <= n; k++ {
		s += c.weight[(k*7)%16]
	}
	for e := uint64(EpochBlocks); e <= n; e += EpochBlocks {
		s -= c.weight[(e*7)%16]
	}
	return s
}

// Versions returns block h's first and last versions.
func (c *Chain) Versions(h uint64) (first, last uint64) {
	if h == 0 {
		return 0, 0
	}
	first = 1 + 2*(h-1) + c.userSum(h-1)
	return first, first + 1 + c.users(h)
}

// BlockHash returns block h's hash.
func (c *Chain) BlockHash(h uint64) []byte {
	if f := c.cfg.Fork; f != nil && h < f.At {
		panic(fmt.Sprintf("aptos: synthetic fork at %d has no block %d", f.At, h))
	}
	return c.hash("block", h, 0)
}

// parentHash is block h's parent's hash.
func (c *Chain) parentHash(h uint64) []byte {
	if f := c.cfg.Fork; f != nil && h == f.At {
		return f.Parent
	}
	return c.BlockHash(h - 1)
}

// hash is a deterministic 32-byte value of the chain's seed.
func (c *Chain) hash(what string, h, i uint64) []byte {
	var b [24]byte
	binary.BigEndian.PutUint64(b[:], uint64(c.cfg.Seed))
	binary.BigEndian.PutUint64(b[8:], h)
	binary.BigEndian.PutUint64(b[16:], i)
	s := sha3.Sum256(append([]byte(what), b[:]...))
	return s[:]
}

// Fetch returns blocks from..to.
func (c *Chain) Fetch(_ context.Context, from, to uint64) ([]chain.Block, error) {
	tip, _ := c.Tip(context.Background())
	if to < from || to > tip {
		return nil, fmt.Errorf("aptos: synthetic fetch %d..%d: invalid range (tip %d)", from, to, tip)
	}
	if f := c.cfg.Fork; f != nil && from < f.At {
		return nil, fmt.Errorf("aptos: synthetic fork at %d: no block %d", f.At, from)
	}
	out := make([]chain.Block, 0, to-from+1)
	for h := from; h <= to; h++ {
		raw, err := c.Record(h)
		if err != nil {
			return nil, err
		}
		b := chain.Block{Height: h, Hash: c.BlockHash(h), Raw: raw}
		if h > 0 {
			b.ParentHash = c.parentHash(h)
		}
		out = append(out, b)
	}
	return out, nil
}
