package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/export"
	"github.com/jackc/pgx/v5"
)

// pendingLookupTimeout bounds the read of the pending indexes a stopped job
// reports: it runs after the job's context ended.
const pendingLookupTimeout = 10 * time.Second

// settleIndexes runs when a fill that deferred its secondary indexes ends
// without completing its range. A failure (an error, not a signal) rebuilds
// them: nothing the failed run need keep is left changed, and the rows it
// exported are queryable at once; a resumed fill then runs with them in
// place (--defer-indexes=always drops them again). A signal keeps them
// deferred, since the job is to stop now and its resume goes on filling
// without them. Either way what is left unbuilt is named in sum (the
// summary) as status names it.
func settleIndexes(ctx context.Context, cfg *Config, db *export.Session, sum *Summary, log *slog.Logger, fillErr error) {
	if cfg.DeferIndexes != IndexesAlways || sum.Complete {
		return
	}
	if ctx.Err() == nil && !errors.Is(fillErr, context.Canceled) && !errors.Is(fillErr, ErrInterrupted) {
		var n, keys int
		err := db.Do(ctx, "rebuild deferred indexes", func(ctx context.Context, conn *pgx.Conn) (err error) {
			pending, err := export.PendingIndexes(ctx, conn, cfg.Schema)
			if err != nil || len(pending) == 0 {
				return err
			}
			k, err := export.PendingKeys(ctx, conn, cfg.Schema)
			if err != nil {
				return err
			}
			keys = len(k)
			log.Warn("the fill failed: building the indexes it dropped, so that the rows exported are queryable", "indexes", len(pending)-keys, "primary_keys", keys)
			n, err = export.BuildIndexes(ctx, conn, cfg.Schema, indexBuildOptions(cfg, db, log))
			return err
		})
		if err == nil {
			// Keys are built first: those built beyond them are indexes.
			sum.KeysRebuilt = min(n, keys)
			sum.IndexesRebuilt = n - sum.KeysRebuilt
			return
		}
		log.Warn("indexes the failed fill dropped are not rebuilt; the next run builds them", "err", err)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingLookupTimeout)
	defer cancel()
	// A signal may have closed the session's connection mid-statement.
	conn := db.Conn()
	if conn == nil || conn.IsClosed() {
		dial := db.Dialer()
		if dial == nil {
			return
		}
		var err error
		if conn, err = dial(lctx); err != nil {
			log.Warn("cannot read which indexes are still deferred", "err", err)
			return
		}
		defer conn.Close(lctx)
	}
	pending, err := export.PendingIndexes(lctx, conn, cfg.Schema)
	if err == nil {
		sum.KeysPending, err = export.PendingKeys(lctx, conn, cfg.Schema)
	}
	if err != nil {
		log.Warn("cannot read which indexes are still deferred", "err", err)
		return
	}
	sum.IndexesPending = pending
}

// writePending says which of the deferred indexes pending (keys among
// them) are not built yet, indexes and primary keys apart.
func writePending(out io.Writer, pending, keys []string) {
	var indexes []string
	for _, name := range pending {
		if !slices.Contains(keys, name) {
			indexes = append(indexes, name)
		}
	}
	if len(indexes) > 0 {
		fmt.Fprintf(out, "  indexes: %d deferred, not built yet: %s (the next run builds them)\n", len(indexes), strings.Join(indexes, ", "))
	}
	if len(keys) > 0 {
		fmt.Fprintf(out, "  primary keys: %d deferred, not built yet: %s (the next run builds them)\n", len(keys), strings.Join(keys, ", "))
	}
}
