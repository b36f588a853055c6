package loader

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain/chaintest"
	"github.com/blockhaul/blockhaul/staging/stagingtest"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
)

type transient struct{ msg string }

func (e transient) Error() string      { return e.msg }
func (e transient) Fault() fault.Class { return fault.Transient }

// fakeSource serves a hash chain and can fail on chosen heights.
type fakeSource struct {
	mu        sync.Mutex
	asked     map[uint64]int
	failTimes map[uint64]int   // transient failures before success
	fatal     map[uint64]error // permanent failure
	wrong     map[uint64]bool  // returns the wrong height
	unlinked  map[uint64]int   // times to answer with a parent hash that does not link
}

func newFake() *fakeSource {
	return &fakeSource{asked: map[uint64]int{}, failTimes: map[uint64]int{}, fatal: map[uint64]error{}, wrong: map[uint64]bool{}, unlinked: map[uint64]int{}}
}

func (f *fakeSource) Family() chain.Family                    { return chain.FamilyCometBFT }
func (f *fakeSource) ChainID(context.Context) (string, error) { return "fake-1", nil }
func (f *fakeSource) Tip(context.Context) (uint64, error)     { return 1 << 20, nil }
func (f *fakeSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []chain.Block
	for h := from; h <= to; h++ {
		f.asked[h]++
		if err := f.fatal[h]; err != nil {
			return nil, err
		}
		if f.failTimes[h] > 0 {
			f.failTimes[h]--
			return nil, transient{fmt.Sprintf("timeout at %d", h)}
		}
		got := h
		if f.wrong[h] {
			got = h + 100
		}
		parent := hashOf(h - 1)
		if f.unlinked[h] > 0 {
			f.unlinked[h]--
			parent = hashOf(h + 1000)
		}
		out = append(out, chain.Block{Height: got, Hash: hashOf(h), ParentHash: parent, Raw: []byte(fmt.Sprintf(`{"h":%d}`, h))})
	}
	return out, nil
}

func openStore(t *testing.T) *staging.Store {
	s := stagingtest.Open(t, t.TempDir(), staging.Options{})
	t.Cleanup(func() { s.Close() })
	return s
}

var fast = Config{Workers: 4, Span: 5, BaseBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}

func TestFetchStagesOnlyMissing(t *testing.T) {
	store := openStore(t)
	src := newFake()
	if _, err := Fetch(context.Background(), src, store, 10, 29, fast, nil); err != nil {
		t.Fatal(err)
	}
	st, err := Fetch(context.Background(), src, store, 1, 40, fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Planned != 20 || st.Blocks != 20 {
		t.Fatalf("second fetch planned %d staged %d, want 20 and 20", st.Planned, st.Blocks)
	}
	for h := uint64(10); h <= 29; h++ {
		if src.asked[h] != 1 {
			t.Fatalf("height %d asked %d times, want once", h, src.asked[h])
		}
	}
	if m, _ := store.Missing(1, 40); len(m) != 0 {
		t.Fatalf("missing after fetch: %v", m)
	}
}

func TestFetchRetriesTransientErrors(t *testing.T) {
	store := openStore(t)
	src := newFake()
	src.failTimes[7] = 3
	st, err := Fetch(context.Background(), src, store, 1, 20, fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Retries != 3 {
		t.Fatalf("retries = %d, want 3", st.Retries)
	}
	if b, err := store.Get(7); err != nil || string(b.Raw) != `{"h":7}` {
		t.Fatalf("block 7: %v %q", err, b.Raw)
	}
}

func TestFetchGivesUpAfterMaxRetries(t *testing.T) {
	store := openStore(t)
	src := newFake()
	src.failTimes[12] = 100
	cfg := fast
	cfg.MaxRetries = 2
	_, err := Fetch(context.Background(), src, store, 11, 15, cfg, nil)
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Range.From != 11 {
		t.Fatalf("err = %v, want FetchError for span 11-15", err)
	}
	if src.asked[12] != 3 {
		t.Fatalf("height 12 asked %d times, want 3 (1 + 2 retries)", src.asked[12])
	}
}

func TestFetchPermanentErrorNamesHeight(t *testing.T) {
	store := openStore(t)
	src := newFake()
	src.fatal[33] = errors.New("height 33 is not available, lowest height is 50")
	_, err := Fetch(context.Background(), src, store, 31, 35, Config{Workers: 1, Span: 1, BaseBackoff: time.Millisecond}, nil)
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Range.From != 33 {
		t.Fatalf("err = %v, want FetchError at 33", err)
	}
	if src.asked[33] != 1 {
		t.Fatalf("permanent error retried: asked %d times", src.asked[33])
	}
	if want := "fetch block 33: height 33 is not available"; err.Error()[:len(want)] != want {
		t.Fatalf("message %q", err.Error())
	}
}

func TestFetchRefusesWrongHeight(t *testing.T) {
	store := openStore(t)
	src := newFake()
	src.wrong[18] = true
	cfg := fast
	cfg.MaxRetries = 1
	_, err := Fetch(context.Background(), src, store, 16, 20, cfg, nil)
	wantInvalidUnstaged(t, err, 18, store, staging.Range{From: 16, To: 20})
}

// wantInvalidUnstaged: err is an InvalidBlockError at height h, and nothing
// of span is staged.
func wantInvalidUnstaged(t *testing.T, err error, h uint64, store *staging.Store, span staging.Range) {
	t.Helper()
	var ib *InvalidBlockError
	if !errors.As(err, &ib) || ib.Height != h {
		t.Fatalf("err = %v, want InvalidBlockError at %d", err, h)
	}
	if m, _ := store.Missing(span.From, span.To); !reflect.DeepEqual(m, []staging.Range{span}) {
		t.Fatalf("a span with an invalid block was partly staged: missing %v", m)
	}
}

// A span whose blocks do not link (a node mid-reorg) is retried; one that
// never links fails, after the retries, as an invalid block naming the
// height, and nothing of it is staged.
func TestFetchRetriesUnlinkedSpan(t *testing.T) {
	store := openStore(t)
	src := newFake()
	src.unlinked[13] = 1
	st, err := Fetch(context.Background(), src, store, 11, 15, fast, nil)
	if err != nil || st.Retries != 1 || st.Blocks != 5 {
		t.Fatalf("one unlinked answer: retries %d, staged %d, err %v; want 1 retry and 5 blocks", st.Retries, st.Blocks, err)
	}
	store = openStore(t)
	src = newFake()
	src.unlinked[13] = 100
	cfg := fast
	cfg.MaxRetries = 3
	_, err = Fetch(context.Background(), src, store, 11, 15, cfg, nil)
	if src.asked[13] != 4 {
		t.Fatalf("err = %v after %d asks, want InvalidBlockError at 13 after 4", err, src.asked[13])
	}
	wantInvalidUnstaged(t, err, 13, store, staging.Range{From: 11, To: 15})
}

func TestProgressFollowsContiguousPrefix(t *testing.T) {
	p := NewProgress(1, 30)
	p.plan([]staging.Range{{From: 1, To: 30}})
	ctx := context.Background()
	p.committed([]staging.Range{{From: 11, To: 20}})
	if last, ok, _ := waitNow(p, 1); ok {
		t.Fatalf("prefix reported %d before height 1 was staged", last)
	}
	p.committed([]staging.Range{{From: 1, To: 10}})
	if last, ok, err := p.Wait(ctx, 15); !ok || last != 20 || err != nil {
		t.Fatalf("Wait = %d %v %v, want 20", last, ok, err)
	}
	done := make(chan uint64)
	go func() { l, _, _ := p.Wait(ctx, 30); done <- l }()
	p.committed([]staging.Range{{From: 21, To: 30}})
	if l := <-done; l != 30 {
		t.Fatalf("Wait(30) = %d", l)
	}
	p.finish(errors.New("boom"))
	q := NewProgress(1, 30)
	q.plan([]staging.Range{{From: 1, To: 10}})
	q.finish(errors.New("boom"))
	if _, _, err := q.Wait(ctx, 10); err == nil || err.Error() != "boom" {
		t.Fatalf("Wait after failed fetch: %v", err)
	}
}

// waitNow polls Wait with an already-cancelled context.
func waitNow(p *Progress, h uint64) (uint64, bool, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return p.Wait(ctx, h)
}

func TestRetryable(t *testing.T) {
	if !fault.Retryable(transient{"x"}) || !fault.Retryable(fmt.Errorf("wrap: %w", transient{"x"})) {
		t.Fatal("transient error not retryable")
	}
	if fault.Retryable(errors.New("plain")) || fault.Retryable(context.Canceled) || fault.Retryable(nil) {
		t.Fatal("non-retryable error classified retryable")
	}
	// The loader and jsonrpc disagreed here (issue 21): a bare deadline is
	// the caller's own bound, not a transient fault; an attempt's own
	// timeout is marked transient where it is set (jsonrpc's TransportError).
	if fault.Retryable(context.DeadlineExceeded) {
		t.Fatal("the caller's deadline retryable")
	}
}

var hashOf = chaintest.HashOf
