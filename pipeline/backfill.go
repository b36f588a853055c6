package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// BackfillSummary is what the backfill of follow --backfill-from did: the
// stream, and its fetch and export. It is written by the backfill's
// goroutine and read once the job has returned.
type BackfillSummary struct {
	Stream   export.Stream
	Fetch    loader.Stats
	Export   export.Result
	Complete bool
	// Streams is the export streams its range was split into, and
	// StreamsWhy why (planStreams).
	Streams    int
	StreamsWhy string
}

// planBackfill fixes the range of follow's backfill: from --backfill-from up
// to just below where the head stream started (or starts: --from, when it
// has not exported yet), named --alias or after its range. A range that is
// empty, or that reaches above the chain's tip, is refused before anything
// runs.
func planBackfill(ctx context.Context, cfg *Job, db *export.Session, src loader.Source) (*BackfillSummary, error) {
	start, ok := cfg.From, false
	if err := db.Do(ctx, "read head start", func(ctx context.Context, conn *pgx.Conn) (err error) {
		var h uint64
		if h, ok, err = export.HeadStart(ctx, conn, cfg.Schema); ok {
			start = h
		}
		return err
	}); err != nil {
		return nil, err
	}
	if cfg.BackfillFrom >= start {
		what := "starts"
		if ok {
			what = "started"
		}
		return nil, &ConfigError{Fields: []*FieldError{{Flag: "backfill-from", Env: EnvName("backfill-from"),
			Msg: fmt.Sprintf("%d is not below the height the head stream %s at (%d): nothing to fill beside it", cfg.BackfillFrom, what, start)}}}
	}
	s := export.Stream{Alias: cfg.Alias, From: cfg.BackfillFrom, To: start - 1}
	if s.Alias == "" {
		s.Alias = export.DefaultAlias(s.From, s.To)
	}
	tip, err := src.Tip(ctx)
	if err != nil {
		return nil, fmt.Errorf("read chain tip: %w", err)
	}
	if s.To > tip {
		return nil, fmt.Errorf("backfill %s: range end %d is above the chain tip %d: refusing rather than clamping (the head stream starts above the chain)", s.Alias, s.To, tip)
	}
	return &BackfillSummary{Stream: s}, nil
}

// runBackfill fills bf's range beside the head stream, as run does a range
// (backfillStages): fetch into the job's staging store through the job's
// source, export over a session of its own, into its own status row — never
// the head's checkpoint. Rows the range shares with another stream's are
// merged, not duplicated (export's conflict path). It resumes from its own
// cursor.
func runBackfill(ctx context.Context, cfg *Job, store *staging.Store, src loader.Source, dec export.Decoder, bf *BackfillSummary, log *slog.Logger, c *counters) error {
	log = log.With("backfill", bf.Stream.Alias)
	db, err := dialSession(ctx, cfg, log, c)
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	ecfg := exportConfig(cfg, &c.idx, demoteInfo(log), c)
	ecfg.Stream = bf.Stream
	ecfg.OnBatch = func(b export.BatchStats) {
		c.m.BackfillExported(b.From, b.To, b.Rows, b.Commit, b.Conflicted)
	}
	ecfg.OnStart = nil // the job's progress is the head's; the backfill has its own summary
	f := &fill{job: cfg, store: store, src: src, dec: dec, db: db, plan: &c.idx, log: log, c: c, ecfg: ecfg}
	err = f.run(ctx, backfillStages, func(_ context.Context, f *fill, err error) error {
		bf.Streams, bf.StreamsWhy = f.n, f.why
		bf.Fetch, bf.Export, bf.Complete = f.fetched, f.exported, f.exported.Complete
		if err == nil && !f.done {
			log.Info("backfill complete", "from", bf.Stream.From, "to", bf.Stream.To, "blocks", f.exported.Blocks)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("backfill %s: %w", bf.Stream.Alias, err)
	}
	return nil
}

// rangeOfBackfill is the range stage of follow's backfill: its range was
// planned (planBackfill); nothing more to do when it is complete already.
func rangeOfBackfill(ctx context.Context, f *fill) error {
	s := f.ecfg.Stream
	cur, err := loadCursor(ctx, f.db, f.job.Schema, s)
	if err != nil {
		return err
	}
	if cur.Valid && cur.Height >= s.To {
		f.done, f.exported.Last, f.exported.Complete = true, cur, true
		f.log.Info("backfill already complete", "from", s.From, "to", s.To)
		return nil
	}
	f.next = cur.Next(s.From)
	return nil
}

// backfillStreams is the streams stage of follow's backfill: planFillStreams
// beside the head stream, said in the job's log.
func backfillStreams(ctx context.Context, f *fill) error {
	if err := planFillStreams(ctx, f); err != nil {
		return err
	}
	s := f.ecfg.Stream
	f.log.Info("backfill beside the head stream", "from", s.From, "to", s.To, "next", f.next, "streams", f.n)
	return nil
}

// writeBackfill adds the backfill's line to a job's summary.
func writeBackfill(out io.Writer, bf *BackfillSummary) {
	state := "complete"
	if !bf.Complete {
		state = "NOT complete"
		if bf.Export.Last.Valid {
			state += fmt.Sprintf(", exported up to %d", bf.Export.Last.Height)
		}
	}
	streams := ""
	if bf.Streams > 1 {
		streams = fmt.Sprintf(" over %d export streams (%s)", bf.Streams, bf.StreamsWhy)
	}
	fmt.Fprintf(out, "  backfill %s (%d-%d): %d blocks exported%s, %s\n", bf.Stream.Alias, bf.Stream.From, bf.Stream.To, bf.Export.Blocks, streams, state)
}
