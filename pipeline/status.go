package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Status prints what staging holds (chain, staged ranges, gaps, mirrored
// checkpoints) and, when --pg is given, the checkpoints PostgreSQL holds. A
// --staging directory that is not there is refused as verify refuses it
// (exit 2).
func Status(ctx context.Context, cfg *Job, out io.Writer) error {
	if err := needDir("staging", cfg.Staging); err != nil {
		return err
	}
	schema, err := stagingStatus(cfg, out)
	if err != nil {
		return err
	}
	if schema != cfg.Schema {
		n := *cfg
		n.Schema = schema
		cfg = &n
	}
	if cfg.PG == "" {
		return nil
	}
	return pgStatus(ctx, cfg, out)
}

// stagingStatus prints the store's part, and returns the schema --pg is
// read from: without --schema, the store's family's (not --chain's).
func stagingStatus(cfg *Job, out io.Writer) (schema string, err error) {
	schema = cfg.Schema
	// Read-only: status writes nothing, so it answers on a full disk too.
	store, err := staging.Open(cfg.Staging, staging.Options{ReadOnly: true})
	if ns := (*staging.NoStoreError)(nil); errors.As(err, &ns) {
		fmt.Fprintf(out, "staging %s: none (an empty directory: nothing staged)\n", cfg.Staging)
		return schema, nil
	}
	if err != nil {
		return liveStatus(cfg, cfg.Staging, err, out)
	}
	defer store.Close()
	// The directory's files, blob files included: Pebble's own figure
	// leaves out what it has not opened since the store was.
	size, err := store.Size()
	if err != nil {
		return schema, err
	}
	fmt.Fprintf(out, "staging %s (%s)\n", store.Dir(), size)
	if d := store.Damage(); d != nil {
		// Say it, list the rest, and exit 4.
		fmt.Fprintf(out, "  damaged:  %v\n", d)
		defer func() {
			if err == nil {
				err = d
			}
		}()
	}
	lo, hi, ok, err := store.Bounds()
	if err != nil {
		return schema, err
	}
	if id, ok := store.Identity(); ok {
		if cfg.SchemaDefaulted {
			schema = id.Family.String()
		}
		// The identity block is the first one staged into the store, not
		// its lowest height: ranges below it may have been staged since.
		fmt.Fprintf(out, "  chain:    %s %q, identified by block %d %X (the first staged)\n", id.Family, id.ChainID, id.FirstHeight, id.FirstHash)
	} else {
		fmt.Fprintln(out, "  chain:    none yet")
	}
	if ok {
		fmt.Fprintf(out, "  heights:  lowest staged %d, highest staged %d\n", lo, hi)
		err = writeStaged(cfg, store, lo, hi, out)
	} else {
		fmt.Fprintln(out, "  staged:   nothing")
	}
	if err != nil {
		return schema, err
	}
	if id, bound := store.Identity(); bound && family.Of(id.Family) != nil && family.Of(id.Family).TrustProven != nil {
		tr, err := trustStatus(store)
		if err != nil {
			return schema, err
		}
		fmt.Fprintf(out, "  trust:    %s\n", tr)
	}
	mirrors, err := store.Mirrors()
	if err != nil {
		return schema, err
	}
	writeMirrors(out, mirrors)
	return schema, nil
}

// writeStaged prints what the store holds of the range status looks at
// and its gaps: --from alone bounds the low side; --to alone keeps --from's
// default, the chain's first block, so that what is missing below the
// lowest staged height (lo; hi the highest) is shown.
func writeStaged(cfg *Job, store *staging.Store, lo, hi uint64, out io.Writer) error {
	from, to := lo, hi
	if cfg.FromSet || cfg.ToSet {
		from = cfg.From
	}
	if cfg.ToSet {
		to = cfg.To
	}
	staged, err := store.Staged(from, to)
	if err != nil {
		return err
	}
	missing, err := store.Missing(from, to)
	if err != nil {
		return err
	}
	var n uint64
	for _, r := range staged {
		n += r.Len()
	}
	fmt.Fprintf(out, "  staged:   %d blocks in %d-%d, ranges %s\n", n, from, to, ranges(staged, 8))
	if len(missing) > 0 {
		var m uint64
		for _, r := range missing {
			m += r.Len()
		}
		fmt.Fprintf(out, "  gaps:     %d heights, %s\n", m, ranges(missing, 8))
	} else {
		fmt.Fprintln(out, "  gaps:     none")
	}
	return nil
}

// writeMirrors prints the target checkpoints a store mirrors, by name.
func writeMirrors(out io.Writer, mirrors map[string]staging.Checkpoint) {
	targets := make([]string, 0, len(mirrors))
	for t := range mirrors {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	for _, t := range targets {
		m := mirrors[t]
		fmt.Fprintf(out, "  mirror:   %s at %d (%s)\n", t, m.Height, m.Updated.Format("2006-01-02 15:04:05"))
	}
}

func ranges(rs []staging.Range, max int) string {
	s := ""
	for i, r := range rs {
		if i == max {
			return s + fmt.Sprintf(" … (%d more)", len(rs)-max)
		}
		if i > 0 {
			s += ", "
		}
		s += r.String()
	}
	if s == "" {
		return "none"
	}
	return s
}

func pgStatus(ctx context.Context, cfg *Job, out io.Writer) error {
	conn, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	qs := chain.QuoteIdent(cfg.Schema)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qs+".blockhaul_backfills").Scan(&exists); err != nil {
		return err
	}
	fmt.Fprintf(out, "postgresql schema %s\n", cfg.Schema)
	if !exists {
		fmt.Fprintln(out, "  no blockhaul tables yet")
		return nil
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT stream, height, updated_at::text FROM %s.blockhaul_checkpoints ORDER BY stream", qs))
	if err != nil {
		return err
	}
	var lines [][2]string // name, the rest: printed with the names padded alike
	for rows.Next() {
		var s, at string
		var h int64
		if err := rows.Scan(&s, &h, &at); err != nil {
			return err
		}
		lines = append(lines, [2]string{"stream " + s, fmt.Sprintf("at %d (updated %s)", h, at)})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// A backfill whose rows are all in is not done while the keys and
	// indexes its fill deferred are not built: its tables lack them.
	var unfinished string
	if deferred, err := export.IndexesDeferred(ctx, conn, cfg.Schema); err != nil {
		return err
	} else if deferred {
		pending, err := export.PendingIndexes(ctx, conn, cfg.Schema)
		if err != nil {
			return err
		}
		keys, err := export.PendingKeys(ctx, conn, cfg.Schema)
		if err != nil {
			return err
		}
		switch {
		case len(keys) > 0:
			unfinished = fmt.Sprintf("rows complete, not finished: %s of its tables and %d of their indexes still to build (below)", archive.Quantity(len(keys), "primary key"), len(pending)-len(keys))
		case len(pending) > 0:
			unfinished = fmt.Sprintf("rows complete, not finished: %d indexes of its tables still to build (below)", len(pending))
		}
	}
	rows, err = conn.Query(ctx, fmt.Sprintf("SELECT alias, range_start, range_end, coalesce(last_height::text, '-'), status, updated_at::text FROM %s.blockhaul_backfills ORDER BY alias", qs))
	if err != nil {
		return err
	}
	for rows.Next() {
		var a, last, st, at string
		var from, to int64
		if err := rows.Scan(&a, &from, &to, &last, &st, &at); err != nil {
			return err
		}
		if st == "complete" && unfinished != "" {
			st = unfinished
		}
		lines = append(lines, [2]string{"backfill " + a, fmt.Sprintf("%d-%d at %s, %s (updated %s)", from, to, last, st, at)})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	width := 0
	for _, l := range lines {
		width = max(width, len(l[0]))
	}
	for _, l := range lines {
		fmt.Fprintf(out, "  %-*s %s\n", width, l[0], l[1])
	}
	if deferred, err := export.IndexesDeferred(ctx, conn, cfg.Schema); err != nil {
		return err
	} else if deferred {
		pending, err := export.PendingIndexes(ctx, conn, cfg.Schema)
		if err != nil {
			return err
		}
		keys, err := export.PendingKeys(ctx, conn, cfg.Schema)
		if err != nil {
			return err
		}
		present, err := export.IndexesPresent(ctx, conn, cfg.Schema, pending)
		if err != nil {
			return err
		}
		writePending(out, pending, keys, present)
	}
	return tableFacts(ctx, conn, cfg, out)
}

// tableFacts prints the facts the family's tables declare about their rows
// (chain.Fact: what a decoder left undecoded), for the tables the schema
// has. They may scan their tables, so they come last.
func tableFacts(ctx context.Context, conn *pgx.Conn, cfg *Job, out io.Writer) error {
	if cfg.Family == nil {
		return nil // no family: nothing to say of its tables
	}
	dec := cfg.Family.NewDecoder(cfg.Decoding.options())
	qs := chain.QuoteIdent(cfg.Schema)
	for _, t := range dec.Tables() {
		if len(t.Facts) == 0 {
			continue
		}
		name := qs + "." + chain.QuoteIdent(t.Name)
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			continue
		}
		for _, f := range t.Facts {
			var n int64
			var detail string
			err := conn.QueryRow(ctx, fmt.Sprintf(f.Query, name)).Scan(&n, &detail)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42703" {
				// Another family's table of the same name (status reads
				// the family from --chain, the schema may hold another).
				continue
			}
			if err != nil {
				return fmt.Errorf("status of table %s: %w", t.Name, err)
			}
			if n > 0 {
				fmt.Fprintf(out, "  "+f.Line+"\n", n, detail)
			}
		}
	}
	return nil
}
