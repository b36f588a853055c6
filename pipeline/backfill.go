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

// runBackfill fills bf's range beside the head stream, as run does a range:
// fetch into the job's staging store through the job's source, export over
// a session of its own, into its own status row — never the head's
// checkpoint. Rows the range shares with another stream's are merged, not
// duplicated (export's conflict path). It resumes from its own cursor.
func runBackfill(ctx context.Context, cfg *Job, store *staging.Store, src loader.Source, dec export.Decoder, bf *BackfillSummary, log *slog.Logger, c *counters) error {
	log = log.With("backfill", bf.Stream.Alias)
	db, err := dialSession(ctx, cfg, log, c)
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	cur, err := loadCursor(ctx, db, cfg.Schema, bf.Stream)
	if err != nil {
		return fmt.Errorf("backfill %s: %w", bf.Stream.Alias, err)
	}
	if cur.Valid && cur.Height >= bf.Stream.To {
		bf.Complete, bf.Export.Last = true, cur
		log.Info("backfill already complete", "from", bf.Stream.From, "to", bf.Stream.To)
		return nil
	}
	n, why, err := planStreams(ctx, cfg, db, bf.Stream, 1, log)
	if err != nil {
		return fmt.Errorf("backfill %s: %w", bf.Stream.Alias, err)
	}
	bf.Streams, bf.StreamsWhy = n, why
	log.Info("backfill beside the head stream", "from", bf.Stream.From, "to", bf.Stream.To, "next", cur.Next(bf.Stream.From), "streams", n)
	ecfg := exportConfig(cfg, demoteInfo(log), c)
	ecfg.Stream = bf.Stream
	ecfg.OnBatch = func(b export.BatchStats) {
		c.m.BackfillExported(b.From, b.To, b.Rows, b.Commit, b.Conflicted)
	}
	ecfg.OnStart = nil // the job's progress is the head's; the backfill has its own summary
	var st loader.Stats
	var res export.Result
	if n > 1 {
		st, res, err = fetchAndExportStreams(ctx, cfg, store, src, db, dec, ecfg, n, demoteInfo(log), c)
	} else {
		st, res, err = fetchAndExport(ctx, cfg, store, src, db, dec, ecfg, cur.Next(bf.Stream.From), demoteInfo(log), c)
	}
	bf.Fetch, bf.Export, bf.Complete = st, res, res.Complete
	if err != nil {
		return fmt.Errorf("backfill %s: %w", bf.Stream.Alias, err)
	}
	log.Info("backfill complete", "from", bf.Stream.From, "to", bf.Stream.To, "blocks", res.Blocks)
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
