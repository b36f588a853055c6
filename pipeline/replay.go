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
// database, and leaves their checkpoints alone (export.Replay).
func runReplay(ctx context.Context, cfg *Config, store *staging.Store, log *slog.Logger, sum *Summary, c *counters) error {
	dec, err := newDecoder(cfg)
	if err != nil {
		return err
	}
	if err := checkDamage(cfg, store); err != nil {
		return err
	}
	db, err := dialSession(ctx, cfg, log, c)
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	c.m.SetReady(true, "")
	rcfg := export.ReplayConfig{
		Schema:      cfg.Schema,
		Alias:       cfg.Alias,
		From:        cfg.From,
		To:          cfg.To,
		FromSet:     cfg.FromSet,
		ToSet:       cfg.ToSet,
		BatchBlocks: cfg.BatchBlocks,
		SyncCommit:  cfg.SyncCommit,
		Logger:      log,
		OnBatch: func(b export.BatchStats) {
			c.m.Exported(b.From, b.To, b.Rows, b.Commit, false)
		},
	}
	res, err := export.Replay(ctx, db, store, dec, rcfg)
	sum.Export = res
	sum.Complete = res.Complete
	if res.Complete {
		sum.From, sum.To = res.Start, res.Last.Height
	}
	if err != nil {
		return err
	}
	analyzeFilled(ctx, cfg, db, sum, log)
	return nil
}
