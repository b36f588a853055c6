package export

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

func TestSplitRangeCoversTheRangeContiguously(t *testing.T) {
	for _, c := range []struct {
		from, to uint64
		n        int
	}{{1, 200, 3}, {5, 6, 3}, {0, 0, 2}, {10, 19, 10}, {7, 1000, 1}} {
		parts := SplitRange(c.from, c.to, c.n)
		if len(parts) == 0 || parts[0][0] != c.from || parts[len(parts)-1][1] != c.to {
			t.Fatalf("%+v: parts %v do not span the range", c, parts)
		}
		for i := 1; i < len(parts); i++ {
			if parts[i][0] != parts[i-1][1]+1 || parts[i][0] > parts[i][1] {
				t.Fatalf("%+v: parts %v not contiguous", c, parts)
			}
		}
		if want := min(uint64(c.n), c.to-c.from+1); uint64(len(parts)) != want {
			t.Fatalf("%+v: %d parts, want %d", c, len(parts), want)
		}
	}
}

func fixedSessions(t *testing.T, dsn string, n int) []*Session {
	t.Helper()
	s := make([]*Session, n)
	for i := range s {
		conn := pgtest.ConnectTo(t, dsn)
		t.Cleanup(func() { conn.Close(context.Background()) })
		s[i] = Fixed(conn)
	}
	return s
}

func tableDigest(t *testing.T, dsn string) map[string]string {
	return pgtest.Fingerprint(t, dsn, "chain x", map[string]string{"blocks": "height", "items": "height, idx"})
}

// A three-stream export stopped mid-way — by a failed commit and by a
// cancelled context — resumes every sub-range where it stopped and ends
// with the same tables as a one-stream export of the same staging; the
// backfill's own row is complete only at the end.
func TestStreamsStoppedMidwayResumeToTheOneStreamResult(t *testing.T) {
	e := newEnv(t)
	e.stage(1, faultRange, items)
	refDSN := pgtest.NewDatabase(t)
	if _, err := RunStreams(e.ctx, fixedSessions(t, refDSN, 1), e.store, testDecoder{}, faultConfig()); err != nil {
		t.Fatal(err)
	}
	want := tableDigest(t, refDSN)
	dsn := e.conn.Config().ConnString()

	// 1: a commit fails at the 4th committed batch across the streams.
	var hits atomic.Int64
	killed := errors.New("killed")
	restore := crashpoint.Set(func(ctx context.Context, p crashpoint.Point) error {
		if p == crashpoint.AfterCommit && hits.Add(1) == 4 {
			return killed
		}
		return nil
	})
	res, err := RunStreams(e.ctx, fixedSessions(t, dsn, 3), e.store, testDecoder{}, faultConfig())
	restore()
	if !errors.Is(err, killed) || res.Complete {
		t.Fatalf("crashed run: err %v, complete %v", err, res.Complete)
	}
	if e.count(`SELECT count(*) FROM "chain x".blockhaul_backfills WHERE alias LIKE 'a/part-%-of-3' AND last_height > 0`) == 0 {
		t.Fatal("no sub-range committed anything before the crash")
	}

	// 2: the context is cancelled after two more batches.
	ctx, cancel := context.WithCancel(e.ctx)
	hits.Store(0)
	restore = crashpoint.Set(func(_ context.Context, p crashpoint.Point) error {
		if p == crashpoint.AfterCommit && hits.Add(1) == 2 {
			cancel()
		}
		return nil
	})
	res, err = RunStreams(ctx, fixedSessions(t, dsn, 3), e.store, testDecoder{}, faultConfig())
	restore()
	cancel()
	if err == nil || res.Complete {
		t.Fatalf("cancelled run: err %v, complete %v", err, res.Complete)
	}

	res, err = RunStreams(e.ctx, fixedSessions(t, dsn, 3), e.store, testDecoder{}, faultConfig())
	if err != nil || !res.Complete || res.Last.Height != faultRange {
		t.Fatalf("resume: err %v, complete %v, last %d", err, res.Complete, res.Last.Height)
	}
	got := tableDigest(t, dsn)
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("table %s after resume: digest %s, want %s (one stream)", k, got[k], v)
		}
	}
	if h, st := e.backfillHeight("a"); h != faultRange || st != "complete" {
		t.Fatalf("backfill row: %d %s, want %d complete", h, st, faultRange)
	}
	for i, p := range SplitRange(1, faultRange, 3) {
		if h, st := e.backfillHeight(PartAlias("a", i, 3)); uint64(h) != p[1] || st != "complete" {
			t.Fatalf("part %d: %d %s, want %d complete", i+1, h, st, p[1])
		}
	}
	// Done is done: a further run exports nothing.
	res, err = RunStreams(e.ctx, fixedSessions(t, dsn, 3), e.store, testDecoder{}, faultConfig())
	if err != nil || !res.Complete || res.Blocks != 0 {
		t.Fatalf("rerun: err %v, complete %v, blocks %d", err, res.Complete, res.Blocks)
	}
}

// A staged block whose parent is not the block before it, at the seam
// between two sub-ranges, is refused before any sub-range commits.
func TestStreamsRefuseABrokenSeamBeforeCommitting(t *testing.T) {
	e := newEnv(t)
	seam := SplitRange(1, faultRange, 2)[1][0]
	e.stage(1, seam-1, items)
	e.stage(seam+1, faultRange, items)
	b := e.store.NewBatch()
	if err := b.Put(chain.Block{Height: seam, Hash: hashOf(seam), ParentHash: []byte("elsewhere"), Raw: []byte(items(seam))}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	_, err := RunStreams(e.ctx, fixedSessions(t, e.conn.Config().ConnString(), 2), e.store, testDecoder{}, faultConfig())
	var se *SeamError
	if !errors.As(err, &se) || se.Height != seam {
		t.Fatalf("err %v, want a seam error at %d", err, seam)
	}
	if n := e.count(`SELECT count(*) FROM "chain x".blocks`); n != 0 {
		t.Fatalf("%d blocks committed despite the broken seam", n)
	}
}

// The stream that failed first is what RunParts (and so RunStreams and the
// pipeline's driver) reports, whatever the
// others fail with once its failure has cancelled them: a query cut short
// there can surface as pgx's "conn closed", which does not wrap
// context.Canceled (make test failed once with "export: identify database:
// conn closed" in place of the kill that caused it).
func TestStreamsReportTheFirstFailureNotItsEffects(t *testing.T) {
	e := newEnv(t)
	e.stage(1, faultRange, items)
	killed := errors.New("killed")
	cfg := faultConfig()
	parts := Parts(cfg.Stream, 2)
	_, err := RunParts(e.ctx, testDecoder{}, cfg, parts, func(ctx context.Context, i int, _ Config) (Result, error) {
		if i == 1 {
			return Result{}, killed
		}
		<-ctx.Done() // stream 1's failure cancels this one
		return Result{}, errors.New("export: identify database: conn closed")
	})
	if !errors.Is(err, killed) {
		t.Fatalf("RunParts: %v, want the failure that stopped the other stream (%v)", err, killed)
	}

	// The caller's cancellation is reported as such, even when no stream's
	// error wraps it.
	ctx, cancel := context.WithCancel(e.ctx)
	if _, err := RunParts(ctx, testDecoder{}, cfg, parts, func(ctx context.Context, i int, _ Config) (Result, error) {
		if i == 0 {
			cancel()
		}
		<-ctx.Done()
		return Result{}, errors.New("conn closed")
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunParts cancelled by its caller: %v, want context.Canceled", err)
	}
}
