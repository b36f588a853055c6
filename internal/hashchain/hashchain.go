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
		if k == lo {
			return 0, [32]byte{}, false
		}
	}
}
