// Package export streams staged blocks into PostgreSQL in height order. It
// reads a contiguous range from staging, checks that every block's parent
// is the block before it (across batch boundaries too), decodes blocks into
// rows and COPYs them, one transaction per batch holding the COPY of every
// table and the stream's checkpoint. A kill at any point rolls rows and
// cursor back together. Export never talks to an RPC node.
package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Config configures an export. Schema and Stream are required.
type Config struct {
	// Schema holds the chain's tables and blockhaul's own.
	Schema string
	// Stream is what this export advances (head or a backfill alias).
	Stream Stream
	// BatchBlocks is the most blocks per transaction. Default 500.
	BatchBlocks int
	// BatchRows ends a batch early once it holds this many rows, so that a
	// dense chain's batches stay bounded in memory. Default 100,000.
	BatchRows int
	// SyncCommit makes every batch commit wait for its WAL flush. By default
	// batches commit with synchronous_commit=off — a PostgreSQL crash can
	// lose only the last batches, rows and cursor together, which are then
	// exported again — and the batch that completes the range commits
	// synchronously.
	SyncCommit bool
	// IndexMemory is the maintenance_work_mem, in bytes, of the primary
	// keys this export builds before writing when another fill deferred
	// them (0: the server's); pipeline sets --index-memory.
	IndexMemory int64
	// SkipIndexes leaves secondary indexes uncreated (deferred index builds).
	SkipIndexes bool
	// Indexes is which secondary indexes the schema gets (--indexes). The
	// zero value is the default set.
	Indexes IndexSet
	// KeylessFill is the token DeferKeys returned when it dropped (or took
	// over) the tables' primary keys for this fill: its batches may write
	// into the keyless tables. Any other writer ("") that finds keys
	// deferred builds them before it commits a batch.
	KeylessFill string
	// Available, if set, is called before each batch with the batch's last
	// height and blocks until staging's contiguous prefix reaches it or can
	// grow no further; it returns the prefix's last height. Nil means the
	// range is already staged (the export command).
	Available func(ctx context.Context, h uint64) (last uint64, ok bool, err error)
	// Logger receives progress logs. Default: discard.
	Logger *slog.Logger
	// OnBatch, if set, is called after each committed batch.
	OnBatch func(BatchStats)
	// OnStart, if set, is called once the stream's checkpoint is read, with
	// the first height it will export (Stream.To + 1 when it is complete),
	// before anything is committed: again on each retry after a transient
	// fault. RunParts calls it for each sub-range, as it calls OnBatch.
	OnStart func(s Stream, next uint64)
}

// BatchStats describes one committed batch.
type BatchStats struct {
	From, To   uint64
	Rows       []int // per table, in decoder order
	Conflicted bool  // the batch collided with rows already present
	// ConflictCode is the SQLSTATE that sent the batch down the merge path:
	// 23505 (its rows were there) or 40P01/40001 (it deadlocked with
	// another writer of the same rows).
	ConflictCode string
	Decode       time.Duration
	Commit       time.Duration
}

// Result summarises an export.
type Result struct {
	Start     uint64 // first height this run exported (when Blocks > 0)
	Blocks    uint64
	Rows      map[string]uint64
	Batches   uint64
	Conflicts uint64 // batches that took the conflict path
	Last      Cursor
	Complete  bool // the stream's range is entirely in PostgreSQL
	Duration  time.Duration
}

// add counts a committed batch of tables.
func (r *Result) add(st BatchStats, tables []chain.Table) {
	r.Blocks += st.To - st.From + 1
	r.Batches++
	for i, t := range tables {
		r.Rows[t.Name] += uint64(st.Rows[i])
	}
}

func (c *Config) ensureDefaults() {
	if c.BatchBlocks == 0 {
		c.BatchBlocks = 500
	}
	if c.BatchRows == 0 {
		c.BatchRows = 100_000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid field at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Schema == "" {
		errs = append(errs, errors.New("export: schema is empty"))
	}
	if c.BatchBlocks < 0 {
		errs = append(errs, fmt.Errorf("export: batch blocks must be positive, got %d", c.BatchBlocks))
	}
	if !c.Stream.Head {
		if c.Stream.Alias == "" {
			errs = append(errs, errors.New("export: backfill alias is empty"))
		}
		if c.Stream.To < c.Stream.From {
			errs = append(errs, fmt.Errorf("export: range end %d is below its start %d", c.Stream.To, c.Stream.From))
		}
	}
	return errors.Join(errs...)
}

// batch is a decoded batch on its way from the reader to the writer.
type batch struct {
	from, to  uint64
	firstHash []byte // the hash of block from (a replay checks it)
	lastHash  []byte
	rows      *chain.Rows
	decode    time.Duration
}

// Run exports the stream's remaining range from store into the database
// through sess. It resumes at the stream's last committed height + 1 and
// returns when the range is complete, the context is done, or an error
// stops it; a batch in flight is then rolled back, never half-committed.
//
// A transient database fault (see TransientCause) does not end it: the
// session backs off and reconnects, and the export starts again from the
// checkpoint PostgreSQL holds — the batch in flight is redone if it did not
// commit, and batches a crash of the server lost (asynchronous commits) are
// redone too. Each committed batch renews the session's retry budget.
func Run(ctx context.Context, sess *Session, store *staging.Store, dec Decoder, cfg Config) (Result, error) {
	cfg.ensureDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	tables := dec.Tables()
	res := Result{Rows: make(map[string]uint64, len(tables))}
	for _, t := range tables {
		res.Rows[t.Name] = 0
	}
	if id, ok := store.Identity(); ok && id.Family != dec.Family() {
		return res, fmt.Errorf("export: staging %s holds a %s chain, not %s", store.Dir(), id.Family, dec.Family())
	}
	attempt := 0
	err := sess.Do(ctx, "stream "+cfg.Stream.Name(), func(ctx context.Context, conn *pgx.Conn) error {
		attempt++
		return runOnce(ctx, sess, conn, store, dec, &cfg, &res, attempt == 1)
	})
	res.Complete = !cfg.Stream.Head && res.Last.Valid && res.Last.Height >= cfg.Stream.To
	res.Duration = time.Since(start)
	if err == nil && ctx.Err() != nil && !res.Complete {
		err = ctx.Err()
	}
	return res, err
}

// runOnce is one attempt of Run on one connection: it reads the stream's
// checkpoint and exports from there, adding what it commits to res.
func runOnce(ctx context.Context, sess *Session, conn *pgx.Conn, store *staging.Store, dec Decoder, cfg *Config, res *Result, first bool) error {
	tables := dec.Tables()
	// Another chain's staging is refused before the schema is touched.
	if err := checkStaged(ctx, conn, cfg.Schema, dec, store); err != nil {
		return err
	}
	if err := EnsureSchema(ctx, conn, cfg.Schema, cfg.Indexes.Select(tables), cfg.SkipIndexes, cfg.Logger); err != nil {
		return err
	}
	if err := ensureKeys(ctx, conn, cfg.Schema, cfg.KeylessFill, cfg.IndexMemory, cfg.Logger); err != nil {
		return err
	}
	cp, err := newCopier(ctx, conn, cfg.Schema, tables)
	if err != nil {
		return err
	}
	cur, err := LoadCursor(ctx, conn, cfg.Schema, cfg.Stream)
	if err != nil {
		return err
	}
	target, err := TargetName(ctx, conn, cfg.Schema, cfg.Stream)
	if err != nil {
		return err
	}
	reconcileMirror(store, target, cur, cfg.Logger)
	res.Last = cur

	next := cur.Next(cfg.Stream.From)
	end := cfg.Stream.To
	if cfg.OnStart != nil {
		cfg.OnStart(cfg.Stream, next)
	}
	if !cfg.Stream.Head && next > end {
		return nil
	}
	if first {
		res.Start = next
	}

	// The hash the first block's parent must equal: the cursor's, or the
	// staged block before the range.
	prev, prevSrc := []byte(nil), ""
	if cur.Valid && cur.Height+1 == next {
		prev, prevSrc = cur.Hash, "the stream's checkpoint"
	} else if next > 0 {
		if h, _, err := store.Header(next - 1); err == nil {
			prev, prevSrc = h, "staging"
		} else if h, ok, err := committedHash(ctx, conn, cfg.Schema, tables, next-1); err != nil {
			return err
		} else if ok {
			// Staging no longer holds the block below the range, but
			// PostgreSQL does (another stream exported it): the new rows
			// must continue those.
			prev, prevSrc = h, "the row already in PostgreSQL"
		}
	}

	// The first height the stream's rows start at, mirrored beside its
	// checkpoint so that prune can tell what a target holds.
	mirrorFrom := cfg.Stream.From
	if cfg.Stream.Head {
		mirrorFrom = next
		if h, ok, err := HeadStart(ctx, conn, cfg.Schema); err == nil && ok {
			mirrorFrom = h
		}
	}

	cfg.Logger.Info("export starting", "stream", cfg.Stream.Name(), "next", next, "to", end, "target", target)
	// The reader decodes the next batch while the writer commits this one.
	// A reader failure does not cancel the writer: batches already decoded
	// are valid and are committed before the error is returned. A writer
	// failure stops the reader.
	rctx, stopReader := context.WithCancel(ctx)
	defer stopReader()
	free := make(chan *chain.Rows, 3)
	for range 3 {
		free <- chain.NewRows(tables)
	}
	decoded := make(chan batch, 1)
	readErr := make(chan error, 1)
	go func() {
		defer close(decoded)
		readErr <- readBatches(rctx, store, dec, cfg, next, end, prev, prevSrc, free, decoded)
	}()
	chk := &chainCheck{store: store}
	werr := func() error {
		for b := range decoded {
			last := b.to == end && !cfg.Stream.Head
			st, err := writeBatch(ctx, conn, cfg, tables, cp, chk, b, last)
			if err != nil {
				return err
			}
			sess.Progressed()
			res.add(st, tables)
			if st.Conflicted {
				res.Conflicts++
			}
			res.Last = Cursor{Height: b.to, Hash: b.lastHash, Valid: true}
			if err := crashpoint.Hit(ctx, crashpoint.AfterCommit); err != nil {
				return err
			}
			if err := store.SetMirror(target, staging.Checkpoint{From: mirrorFrom, Height: b.to, Hash: b.lastHash, Updated: time.Now()}); err != nil {
				return err
			}
			b.rows.Reuse() // committed: nothing holds its values any more
			free <- b.rows
			if cfg.OnBatch != nil {
				cfg.OnBatch(st)
			}
		}
		return nil
	}()
	stopReader()
	for range decoded { // let a reader blocked on send finish
	}
	rerr := <-readErr
	if werr != nil {
		return werr
	}
	if rerr != nil && !(errors.Is(rerr, context.Canceled) && ctx.Err() == nil) {
		return rerr
	}
	return nil
}

// readBatches reads [next, end] from staging in batches, checks contiguity
// and continuity, decodes, and hands batches to the writer.
func readBatches(ctx context.Context, store *staging.Store, dec Decoder, cfg *Config, next, end uint64, prev []byte, prevSrc string, free chan *chain.Rows, out chan<- batch) error {
	for next <= end {
		to := min(next+uint64(cfg.BatchBlocks)-1, end)
		if to < next { // overflow
			to = end
		}
		if cfg.Available != nil {
			last, ok, err := cfg.Available(ctx, to)
			if !ok || last < next {
				if err != nil {
					return err
				}
				return gap(store, next)
			}
			to = min(to, last)
		}
		var rows *chain.Rows
		select {
		case rows = <-free:
		case <-ctx.Done():
			return ctx.Err()
		}
		t0 := time.Now()
		b, err := readBatch(store, dec, next, to, cfg.BatchRows, prev, prevSrc, rows)
		if err != nil {
			return err
		}
		b.decode = time.Since(t0)
		select {
		case out <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
		prev, prevSrc = b.lastHash, "staging"
		next = b.to + 1
		if next == 0 {
			break
		}
	}
	return nil
}

// gap is the error for height h missing from staging: the damage that
// removed it, when this process removed it as unreadable (another stream's
// read, a moment before), or else a *GapError.
func gap(store *staging.Store, h uint64) error {
	if err := store.DroppedAt(h); err != nil {
		return fmt.Errorf("export: height %d was removed from staging as unreadable: %w", h, err)
	}
	return &GapError{Height: h}
}

// readBatch reads and decodes [from, to], ending early once the batch holds
// maxRows rows.
func readBatch(store *staging.Store, dec Decoder, from, to uint64, maxRows int, prev []byte, prevSrc string, rows *chain.Rows) (batch, error) {
	it, err := store.Scan(from, to)
	if err != nil {
		return batch{}, err
	}
	defer it.Close()
	it.ReuseBuffer()
	want := from
	var first []byte
	for it.Next() {
		blk := it.Block()
		if blk.Height != want {
			return batch{}, gap(store, want)
		}
		if prev != nil && !bytes.Equal(blk.ParentHash, prev) {
			ce := &ContinuityError{Height: blk.Height, ParentHash: blk.ParentHash, PrevHash: prev, Source: prevSrc}
			blame(store, dec, ce, blk.Raw)
			return batch{}, ce
		}
		if err := dec.Decode(blk.Height, blk.Raw, rows); err != nil {
			return batch{}, &DecodeError{Height: blk.Height, Err: err}
		}
		if first == nil {
			first = blk.Hash
		}
		prev, prevSrc = blk.Hash, "staging"
		want++
		if rows.Total() >= maxRows && blk.Height < to {
			to = blk.Height
			break
		}
	}
	if err := it.Err(); err != nil {
		var ce *staging.CorruptRecordError
		if errors.As(err, &ce) {
			if store.KeepsDamage() {
				// A command that only reads staging deletes nothing.
				return batch{}, fmt.Errorf("%w (staging is left as it is: blockhaul repair --staging %s removes it and fetches the height again)", err, store.Dir())
			}
			// Never keep a corrupt record: drop it so fetch stages it again.
			if derr := store.Delete(ce.Height, ce.Height); derr != nil {
				return batch{}, errors.Join(err, derr)
			}
			return batch{}, fmt.Errorf("%w (the record was removed from staging; fetch the height again)", err)
		}
		return batch{}, err
	}
	if want != to+1 {
		return batch{}, gap(store, want)
	}
	return batch{from: from, to: to, firstHash: first, lastHash: prev, rows: rows}, nil
}

// Decoded is a range of staged blocks ReadDecoded decoded.
type Decoded struct {
	From, To  uint64 // the heights read (To may be below the asked end: see ReadDecoded)
	FirstHash []byte // block From's hash
	LastHash  []byte // block To's hash
}

// ReadDecoded decodes the staged blocks [from, to] into rows, with the
// checks an export makes: heights contiguous (a missing one is a
// *GapError), each block's parent the block before it, the first's prev
// when prev is not nil (a *ContinuityError; prevSrc says where prev came
// from), a corrupt record removed from staging. It ends early, after a
// whole block, once rows hold maxRows rows. Outputs other than PostgreSQL
// read staging through it, so that their rows are the same.
func ReadDecoded(store *staging.Store, dec Decoder, from, to uint64, maxRows int, prev []byte, prevSrc string, rows *chain.Rows) (Decoded, error) {
	b, err := readBatch(store, dec, from, to, maxRows, prev, prevSrc, rows)
	if err != nil {
		return Decoded{}, err
	}
	return Decoded{From: b.from, To: b.to, FirstHash: b.firstHash, LastHash: b.lastHash}, nil
}

// TargetName identifies an export target without credentials: the
// database cluster's system identifier, the database, the schema and the
// stream. Checkpoint mirrors in staging are keyed by it.
func TargetName(ctx context.Context, conn *pgx.Conn, schema string, s Stream) (string, error) {
	cluster, db, err := ClusterOf(ctx, conn)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("pg:%s/%s/%s/%s", cluster, db, schema, s.Name()), nil
}

// ClusterOf names the cluster conn is on as target names do (its system
// identifier, or host:port where the role may not read it) and the
// database it is connected to.
func ClusterOf(ctx context.Context, conn *pgx.Conn) (cluster, db string, err error) {
	var sysid int64
	err = conn.QueryRow(ctx, "SELECT (SELECT system_identifier FROM pg_control_system()), current_database()").Scan(&sysid, &db)
	var refused *pgconn.PgError
	if errors.As(err, &refused) {
		// The server refused pg_control_system (a role without the
		// right); the host identifies the cluster well enough.
		if err2 := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err2 != nil {
			return "", "", fmt.Errorf("export: identify database: %w", err2)
		}
		return fmt.Sprintf("%s:%d", conn.Config().Host, conn.Config().Port), db, nil
	}
	if err != nil {
		// Anything else (a cancelled context, a lost connection) is the
		// answer: asking again on a connection pgx has closed would hide
		// it behind "conn closed".
		return "", "", fmt.Errorf("export: identify database: %w", err)
	}
	return fmt.Sprint(sysid), db, nil
}

// reconcileMirror compares PostgreSQL's cursor with the staging mirror and
// says what it means. PostgreSQL is the truth either way.
func reconcileMirror(store *staging.Store, target string, cur Cursor, log *slog.Logger) {
	m, ok, err := store.Mirror(target)
	switch {
	case err != nil:
		log.Warn("checkpoint mirror unreadable; PostgreSQL's checkpoint is used", "err", err)
	case !ok:
	case !cur.Valid:
		log.Warn("target has no checkpoint but staging remembers one: a new or restored database; exporting again from staging",
			"mirror_height", m.Height)
	case m.Height > cur.Height:
		log.Warn("target is behind its mirrored checkpoint (restored database or lost commits); exporting again from PostgreSQL's checkpoint",
			"mirror_height", m.Height, "pg_height", cur.Height)
	case m.Height < cur.Height:
		log.Info("mirror behind PostgreSQL (stopped between commit and mirror); catching up", "mirror_height", m.Height, "pg_height", cur.Height)
	}
}

// committedHash returns the hash of block h as the chain's blocks table in
// PostgreSQL holds it, if it holds it. The blocks table is the decoder's
// table named "blocks" with a "hash" column; without one there is nothing
// to compare.
func committedHash(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table, h uint64) ([]byte, bool, error) {
	for _, t := range tables {
		if t.Name != "blocks" || !slices.Contains(t.ColumnNames(), "hash") {
			continue
		}
		var hash []byte
		err := conn.QueryRow(ctx, fmt.Sprintf("SELECT hash FROM %s.%s WHERE %s = $1", chain.QuoteIdent(schema), chain.QuoteIdent(t.Name), chain.QuoteIdent(t.HeightColumn)), int64(h)).Scan(&hash)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("export: read block %d from PostgreSQL: %w", h, err)
		}
		return hash, true, nil
	}
	return nil, false, nil
}

// BlockVerifier is what a Decoder may also do: recompute a raw record's
// block hash from its header, returning a *chain.HashMismatchError when it
// is not the hash the record carries.
type BlockVerifier interface {
	VerifyBlock(raw []byte) (hash []byte, err error)
}

// blame finds, for a continuity break, which of the two blocks has a
// stored hash its own header does not give (raw is block ce.Height's
// record), and removes that block from staging so that a fetch stages it
// again. When both hash correctly (a block of another fork, or a forged
// block whose hash was recomputed), the staged ones of the two are removed.
func blame(store *staging.Store, dec Decoder, ce *ContinuityError, raw []byte) {
	v, ok := dec.(BlockVerifier)
	if !ok {
		return
	}
	// A command that only reads staging (KeepsDamage) deletes nothing.
	remove := func(from, to uint64) bool { return !store.KeepsDamage() && store.Delete(from, to) == nil }
	check := func(h uint64, raw []byte) bool {
		var hm *chain.HashMismatchError
		if _, err := v.VerifyBlock(raw); errors.As(err, &hm) {
			ce.Wrong, ce.Computed = h, hm.Computed
			ce.Removed = remove(h, h)
			return true
		}
		return false
	}
	if check(ce.Height, raw) {
		return
	}
	if ce.Source == "staging" {
		prev, err := store.Get(ce.Height - 1)
		if err != nil || check(ce.Height-1, prev.Raw) {
			return
		}
		// Both blocks hash correctly: which one is of the chain cannot be
		// told from them, so neither is kept.
		if remove(ce.Height-1, ce.Height) {
			ce.Unlinked = []uint64{ce.Height - 1, ce.Height}
		}
		return
	}
	// Block ce.Height-1 is committed (its hash came from PostgreSQL): the
	// staged block is the one a fetch can replace.
	if remove(ce.Height, ce.Height) {
		ce.Unlinked = []uint64{ce.Height}
	}
}
