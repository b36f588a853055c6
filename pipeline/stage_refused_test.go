package pipeline

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/staging"
)

// A staging write refused part way through run (the free-space reserve, a
// full disk) ends the job with that error, exit 1 naming the directory and
// "no space left" — it must not stall. The stall this guards against: a
// writer that kept draining fetched spans after its error (so that no
// worker blocked) without ending the fetch; under run the lead gate then
// held the next span until export advanced, export waited for a staged
// prefix that could no longer grow, and the idle workers never finished
// the fetch that would have reported the error. The wait below is bounded
// by a deadline: reaching it is the stall.
func TestRunEndsWhenStagingRefusesAWrite(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "s")
	var commits atomic.Int64
	restore := crashpoint.Set(func(_ context.Context, p crashpoint.Point) error {
		if p == crashpoint.StageCommit && commits.Add(1) == 3 {
			return &staging.NoSpaceError{Dir: stg, Free: 70 << 20, Need: 136 << 20}
		}
		return nil
	})
	defer restore()
	cfg := testConfig(CmdRun, dsn, stg, nil, 1, 2000)
	cfg.Source = newCounting(5000)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum, err := Run(ctx, cfg, io.Discard, quiet)
	restore()
	if ctx.Err() != nil {
		t.Fatalf("run stalled after staging refused a write: still running after 60 s (staged %d, exported to %d)", sum.Fetch.Blocks, sum.Export.Last.Height)
	}
	var ns *staging.NoSpaceError
	if !errors.As(err, &ns) || ExitCode(err) != ExitFailed || !strings.Contains(err.Error(), stg) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("run with a refused staging write: %v (exit %d), want exit 1 naming %s and \"no space left\"", err, ExitCode(err), stg)
	}
	if sum.Complete {
		t.Fatal("a run whose fetch failed says it is complete")
	}
	// Nothing exported beyond what was staged, and the checkpoint no
	// further than the rows.
	st := openStaged(t, stg)
	last, ok, serr := st.ContiguousFrom(1, 2000)
	st.Close() // before the resume opens it
	if serr != nil {
		t.Fatal(serr)
	}
	cur := loadTestCursor(t, dsn, export.Stream{Alias: export.DefaultAlias(1, 2000), From: 1, To: 2000})
	if cur.Valid && (!ok || cur.Height > last) {
		t.Fatalf("checkpoint at %d beyond the staged prefix (%d, %v)", cur.Height, last, ok)
	}
	if n := maxHeight(t, dsn); cur.Valid && n != cur.Height || !cur.Valid && n != 0 {
		t.Fatalf("blocks table reaches %d, checkpoint %d (valid %v)", n, cur.Height, cur.Valid)
	}

	// Space freed: the same job resumes and completes.
	cfg.Source = newCounting(5000)
	if sum, err := Run(context.Background(), cfg, io.Discard, quiet); err != nil || !sum.Complete {
		t.Fatalf("resume: complete %v, %v", sum.Complete, err)
	}
	if n := maxHeight(t, dsn); n != 2000 {
		t.Fatalf("after the resume blocks reach %d, want 2000", n)
	}
}

// loadTestCursor reads stream s's checkpoint in schema cometbft.
func loadTestCursor(t *testing.T, dsn string, s export.Stream) export.Cursor {
	t.Helper()
	ctx := context.Background()
	conn := pgConn(t, dsn)
	cur, err := export.LoadCursor(ctx, conn, "cometbft", s)
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// maxHeight is the highest height in cometbft.blocks, 0 when it is empty
// or absent.
func maxHeight(t *testing.T, dsn string) uint64 {
	t.Helper()
	ctx := context.Background()
	conn := pgConn(t, dsn)
	var h int64
	if err := conn.QueryRow(ctx, `SELECT COALESCE(max(height), 0) FROM cometbft.blocks`).Scan(&h); err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return 0
		}
		t.Fatal(err)
	}
	return uint64(h)
}
