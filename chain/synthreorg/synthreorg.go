// Package synthreorg makes a synthetic chain reorganise as its tip grows,
// for any family whose synthetic chain can fork off another: each time the
// tip reaches a multiple of Every, the Depth blocks below it are replaced
// by those of a new branch, which the chain then grows on.
//
// The canonical chain at tip T is made of branches: branch 0 is the
// family's chain; branch k ≥ 1, of a seed of its own, forks off branch k-1
// at height k·Every−Depth and is canonical from there once the tip has
// reached k·Every. So block h, at tip T, is branch min(T/Every,
// (h+Depth)/Every)'s; every hash is real and links to its parent's, and a
// follower that exported the blocks a reorg replaced finds the break at
// the fork.
package synthreorg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/hashchain"
)

// Reorgs is how a chain reorganises.
type Reorgs struct {
	Every uint64 // a reorg each Every blocks (≥ Depth+2)
	Depth uint64 // blocks replaced by each (≥ 1)
}

// MaxDepth bounds Reorgs.Depth.
const MaxDepth = 10_000

// Validate returns every problem of the reorganisations at once.
func (r Reorgs) Validate() error {
	var errs []error
	if r.Depth < 1 || r.Depth > MaxDepth {
		errs = append(errs, fmt.Errorf("synthetic reorg depth %d: want 1 to %d", r.Depth, MaxDepth))
	}
	if r.Every < r.Depth+2 {
		errs = append(errs, fmt.Errorf("synthetic reorgs every %d blocks: want at least the depth plus 2 (%d)", r.Every, r.Depth+2))
	}
	return errors.Join(errs...)
}

// Branch is one branch of the chain: the family's synthetic chain, or a
// fork of it.
type Branch interface {
	Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error)
	BlockHash(h uint64) []byte
}

// Config describes the chain to reorganise.
type Config struct {
	Reorgs
	Family  chain.Family
	ChainID string        // the same on every branch
	First   uint64        // the lowest height (1 for CometBFT, 0 for EVM)
	Tip     func() uint64 // the current tip
	// Branch returns branch k: for k = 0 the chain itself; for k ≥ 1 the
	// chain of k's own seed forking at height at, whose parent is parent.
	Branch func(k, at uint64, parent [32]byte) Branch
}

// Chain is a reorganising synthetic chain (a loader.Source). It is safe
// for concurrent use; it keeps the few most recently used branches and
// every branch's fork parent (32 bytes each), so memory stays flat however
// long the chain runs.
type Chain struct {
	cfg Config

	mu       sync.Mutex
	branches map[uint64]Branch
	used     []uint64            // branches but 0, least recently used first
	parents  map[uint64][32]byte // branch k's fork parent: branch k-1's block At-1
}

// LiveBranches is how many branches a Chain keeps generated.
const LiveBranches = 8

// New returns the chain of cfg. It panics if cfg.Reorgs does not validate:
// configurations from users are validated before.
func New(cfg Config) *Chain {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.ForkAt(1) <= cfg.First {
		panic("synthreorg: the first fork must be above the first height")
	}
	return &Chain{
		cfg:      cfg,
		branches: map[uint64]Branch{0: cfg.Branch(0, 0, [32]byte{})},
		parents:  map[uint64][32]byte{},
	}
}

// Fork is where a synthetic chain branches off another: its block At names
// Parent (the 32-byte hash of the other chain's block At-1) as its parent,
// and it has no blocks below At.
type Fork struct {
	At     uint64
	Parent []byte
}

// Seeded returns the chain of cfg (its Branch unset) whose branches are a
// family's synthetic chains of their own seeds. The reorganisations are
// parameters of the chain like any other: they go into its seed
// (hashchain.Seed, tagged name+"-reorgs"), so that not even the blocks
// below the first fork are those of the chain without reorgs; branch k ≥ 1
// takes a seed of its own (tagged name+"-reorg"). synthetic returns the
// family's chain of a seed, a fork when fork is not nil.
func Seeded(cfg Config, name string, seed int64, synthetic func(seed int64, fork *Fork) Branch) *Chain {
	seed = int64(hashchain.Seed(name+"-reorgs", seed, []uint64{cfg.Every, cfg.Depth}, []uint64{0, 0}))
	cfg.Branch = func(k, at uint64, parent [32]byte) Branch {
		if k == 0 {
			return synthetic(seed, nil)
		}
		return synthetic(int64(hashchain.Seed(name+"-reorg", seed, []uint64{k}, []uint64{0})), &Fork{At: at, Parent: parent[:]})
	}
	return New(cfg)
}

// Family returns the chain's family.
func (c *Chain) Family() chain.Family { return c.cfg.Family }

// ChainID returns the chain's id, the same on every branch.
func (c *Chain) ChainID(context.Context) (string, error) { return c.cfg.ChainID, nil }

// Tip returns the chain's current tip.
func (c *Chain) Tip(context.Context) (uint64, error) { return c.cfg.Tip(), nil }

// Reorgs returns how many reorganisations the chain has had at tip.
func (c *Chain) Reorgs(tip uint64) uint64 { return tip / c.cfg.Every }

// branchOf is the branch block h belongs to at tip.
func (c *Chain) branchOf(h, tip uint64) uint64 {
	return min(tip/c.cfg.Every, (h+c.cfg.Depth)/c.cfg.Every)
}

// ForkAt is the first height of branch k ≥ 1.
func (r Reorgs) ForkAt(k uint64) uint64 { return k*r.Every - r.Depth }

// branch returns branch k, generating it (and its fork parent) if need be.
func (c *Chain) branch(k uint64) Branch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.branchLocked(k)
}

func (c *Chain) branchLocked(k uint64) Branch {
	if b, ok := c.branches[k]; ok {
		if k > 0 {
			c.used = append(slices.DeleteFunc(c.used, func(u uint64) bool { return u == k }), k)
		}
		return b
	}
	if _, ok := c.parents[k]; !ok {
		// From the nearest branch below whose fork parent is known or
		// which is kept, up: each step generates at most Every blocks.
		j := k - 1
		for j > 0 {
			_, known := c.parents[j]
			_, kept := c.branches[j]
			if known || kept {
				break
			}
			j--
		}
		for ; j < k; j++ {
			b := c.branchLocked(j)
			c.parents[j+1] = [32]byte(b.BlockHash(c.cfg.ForkAt(j+1) - 1))
		}
	}
	b := c.cfg.Branch(k, c.cfg.ForkAt(k), c.parents[k])
	c.branches[k] = b
	c.used = append(c.used, k)
	// Branch 0, which holds the history below the first fork, stays.
	for len(c.used) > LiveBranches-1 {
		delete(c.branches, c.used[0])
		c.used = c.used[1:]
	}
	return b
}

// Fetch returns the blocks from..to of the canonical chain at the current
// tip.
func (c *Chain) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	tip := c.cfg.Tip()
	if from < c.cfg.First || to < from {
		return nil, fmt.Errorf("%s: synthetic fetch %d..%d: invalid range (heights start at %d)", c.cfg.Family, from, to, c.cfg.First)
	}
	if to > tip {
		return nil, fmt.Errorf("%s: synthetic fetch %d..%d: beyond tip %d", c.cfg.Family, from, to, tip)
	}
	out := make([]chain.Block, 0, to-from+1)
	for h := from; h <= to; {
		k := c.branchOf(h, tip)
		end := to
		if next := c.cfg.ForkAt(k + 1); k < tip/c.cfg.Every && next <= to {
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
func (c *Chain) Block(h uint64) chain.Block {
	bs, err := c.Fetch(context.Background(), h, h)
	if err != nil {
		panic(err)
	}
	return bs[0]
}

// Kept is the number of branches generated now.
func (c *Chain) Kept() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.branches)
}
