package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

func TestLeadGate(t *testing.T) {
	g := newLeadGate(100, 0)
	ctx := context.Background()
	if err := g.wait(ctx, 99); err != nil {
		t.Fatalf("height 99 with nothing exported and a lead of 100: %v", err)
	}
	released := make(chan error, 1)
	go func() { released <- g.wait(ctx, 250) }()
	g.advance(100) // next is 101: 250 is still more than 100 ahead
	select {
	case err := <-released:
		t.Fatalf("height 250 released with export at 100 (err %v)", err)
	default:
	}
	g.advance(150)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.wait(cctx, 1000); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait on a cancelled context: %v", err)
	}
}

func TestFetchLeadHasAFloor(t *testing.T) {
	cfg := DefaultConfig()
	if got, want := fetchLead(bareJob(cfg)), uint64(4*cfg.BatchBlocks); got != want {
		t.Fatalf("default lead %d, want %d (four export batches)", got, want)
	}
	cfg.FetchLead = 10
	if got, want := fetchLead(bareJob(cfg)), uint64(cfg.BatchBlocks+cfg.FetchWorkers*cfg.FetchSpan); got != want {
		t.Fatalf("lead of 10 became %d, want the floor %d", got, want)
	}
}

// run's fetch never asks for a height more than the lead ahead of what
// export has committed, reaches that lead (the source is faster than
// export), and the run completes.
func TestRunFetchStaysWithinLeadOfExport(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "s"), nil, 1, 3000)
	cfg.BatchBlocks, cfg.FetchWorkers, cfg.FetchSpan, cfg.FetchLead = 100, 2, 10, 400
	lead := int64(fetchLead(bareJob(cfg)))
	var mu sync.Mutex
	worst := int64(-1)
	src := newCounting(5000)
	src.onFetch = func(from uint64) {
		mu.Lock()
		defer mu.Unlock()
		// Rows and cursor commit together: the highest block row is
		// export's progress, at least what the gate saw.
		var exported int64
		if err := conn.QueryRow(context.Background(), "SELECT coalesce(max(height), 0) FROM cometbft.blocks").Scan(&exported); err != nil {
			t.Error(err)
			return
		}
		worst = max(worst, int64(from)+int64(cfg.FetchSpan)-1-exported)
	}
	sum, err := runWith(t, cfg, src)
	if err != nil || !sum.Complete {
		t.Fatalf("run: %v complete=%v", err, sum.Complete)
	}
	if worst > lead || worst < int64(cfg.BatchBlocks) {
		t.Fatalf("fetch asked for heights up to %d ahead of export; want at most the lead %d, and more than a batch", worst, lead)
	}
}
