// Package hashchain memoizes the block hashes of a synthetic chain whose
// hashes are real: each block's hash commits to its header, which names the
// parent's hash, so block h's hash can only be known once block h-1's is.
// A generator renders a span's blocks (the expensive part, in parallel with
// other spans), then asks for the hash before the span's first block —
// known, being produced by another span (it waits), or computed by walking
// forward from the nearest known one — and chains its own hashes from it.
//
// A Chain is safe for concurrent use. It keeps the hashes of the last Ring
// heights stored and one in every Stride below them, so memory grows by a
// few bytes per Stride heights and a walk is at most Stride blocks long
// once the chain below has been produced once.
package hashchain

import (
	"context"
	"sync"
)

// Sizes of a Chain.
const (
	Ring   = 1 << 13
	Stride = 1 << 10
)

// Chain holds known hashes and the heights being produced.
type Chain struct {
	walkMu  sync.Mutex // one walk at a time (see Walk)
	mu      sync.Mutex
	ring    [Ring]entry
	marks   map[uint64][32]byte // every Stride-th height
	pending map[uint64]*claim
}

type entry struct {
	h    uint64
	hash [32]byte
	ok   bool
}

type claim struct {
	done chan struct{}
	n    int // heights that point at it
}

// New returns an empty chain.
func New() *Chain {
	return &Chain{marks: make(map[uint64][32]byte), pending: make(map[uint64]*claim)}
}

// Get returns the hash of height h if it is known.
func (c *Chain) Get(h uint64) ([32]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.get(h)
}

func (c *Chain) get(h uint64) ([32]byte, bool) {
	if e := &c.ring[h%Ring]; e.ok && e.h == h {
		return e.hash, true
	}
	v, ok := c.marks[h]
	return v, ok
}

// Put records the hash of height h.
func (c *Chain) Put(h uint64, hash [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ring[h%Ring] = entry{h: h, hash: hash, ok: true}
	if h%Stride == 0 {
		c.marks[h] = hash
	}
}

// Claim records that the caller is producing the hashes of from..to; other
// callers that need one of them wait (see Wait) rather than walk. The
// caller must call the returned release once done, whether or not it Put
// the hashes. Heights another caller already claimed are left to it.
func (c *Chain) Claim(from, to uint64) (release func()) {
	cl := &claim{done: make(chan struct{})}
	c.mu.Lock()
	var mine []uint64
	for h := from; ; h++ {
		if _, busy := c.pending[h]; !busy {
			c.pending[h] = cl
			mine = append(mine, h)
		}
		if h == to {
			break
		}
	}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		for _, h := range mine {
			if c.pending[h] == cl {
				delete(c.pending, h)
			}
		}
		c.mu.Unlock()
		close(cl.done)
	}
}

// Wait waits until no caller is producing h, and reports whether one was.
// It returns ctx's error if ctx ends first.
func (c *Chain) Wait(ctx context.Context, h uint64) (waited bool, err error) {
	c.mu.Lock()
	cl := c.pending[h]
	c.mu.Unlock()
	if cl == nil {
		return false, nil
	}
	select {
	case <-cl.done:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// Pending reports whether a caller is producing h.
func (c *Chain) Pending(h uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[h] != nil
}

// Nearest returns the highest height k in [lo, h] whose hash is known, for
// a walk to start from; ok is false when none is.
func (c *Chain) Nearest(lo, h uint64) (k uint64, hash [32]byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k = h; ; k-- {
		if v, ok := c.get(k); ok {
			return k, v, true
		}
		// Below the ring's reach only marks can be known.
		if h-k >= Ring {
			return c.nearestMark(lo, k)
		}
		if k == lo {
			return 0, [32]byte{}, false
		}
	}
}

// nearestMark returns the highest mark in [lo, k]. Its cost is bounded by
// the marks held, not by the distance from lo to k: a height far above
// any produced (10^14 over a chain produced to 10^4) looks at each mark
// once instead of every Stride-th height down to lo.
func (c *Chain) nearestMark(lo, k uint64) (uint64, [32]byte, bool) {
	if (k-lo)/Stride <= uint64(len(c.marks)) {
		for m := k - k%Stride; m >= lo; m -= Stride {
			if v, ok := c.marks[m]; ok {
				return m, v, true
			}
			if m < Stride {
				break
			}
		}
		return 0, [32]byte{}, false
	}
	var best uint64
	var hash [32]byte
	found := false
	for m, v := range c.marks {
		if m >= lo && m <= k && (!found || m > best) {
			best, hash, found = m, v, true
		}
	}
	return best, hash, found
}

// Walk returns the hash of height h of a chain whose lowest height is
// first and whose first block names base as its parent (a fork's parent,
// or zero): base itself for h below first; else h's hash when known, or
// once the caller producing it is done (it waits); else produced here by
// walking up from the highest known height below h (from first over base
// when none is), step giving each block's hash from its parent's, every
// hash recorded (Put). Walks are serialised, and a walker waits for
// nothing (a Fetch it waited for might need to walk). ctx is checked every
// checkEvery blocks of a walk; its error ends the walk.
func (c *Chain) Walk(ctx context.Context, h, first uint64, base [32]byte, checkEvery uint64, step func(k uint64, parent [32]byte) [32]byte) ([32]byte, error) {
	if h < first {
		return base, nil // a fork's parent (h = first-1)
	}
	for {
		if v, ok := c.Get(h); ok {
			return v, nil
		}
		waited, err := c.Wait(ctx, h)
		if err != nil {
			return [32]byte{}, err
		}
		if waited {
			continue
		}
		// A walk that ran meanwhile may have produced h, or a Fetch may
		// have claimed it since.
		c.walkMu.Lock()
		if _, ok := c.Get(h); !ok && !c.Pending(h) {
			break
		}
		c.walkMu.Unlock()
	}
	defer c.walkMu.Unlock()
	from, parent := first, base
	if k, v, ok := c.Nearest(first, h); ok {
		from, parent = k+1, v
	}
	for k := from; k <= h; k++ {
		if (k-from)%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return [32]byte{}, err
			}
		}
		parent = step(k, parent)
		c.Put(k, parent)
	}
	return parent, nil
}
