package pipeline

import (
	"context"
	"log/slog"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/staging"
)

// runReplay is export --replay: it writes the chosen tables again, in
// place, from staging alone, over the heights the schema's checkpoints
// cover (or --from/--to within them), beside whatever streams run on the
// database, and leaves their checkpoints alone (export.Replay). When
// another process holds --staging, Run asks it instead (requestReplay).
func runReplay(ctx context.Context, cfg *Job, store *staging.Store, log *slog.Logger, sum *Summary, c *counters) error {
	res, err := replayTables(ctx, cfg, store, log, c, replayHooks{
		connected: func(context.Context, *export.Session) error {
			c.m.SetReady(true, "")
			return nil
		},
		onBatch: func(b export.BatchStats) {
			c.m.Exported(b.From, b.To, b.Rows, b.Commit, false)
		},
	})
	sum.Export = res
	sum.Complete = res.Complete
	if res.Complete {
		sum.From, sum.To = res.Start, res.Last.Height
	}
	return err
}

// replayHooks are what the caller of replayTables sees of the replay.
type replayHooks struct {
	// connected runs once the session is open, before anything is
	// written; its error ends the replay with nothing changed.
	connected func(context.Context, *export.Session) error
	onStart   func(from, to, next uint64)
	onBatch   func(export.BatchStats)
}

// replayTables is one replay of cfg.SelectedTables on its own session:
// export --replay run here, or by a follow asked through its staging
// directory (serveReplays).
func replayTables(ctx context.Context, cfg *Job, store *staging.Store, log *slog.Logger, c *counters, h replayHooks) (export.Result, error) {
	dec, err := cfg.decoder()
	if err != nil {
		return export.Result{}, err
	}
	if err := checkDamage(cfg, store); err != nil {
		return export.Result{}, err
	}
	db, err := dialSession(ctx, cfg, log, c)
	if err != nil {
		return export.Result{}, err
	}
	defer db.Close(context.WithoutCancel(ctx))
	if h.connected != nil {
		if err := h.connected(ctx, db); err != nil {
			return export.Result{}, err
		}
	}
	rcfg := export.ReplayConfig{
		Schema:      cfg.Schema,
		Alias:       cfg.Alias,
		From:        cfg.From,
		To:          cfg.To,
		FromSet:     cfg.FromSet,
		ToSet:       cfg.ToSet,
		BatchBlocks: cfg.BatchBlocks,
		SyncCommit:  cfg.SyncCommit,
		IndexMemory: cfg.IndexMemoryMiB << 20,
		Logger:      log,
		OnBatch:     h.onBatch,
		OnStart:     h.onStart,
	}
	res, err := export.Replay(ctx, db, store, dec, rcfg)
	if res.Blocks > 0 {
		// Rows made with the job's decoder options are in: record them
		// (after Replay's own checks, so that a refused replay changes
		// nothing).
		if rerr := recordDecoders(context.WithoutCancel(ctx), cfg, db); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return res, err
	}
	analyzeFilled(ctx, cfg, db, &Summary{Export: res, Complete: res.Complete}, log)
	return res, nil
}
