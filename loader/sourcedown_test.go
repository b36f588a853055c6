package loader

import (
	"errors"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
)

type downErr struct{ down bool }

func (e downErr) Error() string      { return "no healthy endpoint" }
func (e downErr) SourceDown() bool   { return e.down }
func (e downErr) Fault() fault.Class { return fault.Transient }

// TestSourceDownIsAnOutage: a span whose attempts fail because the client had
// no healthy endpoint left is waiting on the source, not spending its own
// budget, even when no other span has failed since the last success (it
// failed just after the node came back, before the client probed it again).
func TestSourceDownIsAnOutage(t *testing.T) {
	cfg := Config{MaxRetries: 2, DownAfter: time.Hour, BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	for _, down := range []bool{true, false} {
		health := newSourceHealth(time.Now())
		j := &spanJob{span: staging.Range{From: 1, To: 16}}
		var ferr error
		for i := 0; i < 10 && ferr == nil; i++ {
			var again *spanJob
			again, ferr = j.failed(downErr{down}, &cfg, health)
			if again != nil {
				j = again
			}
			health.ok() // another span fetched in between: no two spans failing at once
		}
		if down && ferr != nil {
			t.Fatalf("source down: the span ended the fetch: %v", ferr)
		}
		if !down && (ferr == nil || !errors.As(ferr, new(*FetchError))) {
			t.Fatalf("span's own failures: want its FetchError after its budget, got %v", ferr)
		}
	}
}
