package cometbft

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/hashchain"
)

// SyntheticReorgs makes a synthetic chain reorganise as its tip grows:
// each time the tip reaches a multiple of Every, the Depth blocks below it
// are replaced by those of a new branch, which the chain then grows on.
type SyntheticReorgs struct {
	Every uint64 // a reorg each Every blocks (≥ Depth+2)
	Depth uint64 // blocks replaced by each (≥ 1)
}

// MaxReorgDepth bounds SyntheticReorgs.Depth.
const MaxReorgDepth = 10_000

// Validate returns every problem of the reorganisations at once.
func (r SyntheticReorgs) Validate() error {
	var errs []error
	if r.Depth < 1 || r.Depth > MaxReorgDepth {
		errs = append(errs, fmt.Errorf("cometbft: synthetic reorg depth %d: want 1 to %d", r.Depth, MaxReorgDepth))
	}
	if r.Every < r.Depth+2 {
		errs = append(errs, fmt.Errorf("cometbft: synthetic reorgs every %d blocks: want at least the depth plus 2 (%d)", r.Every, r.Depth+2))
	}
	return errors.Join(errs...)
}

// ReorgingSynthetic is a synthetic chain that reorganises (see
// SyntheticReorgs). Its canonical chain at tip T is made of branches: branch
// 0 is the chain of its SyntheticConfig; branch k ≥ 1, of a seed of its
// own, forks off branch k-1 at height k·Every−Depth, and is canonical from
// there once the tip has reached k·Every. So block h, at tip T, is branch
// min(T/Every, (h+Depth)/Every)'s, every hash is real and links to its
// parent's, and a follower that exported the blocks a reorg replaced finds
// the break at the fork.
//
// A ReorgingSynthetic is safe for concurrent use. It keeps the few most
// recently used branches and every branch's fork parent (32 bytes each),
// so memory stays flat however long the chain runs.
type ReorgingSynthetic struct {
	cfg     SyntheticConfig
	r       SyntheticReorgs
	chainID string

	mu       sync.Mutex
	branches map[uint64]*Synthetic
	used     []uint64            // branches but 0, least recently used first
	parents  map[uint64][32]byte // branch k's fork parent: branch k-1's block At-1
}

// liveBranches is how many branches a ReorgingSynthetic keeps generated.
const liveBranches = 8

// NewReorgingSynthetic returns the chain of cfg reorganising as r says. It
// panics if cfg or r does not validate: configurations from users are
// validated before.
func NewReorgingSynthetic(cfg SyntheticConfig, r SyntheticReorgs) *ReorgingSynthetic {
	if err := errors.Join(cfg.Validate(), r.Validate()); err != nil {
		panic(err)
	}
	if cfg.Fork != nil {
		panic("cometbft: a reorganising synthetic chain cannot be a fork itself")
	}
	// The reorganisations are parameters of the chain like any other: they
	// go into its seed (hashchain.Seed), so that not even the blocks below
	// the first fork are those of the chain without reorgs.
	if cfg.ChainID == "" {
		cfg.ChainID = "blockhaul-synthetic-" + strconv.FormatInt(cfg.Seed, 10)
	}
	cfg.Seed = int64(hashchain.Seed("cometbft-reorgs", cfg.Seed, []uint64{r.Every, r.Depth}, []uint64{0, 0}))
	base := NewSynthetic(cfg)
	return &ReorgingSynthetic{
		cfg: cfg, r: r, chainID: base.chainID,
		branches: map[uint64]*Synthetic{0: base},
		parents:  map[uint64][32]byte{},
	}
}

// Family returns chain.FamilyCometBFT.
func (c *ReorgingSynthetic) Family() chain.Family { return chain.FamilyCometBFT }

// ChainID returns the chain's id, the same on every branch.
func (c *ReorgingSynthetic) ChainID(context.Context) (string, error) { return c.chainID, nil }

// Tip returns the chain's current tip.
func (c *ReorgingSynthetic) Tip(context.Context) (uint64, error) { return c.tipNow(), nil }

func (c *ReorgingSynthetic) tipNow() uint64 {
	if c.cfg.Tip == nil {
		return DefaultTip
	}
	return c.cfg.Tip()
}

// Reorgs returns how many reorganisations the chain has had at tip.
func (c *ReorgingSynthetic) Reorgs(tip uint64) uint64 { return tip / c.r.Every }

// branchOf is the branch block h belongs to at tip.
func (c *ReorgingSynthetic) branchOf(h, tip uint64) uint64 {
	return min(tip/c.r.Every, (h+c.r.Depth)/c.r.Every)
}

// forkAt is the first height of branch k ≥ 1.
func (c *ReorgingSynthetic) forkAt(k uint64) uint64 { return k*c.r.Every - c.r.Depth }

// branch returns branch k, generating it (and its fork parent) if need be.
func (c *ReorgingSynthetic) branch(k uint64) *Synthetic {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.branchLocked(k)
}

func (c *ReorgingSynthetic) branchLocked(k uint64) *Synthetic {
	if b, ok := c.branches[k]; ok {
		if k > 0 {
			c.used = append(slices.DeleteFunc(c.used, func(u uint64) bool { return u == k }), k)
		}
		return b
	}
	parent, ok := c.parents[k]
	if !ok {
		// The nearest branch below whose fork parent is known, and up
		// from it: each step generates at most Every blocks.
		j := k - 1
		for j > 0 {
			if _, ok := c.parents[j]; ok {
				break
			}
			if _, ok := c.branches[j]; ok {
				break
			}
			j--
		}
		for ; j < k; j++ {
			b := c.branchLocked(j)
			c.parents[j+1] = [32]byte(b.BlockHash(c.forkAt(j+1) - 1))
		}
		parent = c.parents[k]
	}
	bcfg := c.cfg
	bcfg.ChainID = c.chainID
	bcfg.Seed = int64(hashchain.Seed("cometbft-reorg", c.cfg.Seed, []uint64{k}, []uint64{0}))
	bcfg.Fork = &SyntheticFork{At: c.forkAt(k), Parent: parent[:]}
	b := NewSynthetic(bcfg)
	c.branches[k] = b
	c.used = append(c.used, k)
	// Branch 0, which holds the history below the first fork, stays.
	for len(c.used) > liveBranches-1 {
		delete(c.branches, c.used[0])
		c.used = c.used[1:]
	}
	return b
}

// Fetch returns the blocks from..to of the canonical chain at the current
// tip.
func (c *ReorgingSynthetic) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	tip := c.tipNow()
	if from < 1 || to < from {
		return nil, fmt.Errorf("cometbft: synthetic fetch %d..%d: invalid range (heights start at 1)", from, to)
	}
	if to > tip {
		return nil, fmt.Errorf("cometbft: synthetic fetch %d..%d: beyond tip %d", from, to, tip)
	}
	out := make([]chain.Block, 0, to-from+1)
	for h := from; h <= to; {
		k := c.branchOf(h, tip)
		end := to
		if next := c.forkAt(k + 1); k < tip/c.r.Every && next <= to {
			end = next - 1 // branch k+1 takes over at next
		}
		bs, err := c.branch(k).Fetch(ctx, h, end)
		if err != nil {
			return nil, err
		}
		out = append(out, bs...)
		h = end + 1
	}
	return out, nil
}

// Block returns block h of the canonical chain at the current tip.
func (c *ReorgingSynthetic) Block(h uint64) chain.Block {
	bs, err := c.Fetch(context.Background(), h, h)
	if err != nil {
		panic(err)
	}
	return bs[0]
}
