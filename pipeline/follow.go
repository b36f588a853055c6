package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// ReorgError reports a chain reorganisation deeper than the head stream may
// undo by itself.
type ReorgError struct {
	Fork   uint64 // last height both forks share, when it was found
	Found  bool
	Cursor uint64 // the head stream's last exported height
	Window uint64
}

func (e *ReorgError) Error() string {
	if !e.Found {
		return fmt.Sprintf("reorg: no common ancestor within %d blocks below the head cursor %d; exported rows are on an abandoned fork (re-export from a known-good height)", e.Window, e.Cursor)
	}
	return fmt.Sprintf("reorg: the chain forked at height %d, %d blocks below the head cursor %d, deeper than the %d-block window; halting (re-export from %d)",
		e.Fork, e.Cursor-e.Fork, e.Cursor, e.Window, e.Fork+1)
}

// Fault marks the error as data that is wrong (exit 4): a reorg deeper than the window.
func (e *ReorgError) Fault() fault.Class { return fault.Data }

// follow is the head stream: it stages the chain up to its tip, exports
// what lies at least --confirmations below it, and polls for more. A
// parent-hash break in what it has staged or exported is a reorg: the
// heights of the abandoned fork are dropped from staging and, when already
// exported and within --reorg-window, from PostgreSQL together with the
// cursor, then fetched again. With --to it stops once that height is
// exported; otherwise it runs until signalled.
//
// With --backfill-from the job also runs a backfill beside the head (see
// runBackfill); the first failure of either ends both.
func runFollow(ctx context.Context, cfg *Job, store *staging.Store, tip func() uint64, log *slog.Logger, sum *Summary, c *counters) (err error) {
	// Another chain than the target holds is refused before anything is
	// written.
	start := cfg.From
	f, err := openFill(ctx, cfg, store, tip, log, c, func(f *fill) (err error) {
		if err := checkTargetChain(ctx, cfg, f.db, store, f.dec, f.src, log); err != nil {
			return err
		}
		start, err = planHeadStart(ctx, cfg, f.db, log)
		return err
	})
	if err != nil {
		return err
	}
	cfg = cfg.withFrom(start)
	dec, src, db := f.dec, f.src, f.db
	if sum.From != cfg.From { // the head starts after the heights held
		sum.From = cfg.From
		if cfg.ToSet {
			c.m.SetRange(cfg.From, cfg.To)
		}
	}
	defer f.close(ctx)
	if err := recordDecoders(ctx, cfg, db); err != nil {
		return err
	}
	// export --replay with this follow's --staging asks it to run the
	// replay (replayserve.go); the follow's end stops one still running.
	defer serveReplays(ctx, cfg, store, log, c)(&err)
	if !cfg.BackfillFromSet {
		return followHead(ctx, cfg, store, src, db, dec, log, sum, c)
	}
	bf, err := planBackfill(ctx, cfg, db, src)
	if err != nil {
		return err
	}
	sum.Backfill = bf
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return runBackfill(gctx, cfg, store, src, dec, bf, log, c) })
	g.Go(func() error { return followHead(gctx, cfg, store, src, db, dec, log, sum, c) })
	return g.Wait()
}

// planHeadStart decides, without --from, where the head stream starts: after
// the heights the target already holds contiguously from where it would
// start (the chain's first height, or after its checkpoint) — the head's own
// rows and the backfills' together — so that a follow started after a
// backfill does not export that range again through the merge path. It
// refuses (status 2), naming the heights it could start at, a head stream
// that has not started when the target's heights do not begin at the
// chain's first height, or when a backfill that is not finished has that
// start within its range (it would write those heights again). It returns
// the head stream's start; it only reads.
func planHeadStart(ctx context.Context, cfg *Job, db *export.Session, log *slog.Logger) (uint64, error) {
	fam := cfg.Family
	if cfg.FromSet || cfg.From != fam.Genesis {
		return cfg.From, nil // a start given (a caller's Config may set From alone)
	}
	var covered []staging.Range
	var backfills []export.Backfill
	var cur export.Cursor
	err := db.Do(ctx, "read the heights the target holds", func(ctx context.Context, conn *pgx.Conn) error {
		_, started, err := export.HeadStart(ctx, conn, cfg.Schema)
		if err != nil {
			return err
		}
		if started { // else no checkpoint table may exist yet
			if cur, err = export.LoadCursor(ctx, conn, cfg.Schema, export.Stream{Head: true}); err != nil {
				return err
			}
		}
		if covered, err = export.CoveredHeights(ctx, conn, cfg.Schema); err != nil {
			return err
		}
		backfills, err = export.Backfills(ctx, conn, cfg.Schema)
		return err
	})
	if err != nil {
		return 0, err
	}
	first := fam.Genesis
	next := cur.Next(first)
	start := next
	for _, r := range covered {
		if r.From <= next && next <= r.To {
			start = r.To + 1
		}
	}
	if cur.Valid {
		// A head stream that has started resumes after its checkpoint, or
		// after the backfills' heights it reaches.
		if start != next {
			log.Info("head stream goes on after the heights backfills hold above its checkpoint", "checkpoint", cur.Height, "from", start, "held", heightList(covered))
			return start, nil
		}
		return cfg.From, nil
	}
	refuse := func(why string, from ...uint64) error {
		opts := make([]string, len(from))
		for i, h := range from {
			opts[i] = fmt.Sprintf("--from %d", h)
		}
		return &ConfigError{Fields: []*FieldError{{Flag: "from", Env: EnvName("from"),
			Msg: fmt.Sprintf("not given, and schema %s %s: the head stream could start at %s", cfg.Schema, why, strings.Join(opts, " or "))}}}
	}
	for _, b := range backfills {
		if !b.Complete() && b.From <= start && start <= b.To {
			held := "none of it yet"
			if b.Done {
				held = fmt.Sprintf("up to %d", b.Last)
			}
			return 0, refuse(fmt.Sprintf("holds backfill %s (%d-%d) not finished (it has committed %s; run it again to finish it)", b.Alias, b.From, b.To, held),
				b.To+1, start)
		}
	}
	if start == first {
		if len(covered) > 0 {
			last := covered[len(covered)-1].To + 1
			return 0, refuse(fmt.Sprintf("holds heights %s but not the chain's first height %d (--backfill-from %d fills the heights below a start beside it)", heightList(covered), first, first),
				last, first)
		}
		return cfg.From, nil // an empty target: from the chain's first height
	}
	log.Info("head stream starts after the heights the target holds", "from", start, "held", heightList(covered))
	return start, nil
}

// heightList is ranges as "1-100, 200-300".
func heightList(rs []staging.Range) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// followHead is the head stream's loop.
func followHead(ctx context.Context, cfg *Job, store *staging.Store, src loader.Source, db *export.Session, dec export.Decoder, log *slog.Logger, sum *Summary, c *counters) error {
	head := export.Stream{Head: true, From: cfg.From}
	// One progress line per interval says what the stream does; the
	// engines' lines of every poll are debug output.
	plog := demoteInfo(log)
	sum.Export.Rows = map[string]uint64{}
	unlinked := 0        // fetches in a row that failed on blocks that do not link near the tip
	var behind time.Time // since when the source's tip is below the exported height
	// The chain of trust goes on across the polls: the head is proven as
	// it arrives, its last height by the node's commit of it.
	prover, err := newProver(ctx, cfg, store, src, cfg.From, log)
	if err != nil {
		return err
	}
	for {
		c.reorgsRepaired(sum)
		cur, err := loadCursor(ctx, db, cfg.Schema, head)
		if err != nil {
			return err
		}
		sum.Export.Last = cur
		next := cur.Next(cfg.From)
		// What the target holds up to: the head's checkpoint, else the
		// heights below where planHeadStart started it.
		exported, holds := cur.Height, cur.Valid
		if !holds && !cfg.FromSet && next > 0 && next-1 >= genesisOf(cfg) {
			exported, holds = next-1, true
		}
		if holds {
			c.m.SetExported(exported)
		}
		if cfg.ToSet && next > cfg.To {
			sum.Complete = true
			return finishIndexes(ctx, cfg, &c.idx, db, sum, log)
		}
		tipH, err := src.Tip(ctx)
		if err != nil {
			return fmt.Errorf("read chain tip: %w", err)
		}
		if holds && tipH < exported {
			// A lagging or replaced node: nothing to fetch or confirm
			// until it reaches what the target already holds.
			if err := waitBehind(cfg, tipH, exported, &behind, log, c); err != nil {
				return err
			}
			if !pollWait(ctx, cfg.PollInterval) {
				return nil
			}
			continue
		}
		if !behind.IsZero() {
			log.Info("the node caught up with the exported height", "tip", tipH, "exported", exported, "waited", time.Since(behind).Round(time.Millisecond))
			behind = time.Time{}
			c.m.SetReady(true, "")
		}
		// Stage everything up to the tip: the unconfirmed window lives in
		// staging, where a reorg costs nothing to undo.
		if tipH >= next {
			lc := loaderConfig(cfg, plog, c)
			lc.Prover = prover
			st, err := loader.Fetch(ctx, src, store, next, tipH, lc, nil)
			addFetch(&sum.Fetch, st)
			if span, brk, ok := unlinkedNearTip(err, tipH, cfg); ok {
				if unlinked++; unlinked > maxUnlinkedRefetches {
					return fmt.Errorf("follow: blocks near the tip still do not link after %d refetches: %w", maxUnlinkedRefetches, err)
				}
				// A node switching forks serves such spans: the staged
				// blocks below may be of the abandoned fork. Repair as for
				// any reorg, then fetch again.
				log.Warn("blocks near the tip do not link: the node may be mid-reorg; refetching", "span", span.String(), "break", brk, "refetch", unlinked, "err", err)
				if _, _, herr := store.Header(span.From - 1); span.From > 0 && herr == nil {
					if err := repairReorg(ctx, cfg, db, store, src, export.AllTables(dec), cur, span.From, log, sum); err != nil {
						return err
					}
				} else if herr != nil && !errors.Is(herr, staging.ErrNotFound) {
					return herr
				}
				continue
			}
			if err != nil {
				return err
			}
			unlinked = 0
		}
		low := next
		if low > 0 {
			low--
		}
		brk, broken, err := store.FirstBreak(low, tipH)
		if err != nil {
			return err
		}
		if broken {
			if err := repairReorg(ctx, cfg, db, store, src, export.AllTables(dec), cur, brk, log, sum); err != nil {
				return err
			}
			continue
		}
		target := uint64(0)
		if tipH >= cfg.Confirmations {
			target = tipH - cfg.Confirmations
		}
		if cfg.ToSet {
			target = min(target, cfg.To)
		}
		if target >= next {
			ecfg := exportConfig(cfg, &c.idx, plog, c)
			ecfg.Stream = export.Stream{Head: true, From: cfg.From, To: target}
			res, err := export.Run(ctx, db, store, dec, ecfg)
			addExport(&sum.Export, res)
			var ce *export.ContinuityError
			if errors.As(err, &ce) {
				// Staging was refetched on another fork below the cursor.
				if err := repairReorg(ctx, cfg, db, store, src, export.AllTables(dec), res.Last, ce.Height, log, sum); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			continue // more may be confirmed already
		}
		t := time.NewTimer(cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			// A signal stops follow as it stops any job: exit 3, whether
			// it was caught up or not (it exited 0 when idle, 3 when
			// busy). Without --to it has no range to complete.
			return nil
		case <-t.C:
		}
	}
}

// genesisOf is the first height of cfg's chain family (0 when unknown).
func genesisOf(cfg *Job) uint64 {
	if cfg.Family != nil {
		return cfg.Family.Genesis
	}
	return 0
}

// waitBehind handles a source whose tip is below the head's exported
// height: it says so (once, then in /readyz) and, once that has lasted
// --reorg-window polls (--reorg-window × --poll-interval: as long as the
// chain takes to make a reorg window's worth of blocks at one a poll),
// treats it as the node's problem: the job ends (exit 1). Every endpoint
// the job names is one the client rotates through, so a tip read that
// keeps coming back below the height is every endpoint behind.
func waitBehind(cfg *Job, tip, exported uint64, since *time.Time, log *slog.Logger, c *counters) error {
	bound := time.Duration(max(cfg.ReorgWindow, 1)) * cfg.PollInterval
	msg := fmt.Sprintf("the source's tip %d is below the exported height %d: waiting for the node to catch up", tip, exported)
	c.m.SetReady(false, msg)
	if since.IsZero() {
		*since = time.Now()
		log.Warn(msg, "tip", tip, "exported", exported, "gives_up_after", bound)
		return nil
	}
	if waited := time.Since(*since); waited >= bound {
		return fmt.Errorf("follow: the source's tip %d has stayed below the exported height %d for %s (--reorg-window %d × --poll-interval %s): the node is behind the data this target holds (lagging, or replaced by one that is); point --rpc at a node that has reached height %d",
			tip, exported, waited.Round(time.Millisecond), cfg.ReorgWindow, cfg.PollInterval, exported)
	}
	return nil
}

// pollWait waits one poll interval; false when ctx ended first.
func pollWait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// maxUnlinkedRefetches bounds the fetches follow makes again, one after the
// other, of a span near the tip whose blocks do not link (each already
// retried by the loader): a node mid-reorg settles within them; one that
// does not is a data error.
const maxUnlinkedRefetches = 3

// unlinkedNearTip reports whether err is a fetch that failed on blocks that
// do not link (or are otherwise not what was asked) in a span within
// --reorg-window plus --confirmations of the tip, where a chain may still
// reorganise; it returns the span and the height of the break. Further
// below, such an answer is no reorg but a node that is wrong.
func unlinkedNearTip(err error, tip uint64, cfg *Job) (staging.Range, uint64, bool) {
	var fe *loader.FetchError
	var inv *loader.InvalidBlockError
	if !errors.As(err, &fe) || !errors.As(err, &inv) {
		return staging.Range{}, 0, false
	}
	if inv.Height < tip && tip-inv.Height > cfg.ReorgWindow+cfg.Confirmations {
		return staging.Range{}, 0, false
	}
	return fe.Range, inv.Height, true
}

// repairReorg handles a break at height brk (its parent is not the block
// staged or exported below it): it finds the last height where staging and
// the source agree, drops staging above it, and rolls PostgreSQL back to it
// when exported rows are on the abandoned fork.
func repairReorg(ctx context.Context, cfg *Job, db *export.Session, store *staging.Store, src loader.Source, tables []chain.Table, cur export.Cursor, brk uint64, log *slog.Logger, sum *Summary) error {
	// Search past the window so that a reorg too deep to undo can still be
	// reported with its fork height.
	search := max(4*(cfg.ReorgWindow+cfg.Confirmations), 256)
	fork, found := uint64(0), false
	for k := brk - 1; ; k-- {
		nb, err := src.Fetch(ctx, k, k)
		if err != nil {
			return fmt.Errorf("reorg at %d: fetch block %d: %w", brk, k, err)
		}
		have, _, err := store.Header(k)
		if err != nil && !errors.Is(err, staging.ErrNotFound) {
			return err
		}
		if bytes.Equal(have, nb[0].Hash) && (!cur.Valid || k != cur.Height || bytes.Equal(cur.Hash, nb[0].Hash)) {
			fork, found = k, true
			break
		}
		if k == 0 || brk-k > search {
			break
		}
	}
	if !found {
		return &ReorgError{Cursor: cur.Height, Window: search}
	}
	sum.Reorgs++
	if cur.Valid && fork < cur.Height {
		if cur.Height-fork > cfg.ReorgWindow {
			return &ReorgError{Fork: fork, Found: true, Cursor: cur.Height, Window: cfg.ReorgWindow}
		}
		hash, _, err := store.Header(fork)
		if err != nil {
			return err
		}
		log.Warn("reorg below the head cursor: rolling back exported rows", "fork", fork, "cursor", cur.Height, "depth", cur.Height-fork)
		var target string
		if err := db.Do(ctx, "roll back reorg", func(ctx context.Context, conn *pgx.Conn) error {
			if err := export.Rollback(ctx, conn, cfg.Schema, tables, fork, hash); err != nil {
				return err
			}
			var err error
			target, err = export.TargetName(ctx, conn, cfg.Schema, export.Stream{Head: true})
			return err
		}); err != nil {
			return err
		}
		// The staging mirror follows PostgreSQL's checkpoint down, or the
		// next export would take the rollback for a restored database.
		if m, ok, err := store.Mirror(target); err == nil && ok && m.Height > fork {
			m.Height, m.Hash, m.Updated = fork, hash, time.Now()
			if err := store.SetMirror(target, m); err != nil {
				return err
			}
		}
	} else {
		log.Warn("reorg in the unconfirmed window: dropping staged blocks of the abandoned fork", "fork", fork, "break", brk)
	}
	return store.Delete(fork+1, ^uint64(0)-1)
}

func addFetch(dst *loader.Stats, s loader.Stats) {
	dst.Planned += s.Planned
	dst.Blocks += s.Blocks
	dst.RawBytes += s.RawBytes
	dst.StoredBytes += s.StoredBytes
	dst.Retries += s.Retries
	dst.Duration += s.Duration
}

func addExport(dst *export.Result, r export.Result) {
	dst.Blocks += r.Blocks
	dst.Batches += r.Batches
	dst.Conflicts += r.Conflicts
	dst.Duration += r.Duration
	if dst.Rows == nil {
		dst.Rows = map[string]uint64{}
	}
	for k, v := range r.Rows {
		dst.Rows[k] += v
	}
	if r.Last.Valid {
		dst.Last = r.Last
	}
}
