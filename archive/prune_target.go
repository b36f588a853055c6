package archive

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/jackc/pgx/v5"
)

// TargetRef is a target as its mirror names it (export.TargetName without
// the stream): pg:<cluster>/<database>/<schema>.
type TargetRef struct {
	Cluster, Database, Schema string
}

// ParseTarget splits a target name; ok is false for a name of another form.
func ParseTarget(target string) (TargetRef, bool) {
	rest, ok := strings.CutPrefix(target, "pg:")
	if !ok {
		return TargetRef{}, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return TargetRef{}, false
	}
	return TargetRef{Cluster: parts[0], Database: parts[1], Schema: parts[2]}, true
}

// PruneUnconfirmedError is a prune refused because a target whose
// checkpoint the store mirrors could not confirm, itself, that it holds the
// heights its mirror says it has exported: it could not be reached, its
// database or schema is gone, its checkpoints were reset or are behind the
// mirror, or rows under a checkpoint are missing. Its mirror is all that
// says it has them; deleting on its word could delete the only copy.
type PruneUnconfirmedError struct {
	Below  uint64
	Target string
	Found  string // what the target itself said
}

func (e *PruneUnconfirmedError) Error() string {
	return fmt.Sprintf("archive: prune below %d refused: target %s could not confirm the heights its checkpoint mirror says it has exported: %s; the staged heights may be the only copy left: export them again, or --force to delete regardless",
		e.Below, e.Target, e.Found)
}

// Fault marks the error as data that is wrong (exit 4): a target does not
// hold what the store says it does. Nothing was deleted.
func (e *PruneUnconfirmedError) Fault() fault.Class { return fault.Data }

// Unreachable is a target prune could not ask: what Reach returned.
type Unreachable struct{ Reason string }

func (u *Unreachable) Error() string { return u.Reason }

// confirmTarget asks the target itself, on conn (connected to its
// database), for the checkpoints of the streams the store mirrors, and
// whether the rows under them that a prune below below would delete from
// staging are there. It returns the target's own checkpoints (the coverage
// a prune trusts), or what it found instead (found != "").
func confirmTarget(ctx context.Context, conn *pgx.Conn, ref TargetRef, mirrored []StreamMirror, below uint64, o PruneOptions) (own []StreamMirror, found string, err error) {
	qs := chain.QuoteIdent(ref.Schema)
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var schema, cps, bfs, ident, blocks bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
       to_regclass($2) IS NOT NULL, to_regclass($3) IS NOT NULL, to_regclass($4) IS NOT NULL, to_regclass($5) IS NOT NULL`,
			ref.Schema, qs+".blockhaul_checkpoints", qs+".blockhaul_backfills", qs+".blockhaul_chain", qs+"."+chain.QuoteIdent(o.Blocks.Name)).Scan(&schema, &cps, &bfs, &ident, &blocks); err != nil {
			return err
		}
		switch {
		case !schema:
			found = fmt.Sprintf("database %s has no schema %s (dropped?)", ref.Database, ref.Schema)
			return nil
		case !cps && !bfs:
			found = fmt.Sprintf("schema %s has no checkpoint tables (dropped or reset?)", ref.Schema)
			return nil
		case !blocks:
			found = fmt.Sprintf("schema %s has no %s table (dropped?)", ref.Schema, o.Blocks.Name)
			return nil
		}
		if ident && o.Family != "" {
			var fam, id string
			err := tx.QueryRow(ctx, "SELECT family, chain_id FROM "+qs+".blockhaul_chain").Scan(&fam, &id)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return err
			case fam != o.Family || id != o.ChainID:
				found = fmt.Sprintf("schema %s holds %s chain %q, the store %s chain %q", ref.Schema, fam, id, o.Family, o.ChainID)
				return nil
			}
		}
		qb := qs + "." + chain.QuoteIdent(o.Blocks.Name)
		hc := chain.QuoteIdent(o.Blocks.HeightColumn)
		for _, m := range mirrored {
			var from, height *int64
			name, key := m.Stream, m.Stream
			var q string
			if alias, ok := strings.CutPrefix(m.Stream, "backfill/"); ok {
				if !bfs {
					found = fmt.Sprintf("schema %s has no backfill table, where stream %s's checkpoint was (reset?)", ref.Schema, m.Stream)
					return nil
				}
				q = "SELECT range_start, last_height FROM " + qs + ".blockhaul_backfills WHERE alias = $1"
				key = alias
			} else {
				if !cps {
					found = fmt.Sprintf("schema %s has no checkpoint table, where stream %s's checkpoint was (reset?)", ref.Schema, m.Stream)
					return nil
				}
				q = "SELECT start_height, height FROM " + qs + ".blockhaul_checkpoints WHERE stream = $1"
			}
			err := tx.QueryRow(ctx, q, key).Scan(&from, &height)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				found = fmt.Sprintf("stream %s has no checkpoint there (reset?); the staging mirror says %d-%d", name, m.From, m.Height)
				return nil
			case err != nil:
				return err
			case height == nil || *height < 0 || uint64(*height) < m.Height:
				at := "nothing committed"
				if height != nil {
					at = fmt.Sprintf("checkpoint %d", *height)
				}
				found = fmt.Sprintf("stream %s is at %s, behind the staging mirror's %d (restored or reset?)", name, at, m.Height)
				return nil
			}
			s := StreamMirror{Stream: name, From: m.From, Height: uint64(*height)}
			if from != nil && *from >= 0 {
				s.From = uint64(*from)
			}
			// The rows a prune would leave as the only copy: the stream's
			// heights below below.
			hi := min(s.Height, below-1)
			if s.From <= hi {
				var n int64
				if err := tx.QueryRow(ctx, fmt.Sprintf("SELECT count(DISTINCT %[2]s) FROM %[1]s WHERE %[2]s BETWEEN $1 AND $2", qb, hc), int64(s.From), int64(hi)).Scan(&n); err != nil {
					return err
				}
				if want := int64(hi - s.From + 1); n != want {
					found = fmt.Sprintf("%d of heights %d-%d under stream %s's checkpoint %d have no row in %s.%s", want-n, s.From, hi, name, s.Height, ref.Schema, o.Blocks.Name)
					return nil
				}
			}
			own = append(own, s)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("archive: prune: ask target %s/%s: %w", ref.Database, ref.Schema, err)
	}
	return own, found, nil
}
