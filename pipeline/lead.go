package pipeline

import (
	"context"
	"sync"
)

// leadGate keeps run's fetch at most lead heights ahead of what export has
// committed. Left alone, a fetch that outpaces export (a fast source, or
// the synthetic chain) runs ahead, competing with export and PostgreSQL for
// the CPU, and then export finishes alone with cores idle; held to a lead,
// fetch fills the gaps export leaves and the run ends when export does. A
// source slower than export never reaches the gate.
type leadGate struct {
	lead uint64

	mu      sync.Mutex
	next    uint64        // first height export has not committed
	changed chan struct{} // closed and replaced when next moves
}

func newLeadGate(lead, next uint64) *leadGate {
	return &leadGate{lead: lead, next: next, changed: make(chan struct{})}
}

// advance records that export has committed every height up to h.
func (g *leadGate) advance(h uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h >= g.next {
		g.next = h + 1
		close(g.changed)
		g.changed = make(chan struct{})
	}
}

// wait returns once height to is within the lead of export, or ctx ends.
func (g *leadGate) wait(ctx context.Context, to uint64) error {
	for {
		g.mu.Lock()
		ok, changed := to < g.next+g.lead, g.changed
		g.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fetchLead is run's lead: the --fetch-lead flag, or four export batches,
// and never less than an export batch plus what the workers hold in flight
// (below that, export could wait for heights the gate holds back).
func fetchLead(cfg *Job) uint64 {
	floor := uint64(cfg.BatchBlocks) + uint64(cfg.FetchWorkers*cfg.FetchSpan)
	lead := cfg.FetchLead
	if lead == 0 {
		lead = 4 * uint64(cfg.BatchBlocks)
	}
	return max(lead, floor)
}
