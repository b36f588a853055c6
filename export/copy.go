package export

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// writeBatch commits one batch: the COPY of every table and the cursor, in
// one transaction. When the plain COPY collides with rows already present
// (another stream wrote some of these heights), the batch is retried through
// temporary tables and INSERT … ON CONFLICT DO NOTHING: the rows already
// there are kept, the rest added, and the cursor moves the same way.
func writeBatch(ctx context.Context, conn *pgx.Conn, cfg *Config, tables []chain.Table, cp *copier, chk *chainCheck, b batch, last bool) (BatchStats, error) {
	st := BatchStats{From: b.from, To: b.to, Rows: make([]int, len(tables)), Decode: b.decode}
	t0 := time.Now()
	err := commitBatch(ctx, conn, cfg, tables, cp, chk, b, last, false)
	if errors.Is(err, errKeysDeferred) {
		// Another fill dropped the keys since this stream started: with
		// them built, this batch meets its rows as it would have.
		if err = buildKeysFor(ctx, conn, cfg.Schema, cfg.IndexMemory, cfg.Logger); err == nil {
			err = commitBatch(ctx, conn, cfg, tables, cp, chk, b, last, false)
		}
	}
	if isUniqueViolation(err) || isDeadlock(err) {
		st.Conflicted = true
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			st.ConflictCode = pe.Code
		}
		cfg.Logger.Info("batch collides with rows already present; merging", "from", b.from, "to", b.to)
		err = commitBatch(ctx, conn, cfg, tables, cp, chk, b, last, true)
	}
	var wrong *WrongChainError
	if errors.As(err, &wrong) {
		return st, err
	}
	if err != nil {
		return st, fmt.Errorf("export: batch %d-%d: %w", b.from, b.to, err)
	}
	chk.committed()
	for i := range tables {
		st.Rows[i] = b.rows.Len(i)
	}
	st.Commit = time.Since(t0)
	return st, nil
}

// copier holds the COPY plans of every table, into the table itself and
// into the temporary table of the merge path.
type copier struct {
	direct, merge []*copyPlan
}

func newCopier(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table) (*copier, error) {
	oids, err := typeOIDs(ctx, conn, tables)
	if err != nil {
		return nil, err
	}
	cp := &copier{direct: make([]*copyPlan, len(tables)), merge: make([]*copyPlan, len(tables))}
	for i, t := range tables {
		if cp.direct[i], err = newCopyPlan(conn.TypeMap(), oids, chain.QuoteIdent(schema)+"."+chain.QuoteIdent(t.Name), t); err != nil {
			return nil, err
		}
		if cp.merge[i], err = newCopyPlan(conn.TypeMap(), oids, chain.QuoteIdent(mergeTableName(t)), t); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// sendAll COPYs the rows of every table straight into it, within tx, and
// returns how many rows the server took.
func (cp *copier) sendAll(ctx context.Context, tx pgx.Tx, tables []chain.Table, rows *chain.Rows) (int64, error) {
	var total int64
	for i, t := range tables {
		if rows.Len(i) == 0 {
			continue
		}
		n, err := cp.direct[i].send(ctx, tx, rows.Table(i))
		if err != nil {
			return total, fmt.Errorf("copy %s: %w", t.Name, err)
		}
		total += n
	}
	return total, nil
}

func mergeTableName(t chain.Table) string { return "blockhaul_merge_" + t.Name }

func commitBatch(ctx context.Context, conn *pgx.Conn, cfg *Config, tables []chain.Table, cp *copier, chk *chainCheck, b batch, last, merge bool) error {
	qs := chain.QuoteIdent(cfg.Schema)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := startBatchTx(ctx, tx, chk, cfg.Schema, b, cfg.SyncCommit, last); err != nil {
			return err
		}
		if !merge {
			if _, err := cp.sendAll(ctx, tx, tables, b.rows); err != nil {
				return err
			}
			return saveAndCommit(ctx, tx, cfg, b)
		}
		for i, t := range tables {
			if rows := b.rows.Table(i); len(rows) > 0 {
				if err := mergeTable(ctx, tx, qs, t, cp.merge[i], rows); err != nil {
					return err
				}
			}
		}
		return saveAndCommit(ctx, tx, cfg, b)
	})
}

// startBatchTx begins a batch's transaction: its blocks confirmed against
// the target's chain, then synchronous_commit off for every batch but the
// last unless syncCommit.
func startBatchTx(ctx context.Context, tx pgx.Tx, chk *chainCheck, schema string, b batch, syncCommit, last bool) error {
	if err := chk.confirm(ctx, tx, schema, b); err != nil {
		return err
	}
	if !syncCommit && !last {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
	}
	return nil
}

// saveAndCommit ends a batch's transaction once its rows are written: the
// cursor, then (on return) the commit, with the crash points between.
func saveAndCommit(ctx context.Context, tx pgx.Tx, cfg *Config, b batch) error {
	if err := crashpoint.Hit(ctx, crashpoint.AfterCopy); err != nil {
		return err
	}
	if err := checkKeys(ctx, tx, cfg.Schema, cfg.KeylessFill); err != nil {
		return err
	}
	if err := saveCursor(ctx, tx, cfg.Schema, cfg.Stream, b.from, b.to, b.lastHash); err != nil {
		return err
	}
	return crashpoint.Hit(ctx, crashpoint.BeforeCommit)
}

// checkKeys fails a batch's transaction, after its COPY took its tables'
// locks, with errKeysDeferred when another fill than token's deferred the
// keys (see DeferKeys): its rows must not go into keyless tables.
func checkKeys(ctx context.Context, tx pgx.Tx, schema, token string) error {
	other, err := keysDeferredByOther(ctx, tx, schema, token)
	if err == nil && other {
		err = errKeysDeferred
	}
	return err
}

func mergeTable(ctx context.Context, tx pgx.Tx, qs string, t chain.Table, plan *copyPlan, rows [][]any) error {
	qt := chain.QuoteIdent(mergeTableName(t))
	if _, err := tx.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE %s (LIKE %s.%s) ON COMMIT DROP", qt, qs, chain.QuoteIdent(t.Name))); err != nil {
		return fmt.Errorf("merge %s: %w", t.Name, err)
	}
	if _, err := plan.send(ctx, tx, rows); err != nil {
		return fmt.Errorf("merge %s: copy: %w", t.Name, err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s.%s SELECT * FROM %s ON CONFLICT DO NOTHING", qs, chain.QuoteIdent(t.Name), qt)); err != nil {
		return fmt.Errorf("merge %s: insert: %w", t.Name, err)
	}
	return nil
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// isDeadlock reports a deadlock PostgreSQL broke by aborting this batch: two
// streams inserting overlapping heights can wait on each other's rows.
func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}
