package loader

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/blockhaul/blockhaul/staging"
)

type countingRetries struct{ n atomic.Uint64 }

// Progress tracks which planned spans of a fetch are committed and exposes
// the contiguous staged prefix of the range, which an exporter follows. It
// is safe for concurrent use.
type Progress struct {
	from, to uint64

	mu         sync.Mutex
	spans      []staging.Range
	done       []bool
	first      int // index of the first span not yet committed
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

func (p *Progress) plan(spans []staging.Range) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spans, p.done, p.first, p.planned = spans, make([]bool, len(spans)), 0, true
	p.notifyLocked()
}

func (p *Progress) committed(idx []int) {
	if len(idx) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, i := range idx {
		p.done[i] = true
		p.committedN += p.spans[i].Len()
	}
	for p.first < len(p.spans) && p.done[p.first] {
		p.first++
	}
	p.notifyLocked()
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
	if !p.planned {
		return 0, false
	}
	if p.first == len(p.spans) {
		return p.to, true
	}
	next := p.spans[p.first].From
	if next == p.from {
		return 0, false
	}
	return next - 1, true
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
