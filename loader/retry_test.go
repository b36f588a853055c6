package loader

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
