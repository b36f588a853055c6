package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// forkChain is a synthetic CometBFT chain whose tip advances by step on
// every Tip call and which, once the tip reaches forkWhenTip, abandons its
// blocks from forkAt on for those of another fork.
type forkChain struct {
	a, b        *cometbftsynth.Synthetic
	forkAt      uint64
	forkWhenTip uint64
	step        uint64
	tip         atomic.Uint64
	forked      atomic.Bool
}

func newForkChain(startTip, step, forkWhenTip, forkAt uint64) *forkChain {
	fc := &forkChain{
		a:      cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 11, ChainID: "forky-1"}),
		forkAt: forkAt, forkWhenTip: forkWhenTip, step: step,
	}
	bcfg := cometbftsynth.SyntheticConfig{Seed: 12, ChainID: "forky-1"}
	if forkAt > 0 {
		// forkAt 0: chain b from genesis on, no fork to link (BlockHash(forkAt-1)
		// would ask for height 2^64-1 and generate every block below it).
		bcfg.Fork = &cometbftsynth.SyntheticFork{At: forkAt, Parent: fc.a.BlockHash(forkAt - 1)}
	}
	fc.b = cometbftsynth.NewSynthetic(bcfg)
	fc.tip.Store(startTip)
	return fc
}

func (fc *forkChain) Family() chain.Family                    { return chain.FamilyCometBFT }
func (fc *forkChain) ChainID(context.Context) (string, error) { return "forky-1", nil }
func (fc *forkChain) Tip(context.Context) (uint64, error) {
	t := fc.tip.Add(fc.step)
	if t >= fc.forkWhenTip {
		fc.forked.Store(true)
	}
	return t, nil
}

func (fc *forkChain) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	out := make([]chain.Block, 0, to-from+1)
	for h := from; h <= to; h++ {
		out = append(out, fc.block(h))
	}
	return out, nil
}

func (fc *forkChain) block(h uint64) chain.Block {
	if !fc.forked.Load() || h < fc.forkAt {
		return fc.a.Block(h)
	}
	return fc.b.Block(h) // from forkAt on, building on the shared history
}

// tipView shares a chain's blocks without advancing its tip.
type tipView struct{ *forkChain }

func (v tipView) Tip(context.Context) (uint64, error) { return v.tip.Load(), nil }

func testConfig(cmd, dsn, staging string, src *forkChain, from, to uint64) Config {
	cfg := DefaultConfig()
	cfg.Command, cfg.PG, cfg.Staging = cmd, dsn, staging
	cfg.From, cfg.To, cfg.ToSet = from, to, to > 0
	cfg.BatchBlocks, cfg.FetchWorkers, cfg.Progress = 50, 4, 0
	// One export stream, whatever the machine would choose (auto has
	// tests of its own: streamcount_test.go).
	cfg.ExportStreams = 1
	if src != nil {
		cfg.Source = src
	}
	return cfg
}

var quiet = slog.New(slog.DiscardHandler)

func fingerprint(t *testing.T, dsn string) string {
	t.Helper()
	fp := pgtest.Fingerprint(t, dsn, "cometbft", map[string]string{
		"blocks": "height", "transactions": "height, tx_index", "events": "height, event_index"})
	out := make([]string, 0, len(fp))
	for table, v := range fp {
		out = append(out, table+": "+v)
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// reference loads [1, to] of the chain in its final (forked) state with a
// plain run into a fresh database and returns its fingerprint.
func reference(t *testing.T, fc *forkChain, to uint64) string {
	t.Helper()
	frozen := newForkChain(to+1000, 0, 0, fc.forkAt)
	frozen.forked.Store(true)
	dsn := pgtest.NewDatabase(t)
	cfg := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "ref"), nil, 1, to)
	cfg.Source = tipView{frozen}
	if _, err := Run(context.Background(), cfg, io.Discard, quiet); err != nil {
		t.Fatalf("reference run: %v", err)
	}
	return fingerprint(t, dsn)
}

func headHeight(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var h int64
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT height FROM cometbft.blockhaul_checkpoints WHERE stream = 'head'), -1)`).Scan(&h)
	return h, err
}

// The head stream follows a growing chain that reorganises once inside its
// unconfirmed window, while a backfill runs over an overlapping range.
func TestFollowBesideBackfillWithReorg(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	// Tip 2540, +20 a poll; at 2700 the chain forks from 2678 on, while the
	// head (5 confirmations) has exported up to 2675.
	fc := newForkChain(2540, 20, 2700, 2678)
	ctx := context.Background()

	head := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "head"), fc, 2000, 3000)
	head.Confirmations = 5
	backfill := testConfig(CmdRun, dsn, filepath.Join(t.TempDir(), "backfill"), nil, 1, 2500)
	backfill.Source = tipView{fc}

	// The schema exists before the sampler starts.
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)

	var jobs sync.WaitGroup
	var headSum, bfSum Summary
	var headErr, bfErr error
	jobs.Add(2)
	go func() { defer jobs.Done(); headSum, headErr = Run(ctx, head, io.Discard, quiet) }()
	go func() { defer jobs.Done(); bfSum, bfErr = Run(ctx, backfill, io.Discard, quiet) }()

	// Sample the head checkpoint while both run: it must never decrease.
	stop, sampled := make(chan struct{}), make(chan struct{})
	var decreased string
	var samples int
	go func() {
		defer close(sampled)
		last := int64(-1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			h, err := headHeight(ctx, conn)
			if err != nil {
				continue // the schema may not exist yet
			}
			samples++
			if h < last && decreased == "" {
				decreased = fmt.Sprintf("head checkpoint went from %d to %d", last, h)
			}
			last = h
		}
	}()
	jobs.Wait()
	close(stop)
	<-sampled

	if headErr != nil || bfErr != nil {
		t.Fatalf("head: %v; backfill: %v", headErr, bfErr)
	}
	if decreased != "" {
		t.Fatal(decreased)
	}
	if samples < 10 {
		t.Fatalf("only %d checkpoint samples taken", samples)
	}
	if headSum.Reorgs == 0 {
		t.Fatal("the head stream saw no reorg; the scenario did not happen")
	}
	if !headSum.Complete || !bfSum.Complete {
		t.Fatalf("complete: head %v, backfill %v", headSum.Complete, bfSum.Complete)
	}
	var n, distinct, min, max int64
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT height), min(height), max(height) FROM cometbft.blocks`).Scan(&n, &distinct, &min, &max); err != nil {
		t.Fatal(err)
	}
	if n != 3000 || distinct != 3000 || min != 1 || max != 3000 {
		t.Fatalf("blocks: %d rows, %d heights, %d-%d; want every height of 1-3000 once", n, distinct, min, max)
	}
	if got, want := fingerprint(t, dsn), reference(t, fc, 3000); got != want {
		t.Fatalf("contents differ from a clean load of the final chain:\n%s\nwant\n%s", got, want)
	}
	t.Logf("head: %d reorgs, %d batches merged; backfill: %d merged; %d checkpoint samples",
		headSum.Reorgs, headSum.Export.Conflicts, bfSum.Export.Conflicts, samples)
}

// A reorg below the head cursor, within the window, rolls back exported
// rows and the cursor together and reloads the new fork.
func TestFollowRollsBackExportedFork(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	// Tip 100, +50 a poll; at 400 the chain forks from 341 on while the
	// head (0 confirmations) has exported up to 350.
	fc := newForkChain(100, 50, 400, 341)
	cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "head"), fc, 1, 600)
	var logs strings.Builder
	sum, err := Run(context.Background(), cfg, io.Discard, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Reorgs != 1 || !sum.Complete {
		t.Fatalf("reorgs %d complete %v", sum.Reorgs, sum.Complete)
	}
	// The rollback moves the staging mirror with PostgreSQL's checkpoint:
	// the export after it must not warn of a restored database.
	if strings.Contains(logs.String(), "behind its mirrored checkpoint") {
		t.Fatalf("the rollback left the mirror ahead of PostgreSQL:\n%s", logs.String())
	}
	if got, want := fingerprint(t, dsn), reference(t, fc, 600); got != want {
		t.Fatalf("after rollback:\n%s\nwant\n%s", got, want)
	}
}

// A reorg deeper than the window halts with a data error.
func TestFollowHaltsOnDeepReorg(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	fc := newForkChain(100, 50, 400, 341)
	cfg := testConfig(CmdFollow, dsn, filepath.Join(t.TempDir(), "head"), fc, 1, 600)
	cfg.ReorgWindow = 5
	_, err := Run(context.Background(), cfg, io.Discard, quiet)
	var re *ReorgError
	if !errorsAs(err, &re) || ExitCode(err) != ExitData {
		t.Fatalf("err = %v (exit %d), want a ReorgError with exit %d", err, ExitCode(err), ExitData)
	}
	if !strings.Contains(err.Error(), "340") {
		t.Fatalf("message does not name the fork height: %v", err)
	}
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(context.Background())
	if h, _ := headHeight(context.Background(), conn); h != 350 {
		t.Fatalf("head checkpoint moved to %d on a halted reorg, want 350", h)
	}
}
