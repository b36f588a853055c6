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
func settleIndexes(ctx context.Context, cfg *Job, plan *indexPlan, db *export.Session, sum *Summary, log *slog.Logger, fillErr error) {
	if !plan.deferred || sum.Complete {
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
			n, err = export.BuildIndexes(ctx, conn, cfg.Schema, indexBuildOptions(cfg, plan, db, log))
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
	if err == nil {
		sum.IndexesPresent, err = export.IndexesPresent(lctx, conn, cfg.Schema, pending)
	}
	if err != nil {
		log.Warn("cannot read which indexes are still deferred", "err", err)
		return
	}
	sum.IndexesPending = pending
}

// indexesPresent reads from the catalog which of the pending indexes exist
// (export.IndexesPresent) on a connection of its own, the job's context
// having ended (an interrupted build); nil when it cannot.
func indexesPresent(ctx context.Context, cfg *Config, db *export.Session, pending []string, log *slog.Logger) map[string]string {
	dial := db.Dialer()
	if dial == nil || len(pending) == 0 {
		return nil
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingLookupTimeout)
	defer cancel()
	conn, err := dial(lctx)
	if err != nil {
		log.Warn("cannot read which deferred indexes exist", "err", err)
		return nil
	}
	defer conn.Close(lctx)
	present, err := export.IndexesPresent(lctx, conn, cfg.Schema, pending)
	if err != nil {
		log.Warn("cannot read which deferred indexes exist", "err", err)
	}
	return present
}

// writePending says which of the deferred indexes pending (keys among
// them) exist and which do not yet, indexes and primary keys apart, as the
// catalog says (present: export.IndexesPresent), not the build's plan.
func writePending(out io.Writer, pending, keys []string, present map[string]string) {
	var indexes []string
	for _, name := range pending {
		if !slices.Contains(keys, name) {
			indexes = append(indexes, name)
		}
	}
	write := func(what string, names []string) {
		if len(names) == 0 {
			return
		}
		var built, index, not []string
		for _, n := range names {
			switch present[n] {
			case "built":
				built = append(built, n)
			case "index":
				index = append(index, n)
			default:
				not = append(not, n)
			}
		}
		var parts []string
		if len(built) > 0 {
			parts = append(parts, fmt.Sprintf("%d built: %s", len(built), strings.Join(built, ", ")))
		}
		if len(index) > 0 {
			parts = append(parts, fmt.Sprintf("%d with the unique index built, not yet attached as the key: %s", len(index), strings.Join(index, ", ")))
		}
		if len(not) > 0 {
			parts = append(parts, fmt.Sprintf("%d not built yet: %s", len(not), strings.Join(not, ", ")))
		}
		fmt.Fprintf(out, "  %s: %d deferred; %s (the next run finishes them)\n", what, len(names), strings.Join(parts, "; "))
	}
	write("indexes", indexes)
	write("primary keys", keys)
}
