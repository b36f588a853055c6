package loader

import (
	"errors"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
)

// transientErr is a failure worth retrying that names no height.
type transientErr struct{}

func (transientErr) Error() string      { return "HTTP 503" }
func (transientErr) Fault() fault.Class { return fault.Transient }

// TestOutageOverlapIsTheSources: a span whose attempt started before the
// source went down and failed after it had served another span again (the
// client's retries spent during the outage) waits on the outage, not on its
// own budget; a span that keeps failing while the others are served spends
// its own budget and ends the fetch. Before the rule, the first case ended
// the fetch (faults' TestNodeDownIsWaitedOutWithinItsBound under load); a
// rule that trusted the client's "no healthy endpoint" waited out a single
// height's HTTP 500 forever (pipeline's TestRunEndsOnPersistentBadAnswer).
func TestOutageOverlapIsTheSources(t *testing.T) {
	cfg := Config{MaxRetries: 2, DownAfter: time.Hour, BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	for _, overlap := range []bool{true, false} {
		health := newSourceHealth(time.Now())
		j := &spanJob{span: staging.Range{From: 1, To: 16}}
		var ferr error
		for i := 0; i < 10 && ferr == nil; i++ {
			j.started = time.Now()
			if overlap {
				// While the attempt ran, two other spans failed (the
				// source down), then one was served (it came back).
				health.failed(staging.Range{From: 17, To: 32})
				health.failed(staging.Range{From: 33, To: 48})
			}
			health.ok()
			var again *spanJob
			again, ferr = j.failed(transientErr{}, &cfg, health)
			if again != nil {
				j = again
			}
		}
		if overlap && ferr != nil {
			t.Fatalf("attempts overlapping the outage ended the fetch: %v", ferr)
		}
		if !overlap && (ferr == nil || !errors.As(ferr, new(*FetchError))) {
			t.Fatalf("a span failing alone: want its FetchError after its budget, got %v", ferr)
		}
	}
}
