package export

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// replayTable holds one row per replay: which tables, over which heights,
// how far it has come. A replay is not a stream: its row never counts as a
// checkpoint of the chain's rows.
const replayTable = "blockhaul_replays"

func replaySQL(qs string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	alias        text PRIMARY KEY,
	tables       text[] NOT NULL,
	range_start  bigint NOT NULL,
	range_end    bigint NOT NULL,
	last_height  bigint,
	status       text NOT NULL DEFAULT 'in_progress' CHECK (status IN ('in_progress', 'complete')),
	started_at   timestamptz NOT NULL DEFAULT now(),
	updated_at   timestamptz NOT NULL DEFAULT now(),
	completed_at timestamptz
)`, qs, replayTable)
}

// ReplayConfig configures a replay.
type ReplayConfig struct {
	// Schema holds the chain's tables and blockhaul's own.
	Schema string
	// Alias names the replay's progress row. Default ReplayAlias(tables).
	Alias string
	// From and To bound the heights replayed (inclusive) when set; they
	// must lie within the heights the schema's checkpoints cover. Unset, a
	// replay starts at the first height they cover, or ends at the last,
	// when it starts.
	From, To       uint64
	FromSet, ToSet bool
	// BatchBlocks, BatchRows, SyncCommit and IndexMemory are as in Config.
	IndexMemory int64
	BatchBlocks int
	BatchRows   int
	SyncCommit  bool
	// Logger receives progress logs. Default: discard.
	Logger *slog.Logger
	// OnBatch, if set, is called after each committed chunk.
	OnBatch func(BatchStats)
	// OnStart, if set, is called once the range is known (and again after
	// a reconnect): from–to is the replay's, next the first height this
	// run writes (after the progress row's last when it resumes).
	OnStart func(from, to, next uint64)
}

// ReplayAlias is the default name of a replay of tables.
func ReplayAlias(tables []chain.Table) string {
	return "replay/" + strings.Join(tableNames(tables), ",")
}

// ReplayRangeError reports a replay that cannot start: what it was asked to
// replay is not in PostgreSQL, or not in staging. Nothing was changed.
type ReplayRangeError struct{ Reason string }

func (e *ReplayRangeError) Error() string { return "export: replay: " + e.Reason }

// replayAttempts bounds how often one chunk is tried again when the rows
// it replaces changed under it (a reorg rolled them back, another writer
// inserted the same keys).
const replayAttempts = 3

// Replay writes dec's tables again, in place, from staging: per chunk of
// heights one transaction deletes the tables' rows of those heights and
// COPYs the decoded rows, and moves the replay's own progress row (in
// replayTable), so that a kill resumes after the last committed chunk and
// leaves no height half-replayed. The heights are those the schema's
// checkpoints cover (the head stream's and every backfill's) when it
// starts, or cfg.From–cfg.To within them. It never touches a stream's
// checkpoint or another table's rows, so it runs beside a live follow.
//
// A table that does not exist yet is created first (with the columns an
// older shape lacks, as EnsureSchema does); a replay of it is how a table
// added later gets the heights exported before it existed.
//
// Each chunk checks, inside its transaction, that PostgreSQL's blocks table
// still holds the blocks it decoded (by height and hash, locking those rows
// until it commits), so that a reorg rollback of the head stream either
// waits for it — and then removes its rows too — or is seen and the chunk
// read again.
func Replay(ctx context.Context, sess *Session, store *staging.Store, dec Decoder, cfg ReplayConfig) (Result, error) {
	if cfg.BatchBlocks <= 0 {
		cfg.BatchBlocks = 500
	}
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = 100_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tables := dec.Tables()
	if cfg.Alias == "" {
		cfg.Alias = ReplayAlias(tables)
	}
	start := time.Now()
	res := Result{Rows: make(map[string]uint64, len(tables))}
	for _, t := range tables {
		res.Rows[t.Name] = 0
	}
	if cfg.Schema == "" {
		return res, errors.New("export: replay: schema is empty")
	}
	if cfg.FromSet && cfg.ToSet && cfg.To < cfg.From {
		return res, fmt.Errorf("export: replay: range end %d is below its start %d", cfg.To, cfg.From)
	}
	if id, ok := store.Identity(); ok && id.Family != dec.Family() {
		return res, fmt.Errorf("export: staging %s holds a %s chain, not %s", store.Dir(), id.Family, dec.Family())
	}
	first := true
	err := sess.Do(ctx, "replay "+cfg.Alias, func(ctx context.Context, conn *pgx.Conn) error {
		err := replayOnce(ctx, sess, conn, store, dec, &cfg, &res, first)
		first = false
		return err
	})
	res.Duration = time.Since(start)
	if err == nil && ctx.Err() != nil && !res.Complete {
		err = ctx.Err()
	}
	return res, err
}

// Fault marks the error as a configuration error (exit 2).
func (e *ReplayRangeError) Fault() fault.Class { return fault.Config }

// replayProgress is a replay's row.
type replayProgress struct {
	from, to uint64
	last     uint64
	started  bool // last is valid
}

func replayOnce(ctx context.Context, sess *Session, conn *pgx.Conn, store *staging.Store, dec Decoder, cfg *ReplayConfig, res *Result, first bool) error {
	tables := dec.Tables()
	// Another chain's staging is refused before the schema is touched.
	if err := checkStaged(ctx, conn, cfg.Schema, dec, store); err != nil {
		return err
	}
	if err := EnsureSchema(ctx, conn, cfg.Schema, tables, false, cfg.Logger); err != nil {
		return err
	}
	if err := ensureKeys(ctx, conn, cfg.Schema, "", cfg.IndexMemory, cfg.Logger); err != nil {
		return err
	}
	covered, err := CoveredHeights(ctx, conn, cfg.Schema)
	if err != nil {
		return err
	}
	p, err := startReplay(ctx, conn, store, tables, cfg, covered, first)
	if err != nil {
		return err
	}
	cp, err := newCopier(ctx, conn, cfg.Schema, tables)
	if err != nil {
		return err
	}
	anchor, err := blocksAnchor(ctx, conn, cfg.Schema, AllTables(dec))
	if err != nil {
		return err
	}
	next := p.from
	if p.started {
		next = p.last + 1
	}
	if first {
		res.Start = next
	}
	if cfg.OnStart != nil {
		cfg.OnStart(p.from, p.to, next)
	}
	rows := chain.NewRows(tables)
	chk := &chainCheck{store: store}
	for _, r := range clip(covered, next, p.to) {
		for h := r.From; h <= r.To; {
			to := min(h+uint64(cfg.BatchBlocks)-1, r.To)
			if to < h {
				to = r.To
			}
			b, err := replayChunk(ctx, conn, store, dec, cfg, tables, cp, chk, anchor, rows, h, to, to == p.to)
			if err != nil {
				return err
			}
			sess.Progressed()
			res.add(b, tables)
			res.Last = Cursor{Height: b.To, Valid: true}
			if err := crashpoint.Hit(ctx, crashpoint.AfterCommit); err != nil {
				return err
			}
			if cfg.OnBatch != nil {
				cfg.OnBatch(b)
			}
			if b.To == ^uint64(0) {
				break
			}
			h = b.To + 1
		}
	}
	// Heights of the range no longer covered (rolled back by a reorg since
	// the replay started) have nothing to replace: the head stream writes
	// them again with this blockhaul's rows.
	if _, err := conn.Exec(ctx, fmt.Sprintf(`UPDATE %s.%s SET last_height = range_end, status = 'complete', updated_at = now(), completed_at = now() WHERE alias = $1`,
		chain.QuoteIdent(cfg.Schema), replayTable), cfg.Alias); err != nil {
		return fmt.Errorf("export: replay %s: complete: %w", cfg.Alias, err)
	}
	res.Complete = true
	res.Last = Cursor{Height: p.to, Valid: true}
	cfg.Logger.Info("replay complete", "alias", cfg.Alias, "tables", strings.Join(tableNames(tables), ","), "from", p.from, "to", p.to, "blocks", res.Blocks)
	return nil
}

// startReplay reads the replay's row, or, when there is none or it is
// complete, decides the range from covered and cfg, checks staging holds
// it, and (re)starts the row.
func startReplay(ctx context.Context, conn *pgx.Conn, store *staging.Store, tables []chain.Table, cfg *ReplayConfig, covered []staging.Range, first bool) (replayProgress, error) {
	qs := chain.QuoteIdent(cfg.Schema)
	var p replayProgress
	var from, to int64
	var last *int64
	var status string
	var names []string
	err := conn.QueryRow(ctx, fmt.Sprintf("SELECT range_start, range_end, last_height, status, tables FROM %s.%s WHERE alias = $1", qs, replayTable), cfg.Alias).
		Scan(&from, &to, &last, &status, &names)
	switch {
	case err == nil && status == "in_progress":
		if !slices.Equal(names, tableNames(tables)) {
			return p, fmt.Errorf("export: replay %q is of tables %s, not %s (choose another --alias)", cfg.Alias, strings.Join(names, ","), strings.Join(tableNames(tables), ","))
		}
		if cfg.FromSet && uint64(from) != cfg.From || cfg.ToSet && uint64(to) != cfg.To {
			return p, &AliasRangeError{Alias: cfg.Alias, HaveFrom: uint64(from), HaveTo: uint64(to), GivenFrom: cfg.From, GivenTo: cfg.To}
		}
		p = replayProgress{from: uint64(from), to: uint64(to)}
		if last != nil {
			p.last, p.started = uint64(*last), true
		}
		if first {
			cfg.Logger.Info("replay resuming", "alias", cfg.Alias, "from", p.from, "to", p.to, "last", p.last, "started", p.started)
		}
		return p, nil
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return p, fmt.Errorf("export: read replay %q: %w", cfg.Alias, err)
	}
	// A new replay (or one run again after it completed).
	if len(covered) == 0 {
		return p, &ReplayRangeError{Reason: fmt.Sprintf("schema %s holds no exported heights (no checkpoint): nothing to replay; export the range instead", cfg.Schema)}
	}
	p = replayProgress{from: covered[0].From, to: covered[len(covered)-1].To}
	if cfg.FromSet {
		p.from = cfg.From
	}
	if cfg.ToSet {
		p.to = cfg.To
	}
	if p.to < p.from {
		return p, &ReplayRangeError{Reason: fmt.Sprintf("range %d-%d is empty (the checkpoints of schema %s cover %s)", p.from, p.to, cfg.Schema, rangeList(covered))}
	}
	if cfg.FromSet || cfg.ToSet {
		if gaps := uncovered(covered, p.from, p.to); len(gaps) > 0 {
			return p, &ReplayRangeError{Reason: fmt.Sprintf("heights %s of %d-%d are not in PostgreSQL (the checkpoints of schema %s cover %s): a replay rewrites heights already exported; export the others",
				rangeList(gaps), p.from, p.to, cfg.Schema, rangeList(covered))}
		}
	}
	for _, r := range clip(covered, p.from, p.to) {
		missing, err := store.Missing(r.From, r.To)
		if err != nil {
			return p, err
		}
		if len(missing) > 0 {
			return p, &ReplayRangeError{Reason: fmt.Sprintf("heights %s are exported but not staged in %s: a replay reads staging alone (fetch them first)", rangeList(missing), store.Dir())}
		}
	}
	_, err = conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.%s (alias, tables, range_start, range_end) VALUES ($1, $2, $3, $4)
ON CONFLICT (alias) DO UPDATE SET tables = EXCLUDED.tables, range_start = EXCLUDED.range_start, range_end = EXCLUDED.range_end,
	last_height = NULL, status = 'in_progress', started_at = now(), updated_at = now(), completed_at = NULL`, qs, replayTable),
		cfg.Alias, tableNames(tables), int64(p.from), int64(p.to))
	if err != nil {
		return p, fmt.Errorf("export: register replay %q: %w", cfg.Alias, err)
	}
	cfg.Logger.Info("replay starting", "alias", cfg.Alias, "tables", strings.Join(tableNames(tables), ","), "from", p.from, "to", p.to, "covered", rangeList(covered))
	return p, nil
}

// ReplayProgress is a replay's progress row, as ReadReplayProgress reads it.
type ReplayProgress struct {
	From, To  uint64
	Last      uint64
	LastValid bool // a chunk has committed
	Complete  bool
}

// ReadReplayProgress reads the progress row of the replay alias in schema;
// ok is false when there is none (or no replay table yet).
func ReadReplayProgress(ctx context.Context, conn *pgx.Conn, schema, alias string) (p ReplayProgress, ok bool, err error) {
	qs := chain.QuoteIdent(schema)
	var have bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qs+"."+replayTable).Scan(&have); err != nil || !have {
		return p, false, err
	}
	var from, to int64
	var last *int64
	var status string
	err = conn.QueryRow(ctx, fmt.Sprintf("SELECT range_start, range_end, last_height, status FROM %s.%s WHERE alias = $1", qs, replayTable), alias).
		Scan(&from, &to, &last, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("export: read replay %q: %w", alias, err)
	}
	p = ReplayProgress{From: uint64(from), To: uint64(to), Complete: status == "complete"}
	if last != nil {
		p.Last, p.LastValid = uint64(*last), true
	}
	return p, true, nil
}

// anchor is the blocks table a replay checks its chunks against.
type anchor struct {
	table, height string // quoted, schema qualified; quoted
}

// blocksAnchor finds the family's blocks table (named "blocks", with a
// "hash" column) in schema; none when the schema does not hold it.
func blocksAnchor(ctx context.Context, conn *pgx.Conn, schema string, all []chain.Table) (*anchor, error) {
	for _, t := range all {
		if t.Name != "blocks" || !slices.Contains(t.ColumnNames(), "hash") {
			continue
		}
		name := chain.QuoteIdent(schema) + "." + chain.QuoteIdent(t.Name)
		if ok, err := tableExists(ctx, conn, name); err != nil || !ok {
			return nil, err
		}
		return &anchor{table: name, height: chain.QuoteIdent(t.HeightColumn)}, nil
	}
	return nil, nil
}

// errChunkChanged is a chunk whose rows in PostgreSQL changed under it.
var errChunkChanged = errors.New("export: replay: the blocks of the chunk changed in PostgreSQL")

// replayChunk replays [from, to] (ending earlier when the rows reach
// cfg.BatchRows), trying again when the chunk's blocks changed under it.
func replayChunk(ctx context.Context, conn *pgx.Conn, store *staging.Store, dec Decoder, cfg *ReplayConfig, tables []chain.Table, cp *copier, chk *chainCheck, a *anchor, rows *chain.Rows, from, to uint64, last bool) (BatchStats, error) {
	var err error
	for attempt := 1; ; attempt++ {
		rows.Reset()
		var prev []byte
		if from > 0 {
			if h, _, herr := store.Header(from - 1); herr == nil {
				prev = h
			}
		}
		t0 := time.Now()
		var b batch
		b, err = readBatch(store, dec, from, to, cfg.BatchRows, prev, "staging", rows)
		if err != nil {
			return BatchStats{}, err
		}
		st := BatchStats{From: b.from, To: b.to, Rows: make([]int, len(tables)), Decode: time.Since(t0)}
		t1 := time.Now()
		err = commitReplayChunk(ctx, conn, cfg, tables, cp, chk, a, b, last && b.to == to)
		if err == nil {
			chk.committed()
			for i := range tables {
				st.Rows[i] = rows.Len(i)
			}
			st.Commit = time.Since(t1)
			return st, nil
		}
		if errors.Is(err, errKeysDeferred) && attempt < replayAttempts {
			// A fill dropped the keys since the replay started.
			if err = buildKeysFor(ctx, conn, cfg.Schema, cfg.IndexMemory, cfg.Logger); err != nil {
				break
			}
			continue
		}
		if !(errors.Is(err, errChunkChanged) || isUniqueViolation(err) || isDeadlock(err)) || attempt == replayAttempts {
			break
		}
		cfg.Logger.Warn("replay chunk changed under it (a reorg, or another writer); reading it again", "from", b.from, "to", b.to, "attempt", attempt, "err", err)
	}
	return BatchStats{}, fmt.Errorf("export: replay %d-%d: %w", from, to, err)
}

// commitReplayChunk is one chunk's transaction: check the blocks, delete
// the tables' rows of the chunk's heights, COPY the new ones, move the
// replay's row.
func commitReplayChunk(ctx context.Context, conn *pgx.Conn, cfg *ReplayConfig, tables []chain.Table, cp *copier, chk *chainCheck, a *anchor, b batch, last bool) error {
	qs := chain.QuoteIdent(cfg.Schema)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := startBatchTx(ctx, tx, chk, cfg.Schema, b, cfg.SyncCommit, last); err != nil {
			return err
		}
		if a != nil {
			if err := checkAnchor(ctx, tx, a, b); err != nil {
				return err
			}
		}
		for _, t := range tables {
			if _, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM %s.%s WHERE %s BETWEEN $1 AND $2", qs, chain.QuoteIdent(t.Name), chain.QuoteIdent(t.HeightColumn)),
				int64(b.from), int64(b.to)); err != nil {
				return fmt.Errorf("delete %s %d-%d: %w", t.Name, b.from, b.to, err)
			}
		}
		if _, err := cp.sendAll(ctx, tx, tables, b.rows); err != nil {
			return err
		}
		if err := crashpoint.Hit(ctx, crashpoint.AfterCopy); err != nil {
			return err
		}
		if err := checkKeys(ctx, tx, cfg.Schema, ""); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s.%s SET last_height = GREATEST(last_height, $2), updated_at = now() WHERE alias = $1`, qs, replayTable),
			cfg.Alias, int64(b.to)); err != nil {
			return fmt.Errorf("save replay %s at %d: %w", cfg.Alias, b.to, err)
		}
		return crashpoint.Hit(ctx, crashpoint.BeforeCommit)
	})
}

// checkAnchor confirms that the blocks table holds every height of b, the
// first and last with the hashes staging gave (the heights between are
// then the same blocks: each names its parent), and locks those rows until
// the transaction ends, so that a rollback of them waits for the chunk.
func checkAnchor(ctx context.Context, tx pgx.Tx, a *anchor, b batch) error {
	rows, err := tx.Query(ctx, fmt.Sprintf("SELECT %[2]s, hash FROM %[1]s WHERE %[2]s BETWEEN $1 AND $2 ORDER BY %[2]s FOR SHARE", a.table, a.height), int64(b.from), int64(b.to))
	if err != nil {
		return fmt.Errorf("check blocks %d-%d: %w", b.from, b.to, err)
	}
	defer rows.Close()
	var n uint64
	var firstHash, lastHash []byte
	for rows.Next() {
		var h int64
		var hash []byte
		if err := rows.Scan(&h, &hash); err != nil {
			return fmt.Errorf("check blocks %d-%d: %w", b.from, b.to, err)
		}
		if uint64(h) == b.from {
			firstHash = hash
		}
		if uint64(h) == b.to {
			lastHash = hash
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check blocks %d-%d: %w", b.from, b.to, err)
	}
	switch {
	case n != b.to-b.from+1:
		return fmt.Errorf("%w: %d of the %d heights are in the blocks table", errChunkChanged, n, b.to-b.from+1)
	case !bytes.Equal(firstHash, b.firstHash) || !bytes.Equal(lastHash, b.lastHash):
		return fmt.Errorf("%w: the blocks table holds other blocks at %d or %d than staging", errChunkChanged, b.from, b.to)
	}
	return nil
}

// CoveredHeights returns the heights the schema's checkpoints say
// PostgreSQL holds, as sorted disjoint ranges: the head stream's
// [start_height, height] and each backfill's [range_start, last_height].
func CoveredHeights(ctx context.Context, conn *pgx.Conn, schema string) ([]staging.Range, error) {
	qs := chain.QuoteIdent(schema)
	var have bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL", qs+"."+checkpointTable, qs+"."+backfillTable).Scan(&have); err != nil {
		return nil, fmt.Errorf("export: look for checkpoints: %w", err)
	}
	if !have {
		return nil, nil
	}
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT start_height, height FROM %[1]s.%[2]s WHERE height >= start_height
UNION ALL SELECT range_start, last_height FROM %[1]s.%[3]s WHERE last_height >= range_start`, qs, checkpointTable, backfillTable))
	if err != nil {
		return nil, fmt.Errorf("export: read checkpoints: %w", err)
	}
	var rs []staging.Range
	for rows.Next() {
		var from, to int64
		if err := rows.Scan(&from, &to); err != nil {
			rows.Close()
			return nil, fmt.Errorf("export: read checkpoints: %w", err)
		}
		rs = append(rs, staging.Range{From: uint64(from), To: uint64(to)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("export: read checkpoints: %w", err)
	}
	return mergeRanges(rs), nil
}

// mergeRanges sorts rs and joins those that overlap or touch.
func mergeRanges(rs []staging.Range) []staging.Range {
	slices.SortFunc(rs, func(a, b staging.Range) int { return cmp.Compare(a.From, b.From) })
	var out []staging.Range
	for _, r := range rs {
		if n := len(out); n > 0 && (r.From <= out[n-1].To || r.From == out[n-1].To+1) {
			out[n-1].To = max(out[n-1].To, r.To)
			continue
		}
		out = append(out, r)
	}
	return out
}

// clip returns the parts of rs within [from, to].
func clip(rs []staging.Range, from, to uint64) []staging.Range {
	var out []staging.Range
	for _, r := range rs {
		if r.To < from || r.From > to {
			continue
		}
		out = append(out, staging.Range{From: max(r.From, from), To: min(r.To, to)})
	}
	return out
}

// uncovered returns the heights of [from, to] outside rs.
func uncovered(rs []staging.Range, from, to uint64) []staging.Range {
	var out []staging.Range
	next := from
	for _, r := range clip(rs, from, to) {
		if r.From > next {
			out = append(out, staging.Range{From: next, To: r.From - 1})
		}
		if r.To == ^uint64(0) {
			return out
		}
		next = r.To + 1
	}
	if next <= to {
		out = append(out, staging.Range{From: next, To: to})
	}
	return out
}

// rangeList prints up to three ranges, then how many more.
func rangeList(rs []staging.Range) string {
	parts := make([]string, 0, 3)
	for i, r := range rs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(rs)-3))
			break
		}
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ", ")
}
