package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// StreamCheck is one stream's checkpoint checked against the rows it
// claims.
type StreamCheck struct {
	Stream  string   `json:"stream"` // head/<name> or backfill/<alias>
	From    uint64   `json:"from"`   // where the stream's rows start
	Height  *int64   `json:"height"` // its checkpoint; nil: nothing committed
	Status  string   `json:"status,omitempty"`
	Problem []string `json:"problems,omitempty"`
}

// PGReport is what VerifyPG found in PostgreSQL.
type PGReport struct {
	Schema  string        `json:"schema"`
	Blocks  int64         `json:"blocks"` // block rows read
	Streams []StreamCheck `json:"streams"`
	// Gaps are runs of heights missing between exported blocks. They are
	// listed, not counted as problems: a backfill still running leaves one
	// below the head. A gap inside a stream's own range is a stream problem.
	Gaps       []Gap     `json:"gaps"`
	Duplicates []uint64  `json:"duplicates"` // heights with more than one block row
	Breaks     []Break   `json:"breaks"`     // across every seam between streams and ranges
	Differs    []Problem `json:"differs"`    // blocks whose hash is not the staged block's
	// Unreadable are exported heights whose staged header or record cannot
	// be read (or decoded): nothing could be compared there.
	Unreadable []Problem `json:"unreadable"`
	// Tables is every table of the family compared with what staging
	// decodes to, per chunk of Chunk heights (nil when no staging store
	// or decoder was given: nothing was compared); Uncompared are the
	// chunks left out of every table's comparison, and why.
	Tables     []TableCheck `json:"tables"`
	Chunk      uint64       `json:"chunk,omitempty"`
	Uncompared []Uncompared `json:"uncompared"`
	// Complete is whether every table's rows were compared over every
	// exported height: only then does no problem mean clean.
	Complete bool `json:"complete"`
	// TablesNotCompared are the tables of the schema left out of the
	// comparison whole: no decoder of the verify makes them (another
	// --abi's, or not blockhaul's), or their rows could not be digested.
	// The result is then not clean (exit 4).
	TablesNotCompared []string `json:"tables_not_compared"`
	// Counts of each kind; the lists stop at MaxListed.
	DuplicateCount  int           `json:"duplicate_count"`
	BreakCount      int           `json:"break_count"`
	DiffersCount    int           `json:"differs_count"`
	UnreadableCount int           `json:"unreadable_count"`
	Duration        time.Duration `json:"duration_ns"`

	headerUnreadable map[uint64]bool // listed in Unreadable by walkBlocks
}

// Problems is the number of things found wrong.
func (r *PGReport) Problems() int {
	n := r.DuplicateCount + r.BreakCount + r.DiffersCount + r.UnreadableCount
	for _, s := range r.Streams {
		n += len(s.Problem)
	}
	for _, t := range r.Tables {
		n += t.DiffersCount
	}
	return n
}

// VerifyPG checks what the schema holds: every stream's checkpoint against
// its rows (the checkpoint's block is there with the checkpoint's hash, and
// no height between the stream's start and its checkpoint is missing), no
// height twice, the parent-hash chain over every pair of adjacent exported
// heights — across the seams between streams and ranges exported at
// different times, which export alone never compares — and, when store is
// not nil, every exported block's hash against the staged block's and, with
// dec, every table's rows against the rows its staged blocks decode to:
// PostgreSQL digests its rows per chunk of heights as checksum does while
// blockhaul decodes the staged blocks and digests their rows the same way,
// and the chunks that differ are searched for the heights. The family's
// first table (dec.Tables()[0]) is its blocks table (height column, hash,
// parent_hash).
func VerifyPG(ctx context.Context, conn *pgx.Conn, store *staging.Store, schema string, dec Decoder, cfg VerifyConfig) (*PGReport, error) {
	if cfg.MaxListed <= 0 {
		cfg.MaxListed = 1000
	}
	start := time.Now()
	blocks := dec.Tables()[0]
	r := &PGReport{Schema: schema, Streams: []StreamCheck{}, Gaps: []Gap{}, Duplicates: []uint64{}, Breaks: []Break{}, Differs: []Problem{}, Unreadable: []Problem{}, Uncompared: []Uncompared{}}
	qs := chain.QuoteIdent(schema)
	qt := qs + "." + chain.QuoteIdent(blocks.Name)
	hc := chain.QuoteIdent(blocks.HeightColumn)
	err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qt).Scan(&exists); err != nil {
			return fmt.Errorf("archive: verify: look up %s: %w", qt, err)
		}
		if !exists {
			return fmt.Errorf("archive: verify: table %s does not exist (wrong --schema or chain?)", qt)
		}
		if err := r.checkStreams(ctx, tx, qs, qt, hc); err != nil {
			return err
		}
		exported, err := r.walkBlocks(ctx, tx, store, qt, hc, cfg)
		if err != nil || store == nil {
			return err
		}
		if err := r.compareRows(ctx, tx, store, dec, schema, exported, cfg); err != nil {
			return err
		}
		return r.listUncompared(ctx, tx, schema)
	})
	r.Duration = time.Since(start)
	r.Complete = r.Tables != nil && len(r.Uncompared) == 0
	for _, t := range r.Tables {
		r.Complete = r.Complete && t.Compared
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// listUncompared adds to r.Tables every table of the schema the decoder
// does not make, as not compared, and lists in r.TablesNotCompared the
// schema's tables left out whole.
func (r *PGReport) listUncompared(ctx context.Context, tx pgx.Tx, schema string) error {
	inSchema, err := SchemaTables(ctx, tx, schema)
	if err != nil {
		return fmt.Errorf("archive: verify: list the tables of %s: %w", schema, err)
	}
	r.TablesNotCompared = []string{}
	known := map[string]bool{}
	for _, t := range r.Tables {
		known[t.Table] = true
		if slices.Contains(inSchema, t.Table) && !t.Compared && !t.inHeights {
			r.TablesNotCompared = append(r.TablesNotCompared, t.Table)
		}
	}
	for _, name := range inSchema {
		if known[name] {
			continue
		}
		r.Tables = append(r.Tables, TableCheck{Table: name, NotCompared: UnknownTable, Differs: []RowDifference{}})
		r.TablesNotCompared = append(r.TablesNotCompared, name)
	}
	return nil
}

// UnknownTable is why a table of the schema no decoder makes was not
// compared.
const UnknownTable = "no decoder of this check makes it (not the chain family's, nor an --abi's the schema records or the check was given)"

// SchemaTables lists the tables of schema other than blockhaul's own
// (blockhaul_*), partitions left out, in name order.
func SchemaTables(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, schema string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname NOT LIKE 'blockhaul\_%' ORDER BY 1`, schema)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (r *PGReport) checkStreams(ctx context.Context, tx pgx.Tx, qs, qt, hc string) error {
	var have bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL", qs+".blockhaul_checkpoints", qs+".blockhaul_backfills").Scan(&have); err != nil {
		return fmt.Errorf("archive: verify streams: %w", err)
	}
	if !have {
		return nil
	}
	type row struct {
		name          string
		from          int64
		end           *int64 // backfills: the range end
		height        *int64
		hash          []byte
		status        string
		backfillRange bool
	}
	var streams []row
	rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT 'head/' || stream, start_height, NULL::bigint, height, hash, '' FROM %[1]s.blockhaul_checkpoints
UNION ALL SELECT 'backfill/' || alias, range_start, range_end, last_height, last_hash, status FROM %[1]s.blockhaul_backfills ORDER BY 1`, qs))
	if err != nil {
		return fmt.Errorf("archive: verify streams: %w", err)
	}
	for rows.Next() {
		var s row
		if err := rows.Scan(&s.name, &s.from, &s.end, &s.height, &s.hash, &s.status); err != nil {
			rows.Close()
			return fmt.Errorf("archive: verify streams: %w", err)
		}
		streams = append(streams, s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("archive: verify streams: %w", err)
	}
	for _, s := range streams {
		sc := StreamCheck{Stream: s.name, From: uint64(s.from), Height: s.height, Status: s.status}
		if s.height != nil {
			var hash []byte
			err := tx.QueryRow(ctx, fmt.Sprintf("SELECT hash FROM %s WHERE %s = $1 LIMIT 1", qt, hc), *s.height).Scan(&hash)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				sc.Problem = append(sc.Problem, fmt.Sprintf("checkpoint %d is ahead of its rows: no block at that height", *s.height))
			case err != nil:
				return fmt.Errorf("archive: verify stream %s: %w", s.name, err)
			case s.hash != nil && !bytes.Equal(hash, s.hash):
				sc.Problem = append(sc.Problem, fmt.Sprintf("checkpoint %d names hash %X, the block there is %X", *s.height, s.hash, hash))
			}
			if *s.height >= s.from {
				var n int64
				if err := tx.QueryRow(ctx, fmt.Sprintf("SELECT count(DISTINCT %[2]s) FROM %[1]s WHERE %[2]s BETWEEN $1 AND $2", qt, hc), s.from, *s.height).Scan(&n); err != nil {
					return fmt.Errorf("archive: verify stream %s: %w", s.name, err)
				}
				if want := *s.height - s.from + 1; n != want {
					sc.Problem = append(sc.Problem, fmt.Sprintf("%d of the %d heights %d-%d below its checkpoint are missing", want-n, want, s.from, *s.height))
				}
			}
		}
		if s.end != nil {
			done := s.height != nil && *s.height >= *s.end
			if done != (s.status == "complete") {
				sc.Problem = append(sc.Problem, fmt.Sprintf("status %s with checkpoint %v and range end %d", s.status, ptrString(s.height), *s.end))
			}
		}
		r.Streams = append(r.Streams, sc)
	}
	return nil
}

func ptrString(p *int64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

// walkBlocks reads (height, hash, parent_hash) of every block in height
// order, once, and checks duplicates, gaps, the chain and staging. It
// returns the exported heights as runs.
func (r *PGReport) walkBlocks(ctx context.Context, tx pgx.Tx, store *staging.Store, qt, hc string, cfg VerifyConfig) ([]Gap, error) {
	where, args := "", []any{}
	switch {
	case cfg.FromSet && cfg.ToSet:
		where, args = fmt.Sprintf(" WHERE %s BETWEEN $1 AND $2", hc), []any{int64(cfg.From), int64(cfg.To)}
	case cfg.FromSet:
		where, args = fmt.Sprintf(" WHERE %s >= $1", hc), []any{int64(cfg.From)}
	case cfg.ToSet:
		where, args = fmt.Sprintf(" WHERE %s <= $1", hc), []any{int64(cfg.To)}
	}
	rows, err := tx.Query(ctx, fmt.Sprintf("SELECT %s, hash, parent_hash FROM %s%s ORDER BY 1", hc, qt, where), args...)
	if err != nil {
		return nil, fmt.Errorf("archive: verify blocks: %w", err)
	}
	var exported []Gap
	defer rows.Close()
	var prevH int64
	var prevHash []byte
	first := true
	for rows.Next() {
		var h int64
		var hash, parent []byte
		if err := rows.Scan(&h, &hash, &parent); err != nil {
			return nil, fmt.Errorf("archive: verify blocks: %w", err)
		}
		r.Blocks++
		switch n := len(exported); {
		case n > 0 && exported[n-1].To == uint64(h):
		case n > 0 && exported[n-1].To+1 == uint64(h):
			exported[n-1].To = uint64(h)
		default:
			exported = append(exported, Gap{From: uint64(h), To: uint64(h)})
		}
		switch {
		case first:
		case h == prevH:
			r.DuplicateCount++
			if len(r.Duplicates) < cfg.MaxListed && (len(r.Duplicates) == 0 || r.Duplicates[len(r.Duplicates)-1] != uint64(h)) {
				r.Duplicates = append(r.Duplicates, uint64(h))
			}
		case h > prevH+1:
			if len(r.Gaps) < cfg.MaxListed {
				r.Gaps = append(r.Gaps, Gap{From: uint64(prevH + 1), To: uint64(h - 1)})
			}
		case !bytes.Equal(parent, prevHash):
			r.BreakCount++
			if len(r.Breaks) < cfg.MaxListed {
				r.Breaks = append(r.Breaks, Break{Height: uint64(h), ParentHash: parent, BelowHash: bytes.Clone(prevHash), Where: "postgresql"})
			}
		}
		first, prevH, prevHash = false, h, hash
		if store != nil {
			staged, _, err := store.Header(uint64(h))
			switch {
			case errors.Is(err, staging.ErrNotFound):
				// Not staged (pruned, or staged elsewhere): the rows of its
				// chunk are not compared, and the report says so.
			case err != nil:
				if r.headerUnreadable == nil {
					r.headerUnreadable = map[uint64]bool{}
				}
				r.headerUnreadable[uint64(h)] = true
				r.UnreadableCount++
				if len(r.Unreadable) < cfg.MaxListed {
					r.Unreadable = append(r.Unreadable, Problem{Height: uint64(h), Reason: "exported, but its staged header cannot be read: " + err.Error()})
				}
			case !bytes.Equal(staged, hash):
				r.DiffersCount++
				if len(r.Differs) < cfg.MaxListed {
					r.Differs = append(r.Differs, Problem{Height: uint64(h), Reason: fmt.Sprintf("PostgreSQL holds block %X, staging %X", hash, staged)})
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("archive: verify blocks: %w", err)
	}
	return exported, nil
}
