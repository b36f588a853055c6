package loader

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// spentSource fails every request for a height with an error saying it
// spent a retry budget of its own (as the RPC client's *CallError does).
type spentSource struct {
	*fakeSource
	at       uint64
	attempts int
}

type spentErr struct{ n int }

func (e spentErr) Error() string      { return fmt.Sprintf("failed after %d attempts", e.n) }
func (e spentErr) Fault() fault.Class { return fault.Failed }
func (e spentErr) SpentAttempts() int { return e.n }

func (s *spentSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if from <= s.at && s.at <= to {
		s.mu.Lock()
		s.asked[s.at]++
		s.mu.Unlock()
		return nil, spentErr{s.attempts}
	}
	return s.fakeSource.Fetch(ctx, from, to)
}

// Unsound answers spread over a span's heights are ridden out, however
// many there are in all: no height fails its budget (6) on its own. The
// same span failing this often at one height ends the fetch.
func TestFetchRidesOutFailuresSpreadOverHeights(t *testing.T) {
	store := openStore(t)
	src := newFake()
	for h := uint64(11); h <= 15; h++ {
		src.unlinked[h] = 4 // 20 failed answers of one span, 4 a height
	}
	st, err := Fetch(context.Background(), src, store, 11, 15, fast, nil)
	if err != nil || st.Blocks != 5 {
		t.Fatalf("spread failures: %v, %d staged; want all 5 after %d retries", err, st.Blocks, st.Retries)
	}
	if st.Retries < 4 {
		t.Fatalf("%d retries: the scenario did not happen", st.Retries)
	}
	store = openStore(t)
	src = newFake()
	src.unlinked[13] = 100
	_, err = Fetch(context.Background(), src, store, 11, 15, fast, nil)
	var ib *InvalidBlockError
	if !errors.As(err, &ib) || ib.Height != 13 || src.asked[13] != 6 || fault.ExitStatus(err) != fault.ExitData {
		t.Fatalf("err %v (exit %d) after %d asks; want block 13 invalid after 6, exit 4", err, fault.ExitStatus(err), src.asked[13])
	}
}

// A request that spent a budget of its own goes back to the queue once;
// the second costs the rest of the span's budget: 2 requests (12 attempts
// of the source's), not 6 (36), and the error says so, exit 1.
func TestFetchSpentRequestIsNotRetriedInsideAnotherBudget(t *testing.T) {
	store := openStore(t)
	src := &spentSource{fakeSource: newFake(), at: 23, attempts: 6}
	st, err := Fetch(context.Background(), src, store, 1, 40, fast, nil)
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Range.From != 21 || src.asked[23] != 2 {
		t.Fatalf("err %v after %d requests for 23; want a FetchError for 21-25 after 2", err, src.asked[23])
	}
	if n, ok := fault.Attempts(err); !ok || n != 12 || fault.ExitStatus(err) != fault.ExitFailed || fault.Retryable(err) {
		t.Fatalf("err %v: %d attempts (%v), exit %d; want 12 attempts spent, exit 1, not retryable", err, n, ok, fault.ExitStatus(err))
	}
	if st.Retries != 1 {
		t.Fatalf("%d retries, want the span put back once", st.Retries)
	}
}

// downSource fails every request while down is set, and counts them.
type downSource struct {
	*fakeSource
	failing  atomic.Int64 // requests still to fail (negative: every one)
	requests atomic.Int64
}

func (s *downSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	s.requests.Add(1)
	if n := s.failing.Load(); n < 0 || n > 0 && s.failing.Add(-1) >= 0 {
		return nil, transient{"connection refused"}
	}
	return s.fakeSource.Fetch(ctx, from, to)
}

// A source down for a while (every request failing, many times the budget
// of any span) is waited out: no span's budget is spent while nothing is
// served, and every height is staged once it is back. (The first span to
// spend its budget ended the fetch.)
func TestFetchWaitsOutASourceThatIsDown(t *testing.T) {
	store := openStore(t)
	src := &downSource{fakeSource: newFake()}
	src.failing.Store(200) // 8 spans, a budget of 3 failures each: 24
	cfg := fast
	cfg.MaxRetries = 2
	cfg.DownAfter = time.Hour
	st, err := Fetch(context.Background(), src, store, 1, 40, cfg, nil)
	if err != nil || st.Blocks != 40 {
		t.Fatalf("through an outage of 200 requests: %v, %d staged", err, st.Blocks)
	}
	if st.Retries < 200 {
		t.Fatalf("%d retries: the outage did not happen", st.Retries)
	}
}

// A source that stays down past DownAfter ends the fetch, naming the
// bound and the last failure, exit 1.
func TestFetchEndsWhenTheSourceStaysDown(t *testing.T) {
	store := openStore(t)
	src := &downSource{fakeSource: newFake()}
	src.failing.Store(-1)
	cfg := fast
	cfg.MaxRetries = 2
	cfg.DownAfter = 100 * time.Millisecond
	_, err := Fetch(context.Background(), src, store, 1, 40, cfg, nil)
	var de *DownError
	if !errors.As(err, &de) || de.For < cfg.DownAfter || fault.ExitStatus(err) != fault.ExitFailed ||
		!strings.Contains(err.Error(), "past its bound of 100ms (--rpc-down-after)") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err %v (exit %d); want a DownError past 100ms naming the last failure, exit 1", err, fault.ExitStatus(err))
	}
	if n := src.requests.Load(); n <= int64(cfg.MaxRetries+1) {
		t.Fatalf("%d requests: the spans' budgets ended the fetch, not the bound", n)
	}
}

// faultySource is a node behind an RPC client, the node failing a fifth
// of its requests at random (seeded) across the classes a node shows: of
// every 7 faults, 5 are transient (429, 5xx, a hang, a cut body, a reset),
// which the client retries within its own budget of 6 attempts, and 2 an
// answer for one height that does not verify (a wrong height or hash),
// which only the loader sees. A request whose 6 attempts all failed
// transiently is a spent budget, as the client reports it.
type faultySource struct {
	*fakeSource
	mu  sync.Mutex
	rng *rand.Rand
	n   map[string]int
}

func (s *faultySource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	s.mu.Lock()
	for attempt := 1; ; attempt++ {
		if s.rng.Float64() >= 0.2 {
			break
		}
		if s.rng.IntN(7) >= 5 {
			s.n["unsound"]++
			h := from + s.rng.Uint64N(to-from+1)
			s.mu.Unlock()
			return nil, &InvalidBlockError{Height: h, Reason: "hash mismatch"}
		}
		s.n["transient"]++
		if attempt == 6 {
			s.n["spent"]++
			s.mu.Unlock()
			return nil, spentErr{6}
		}
	}
	s.mu.Unlock()
	return s.fakeSource.Fetch(ctx, from, to)
}

// A source failing a fifth of its requests across every class is ridden
// out over a long range: no height fails its budget on its own, and spans
// whose attempts ran out go back to the queue.
func TestFetchRidesOutAFifthOfRequestsFailing(t *testing.T) {
	store := openStore(t)
	src := &faultySource{fakeSource: newFake(), rng: rand.New(rand.NewPCG(20, 5)), n: map[string]int{}}
	const to = 20000
	cfg := fast
	cfg.Workers = 8
	st, err := Fetch(context.Background(), src, store, 1, to, cfg, nil)
	if err != nil || st.Blocks != to {
		t.Fatalf("20%% faults (%v): %v, %d of %d staged", src.n, err, st.Blocks, to)
	}
	if src.n["transient"] == 0 || src.n["unsound"] == 0 {
		t.Fatalf("faults injected %v: a class is missing", src.n)
	}
	t.Logf("%d blocks through %v faults: %d retries", st.Blocks, src.n, st.Retries)
}
