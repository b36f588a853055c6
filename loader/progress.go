package loader

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/blockhaul/blockhaul/staging"
)

type countingRetries struct{ n atomic.Uint64 }

// Progress tracks which heights of a fetch are committed and exposes the
// contiguous staged prefix of the range, which an exporter follows. It
// holds the gaps the fetch planned and the committed spans above the prefix,
// merged where they touch: spans are handed out in height order, so that
// set is as large as the number of spans in flight, and a Progress costs
// the same for a range of any length. It is safe for concurrent use.
type Progress struct {
	from, to uint64

	mu         sync.Mutex
	gaps       []staging.Range // missing when the fetch was planned
	gap        int             // index of the gap holding next
	next       uint64          // lowest planned height not yet committed
	complete   bool            // every planned height is committed
	ahead      []staging.Range // committed above next: sorted, disjoint, merged
	planned    bool
	finished   bool
	err        error
	changed    chan struct{} // closed and replaced on every change
	committedN uint64
}

// NewProgress returns a Progress for the range [from, to].
func NewProgress(from, to uint64) *Progress {
	return &Progress{from: from, to: to, changed: make(chan struct{})}
}

// plan records the gaps of [from, to] the fetch will fill (sorted, disjoint,
// within the range); heights outside them are staged already.
func (p *Progress) plan(gaps []staging.Range) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gaps, p.gap, p.ahead, p.planned = gaps, 0, nil, true
	p.complete = len(gaps) == 0
	if !p.complete {
		p.next = gaps[0].From
	}
	p.notifyLocked()
}

// committed records spans (each within one planned gap) as staged.
func (p *Progress) committed(done []staging.Range) {
	if len(done) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range done {
		p.committedN += r.Len()
		p.insertLocked(r)
	}
	for !p.complete && len(p.ahead) > 0 && p.ahead[0].From == p.next {
		last := p.ahead[0].To
		p.ahead = slices.Delete(p.ahead, 0, 1) // short: about the spans in flight
		for p.gap < len(p.gaps) && last >= p.gaps[p.gap].To {
			p.gap++
		}
		switch {
		case p.gap == len(p.gaps):
			p.complete = true
		case last+1 < p.gaps[p.gap].From:
			p.next = p.gaps[p.gap].From // the heights between gaps were staged
		default:
			p.next = last + 1
		}
	}
	p.notifyLocked()
}

// insertLocked adds r to ahead, merging it with the ranges it touches.
func (p *Progress) insertLocked(r staging.Range) {
	i, _ := slices.BinarySearchFunc(p.ahead, r.From, func(a staging.Range, h uint64) int { return cmp.Compare(a.From, h) })
	if i > 0 && p.ahead[i-1].To+1 == r.From {
		i--
		p.ahead[i].To = max(p.ahead[i].To, r.To)
	} else {
		p.ahead = slices.Insert(p.ahead, i, r)
	}
	if i+1 < len(p.ahead) && p.ahead[i].To+1 == p.ahead[i+1].From {
		p.ahead[i].To = p.ahead[i+1].To
		p.ahead = slices.Delete(p.ahead, i+1, i+2)
	}
}

func (p *Progress) finish(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished, p.err = true, err
	p.notifyLocked()
}

func (p *Progress) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// watermarkLocked is the highest height h such that [from, h] is staged;
// ok is false when not even from is.
func (p *Progress) watermarkLocked() (uint64, bool) {
	switch {
	case !p.planned:
		return 0, false
	case p.complete:
		return p.to, true
	case p.next == p.from:
		return 0, false
	}
	return p.next - 1, true
}

// Staged returns the number of heights committed so far by this fetch.
func (p *Progress) Staged() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.committedN
}

// Wait blocks until the contiguous staged prefix reaches at least h, the
// fetch ends, or ctx is done. It returns the prefix's last height (ok false
// when nothing is staged yet) and, once the fetch has ended, its error.
func (p *Progress) Wait(ctx context.Context, h uint64) (last uint64, ok bool, err error) {
	for {
		p.mu.Lock()
		last, ok = p.watermarkLocked()
		finished, ferr, ch := p.finished, p.err, p.changed
		p.mu.Unlock()
		if ok && last >= h {
			return last, ok, nil
		}
		if finished {
			return last, ok, ferr
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return last, ok, ctx.Err()
		}
	}
}
