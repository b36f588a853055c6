package archive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// TableCheck is one table's rows in PostgreSQL compared with the rows the
// staged blocks decode to, chunk by chunk, by the digest checksum computes
// (the server digests its rows, blockhaul the decoded ones).
type TableCheck struct {
	Table    string `json:"table"`
	Compared bool   `json:"compared"`
	// NotCompared says why the table was not compared, when it was not.
	NotCompared  string          `json:"not_compared,omitempty"`
	Chunks       int             `json:"chunks"` // chunks compared
	Rows         int64           `json:"rows"`   // PostgreSQL's rows in them
	Differs      []RowDifference `json:"differs"`
	DiffersCount int             `json:"differs_count"`

	inHeights bool // not compared for its heights alone (not staged, unreadable): see Uncompared
}

// RowDifference is one chunk of heights where a table's rows differ from
// what staging decodes to.
type RowDifference struct {
	From       uint64 `json:"from"`
	To         uint64 `json:"to"`
	PGRows     int64  `json:"pg_rows"`
	StagedRows int64  `json:"staged_rows"`
	Problem    string `json:"problem"`
	// Heights are the chunk's heights whose rows differ (the first
	// DefaultLocateChunks differing chunks of the report are searched;
	// nil for the rest); HeightCount counts them, the list stops at 100.
	Heights     []RowHeight `json:"heights,omitempty"`
	HeightCount int         `json:"height_count,omitempty"`
}

// RowHeight is one height whose rows differ: how many each side holds.
type RowHeight struct {
	Height     uint64 `json:"height"`
	PGRows     int64  `json:"pg_rows"`
	StagedRows int64  `json:"staged_rows"`
}

// Uncompared is a chunk of heights whose rows were not compared, and why
// (exported heights there are not staged, or cannot be read or decoded).
type Uncompared struct {
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Reason string `json:"reason"`
}

// chunkAcc is one table's digest of one chunk (or one height).
type chunkAcc struct {
	rows int64
	sum  sum128
}

// chunkJob is one chunk's exported heights, as runs.
type chunkJob struct {
	k    uint64
	runs []Gap
}

// chunkResult is what the staged blocks of one chunk digest to, per table;
// bad says why the chunk could not be digested (a height not staged,
// unreadable or undecodable), with the heights to name as problems.
type chunkResult struct {
	k         uint64
	tables    []chunkAcc
	perHeight map[uint64][]chunkAcc // when asked
	bad       string
	problems  []Problem
}

// compareRows digests every table of dec in PostgreSQL (within tx) and the
// staged blocks of the exported heights (exported, in height order) at
// once, and reports, per table, the chunks that differ and, within the
// first of them, the heights.
func (r *PGReport) compareRows(ctx context.Context, tx pgx.Tx, store *staging.Store, dec Decoder, schema string, exported []Gap, cfg VerifyConfig) error {
	tables := dec.Tables()
	chunk := cfg.Chunk
	if chunk == 0 {
		chunk = DefaultChunk
	}
	r.Chunk = chunk
	oids, err := export.ColumnOIDs(ctx, tx.Conn(), tables)
	if err != nil {
		return fmt.Errorf("archive: verify rows: %w", err)
	}
	order, orderErr := serverWordOrder(ctx, tx)
	if orderErr != nil && !errors.Is(orderErr, errUnknownWordOrder) {
		return fmt.Errorf("archive: verify rows: %w", orderErr)
	}
	r.Tables = make([]TableCheck, len(tables))
	ok := make([]bool, len(tables)) // the table can be digested on both sides
	for i, t := range tables {
		r.Tables[i] = TableCheck{Table: t.Name, Differs: []RowDifference{}}
		if orderErr != nil {
			r.Tables[i].NotCompared = orderErr.Error()
			continue
		}
		if _, err := newRowDigester(t, oids, order); err != nil {
			r.Tables[i].NotCompared = err.Error()
			continue
		}
		ok[i] = true
	}
	from, to := uint64(0), uint64(math.MaxInt64)
	if len(exported) > 0 {
		from, to = exported[0].From, exported[len(exported)-1].To
	}
	if cfg.FromSet {
		from = cfg.From
	}
	if cfg.ToSet {
		to = min(cfg.To, math.MaxInt64)
	}
	if to < from {
		return fmt.Errorf("archive: verify: range end %d is below its start %d", to, from)
	}
	jobs := chunkJobs(exported, chunk)

	// PostgreSQL digests its tables while blockhaul decodes and digests
	// the staged blocks: the two take about as long.
	server := make([]*TableDigest, len(tables))
	results := make([]chunkResult, len(jobs))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := checksumSettings(gctx, tx); err != nil {
			return err
		}
		ccfg := ChecksumConfig{Schema: schema, Tables: tables, From: from, To: to, Bounded: true, Chunk: chunk}
		for i, t := range tables {
			if !ok[i] {
				continue
			}
			td, err := checksumTable(gctx, tx, chain.QuoteIdent(schema), t, ccfg)
			var missing *MissingTableError
			switch {
			case errors.As(err, &missing):
				r.Tables[i].NotCompared = "not in the schema (a job left it out with --tables?)"
				continue
			case err != nil:
				return fmt.Errorf("archive: verify rows: %w", err)
			}
			server[i] = &td
		}
		return nil
	})
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	next := make(chan int)
	g.Go(func() error {
		defer close(next)
		for i := range jobs {
			select {
			case next <- i:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range workers {
		g.Go(func() error {
			d, err := newStagedDigester(tables, oids, order, ok, dec)
			if err != nil {
				return err
			}
			for i := range next {
				if results[i], err = d.chunk(store, jobs[i], false); err != nil {
					return err
				}
			}
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}

	bad := map[uint64]bool{}
	for _, res := range results {
		if res.bad == "" {
			continue
		}
		bad[res.k] = true
		r.Uncompared = append(r.Uncompared, Uncompared{From: max(res.k*chunk, from), To: min(res.k*chunk+chunk-1, to), Reason: res.bad})
		for _, p := range res.problems {
			if r.headerUnreadable[p.Height] {
				continue // its header was named already
			}
			r.UnreadableCount++
			if len(r.Unreadable) < cfg.MaxListed {
				r.Unreadable = append(r.Unreadable, p)
			}
		}
	}
	staged := map[uint64]*chunkResult{}
	for i := range results {
		staged[results[i].k] = &results[i]
	}
	type located struct {
		table int
		diff  int
	}
	var locate []located
	for i := range tables {
		tc := &r.Tables[i]
		if server[i] == nil {
			continue
		}
		tc.Compared = true
		pg := map[uint64]ChunkDigest{}
		keys := map[uint64]bool{}
		for _, c := range server[i].Chunks {
			pg[c.From/chunk] = c
			keys[c.From/chunk] = true
		}
		for k := range staged {
			keys[k] = true
		}
		sorted := make([]uint64, 0, len(keys))
		for k := range keys {
			if !bad[k] {
				sorted = append(sorted, k)
			}
		}
		if len(sorted) == 0 && len(r.Uncompared) > 0 {
			tc.Compared = false
			tc.NotCompared = "no chunk of its heights could be compared (below)"
			tc.inHeights = true
			continue
		}
		sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
		for _, k := range sorted {
			p, s := pg[k], chunkAcc{}
			if res := staged[k]; res != nil {
				s = res.tables[i]
			}
			tc.Chunks++
			tc.Rows += p.Rows
			if p.Rows == s.rows && (p.Rows == 0 || p.Sum == s.sum.String()) {
				continue
			}
			d := RowDifference{From: max(k*chunk, from), To: min(k*chunk+chunk-1, to), PGRows: p.Rows, StagedRows: s.rows}
			if p.Rows == s.rows {
				d.Problem = fmt.Sprintf("same %d rows, content differs", p.Rows)
			} else {
				d.Problem = fmt.Sprintf("%d rows in PostgreSQL, %d decoded from staging", p.Rows, s.rows)
			}
			tc.DiffersCount++
			if len(tc.Differs) < cfg.MaxListed {
				tc.Differs = append(tc.Differs, d)
				if len(locate) < DefaultLocateChunks {
					locate = append(locate, located{i, len(tc.Differs) - 1})
				}
			}
		}
	}
	// Name the heights inside the first differing chunks: both sides
	// digested again per height (PostgreSQL over the height index).
	perHeight := map[uint64]chunkResult{}
	var d *stagedDigester
	for _, l := range locate {
		diff := &r.Tables[l.table].Differs[l.diff]
		k := diff.From / chunk
		res, ok := perHeight[k]
		if !ok {
			if d == nil {
				if d, err = newStagedDigester(tables, oids, order, nil, dec); err != nil {
					return err
				}
			}
			job := chunkJob{k: k}
			for _, j := range jobs {
				if j.k == k {
					job = j
				}
			}
			if res, err = d.chunk(store, job, true); err != nil {
				return err
			}
			perHeight[k] = res
		}
		pg, err := heightDigestsIn(ctx, tx, schema, tables[l.table], diff.From, diff.To)
		if err != nil {
			return fmt.Errorf("archive: verify rows: %w", err)
		}
		diff.Heights, diff.HeightCount = differingHeights(diff.From, diff.To, func(h uint64) (RowHeight, bool) {
			p := pg[h]
			var s chunkAcc
			if hs := res.perHeight[h]; hs != nil {
				s = hs[l.table]
			}
			return RowHeight{Height: h, PGRows: p.rows, StagedRows: s.rows}, p.rows != s.rows || (p.rows != 0 && p.sum != s.sum.String())
		})
	}
	return nil
}

// chunkJobs cuts the exported runs at chunk boundaries.
func chunkJobs(exported []Gap, chunk uint64) []chunkJob {
	var jobs []chunkJob
	for _, run := range exported {
		for a := run.From; ; {
			k := a / chunk
			b := min(run.To, k*chunk+chunk-1)
			if len(jobs) == 0 || jobs[len(jobs)-1].k != k {
				jobs = append(jobs, chunkJob{k: k})
			}
			j := &jobs[len(jobs)-1]
			j.runs = append(j.runs, Gap{From: a, To: b})
			if b == run.To {
				break
			}
			a = b + 1
		}
	}
	return jobs
}

// stagedDigester decodes staged blocks and digests their rows, table by
// table, as PostgreSQL digests the exported ones. One per goroutine.
type stagedDigester struct {
	dec  Decoder
	rows *chain.Rows
	encs []*export.RowEncoder
	digs []*rowDigester // nil: the table is not digested
	buf  []byte
}

func newStagedDigester(tables []chain.Table, oids map[string]uint32, order wordOrder, use []bool, dec Decoder) (*stagedDigester, error) {
	d := &stagedDigester{dec: dec, rows: chain.NewRows(tables), encs: make([]*export.RowEncoder, len(tables)), digs: make([]*rowDigester, len(tables))}
	for i, t := range tables {
		if use != nil && !use[i] {
			continue
		}
		dig, err := newRowDigester(t, oids, order)
		if err != nil {
			continue // reported as not compared
		}
		enc, err := export.NewRowEncoder(oids, t)
		if err != nil {
			return nil, fmt.Errorf("archive: verify rows: %w", err)
		}
		d.encs[i], d.digs[i] = enc, dig
	}
	return d, nil
}

// chunk digests the staged blocks of job's heights; with perHeight also
// each height's digest.
func (d *stagedDigester) chunk(store *staging.Store, job chunkJob, perHeight bool) (chunkResult, error) {
	res := chunkResult{k: job.k, tables: make([]chunkAcc, len(d.digs))}
	if perHeight {
		res.perHeight = map[uint64][]chunkAcc{}
	}
	for _, run := range job.runs {
		next := run.From
		var failed error
		err := store.CheckRecords(run.From, run.To, true, func(st staging.RecordState) error {
			if st.Height != next {
				res.notStaged(next, st.Height-1)
			}
			next = st.Height + 1
			if st.Err != nil || !st.HasRecord {
				reason := "no record, only an index entry"
				if st.Err != nil {
					reason = st.Err.Error()
				}
				res.problems = append(res.problems, Problem{Height: st.Height, Reason: "exported, but its staged record cannot be read: " + reason})
				if res.bad == "" {
					res.bad = fmt.Sprintf("the staged record of exported height %d cannot be read", st.Height)
				}
				return nil
			}
			d.rows.Reset()
			if err := d.dec.Decode(st.Height, st.Raw, d.rows); err != nil {
				res.problems = append(res.problems, Problem{Height: st.Height, Reason: "exported, but its staged record does not decode: " + err.Error()})
				if res.bad == "" {
					res.bad = fmt.Sprintf("the staged record of exported height %d does not decode", st.Height)
				}
				return nil
			}
			var at []chunkAcc
			if perHeight {
				at = make([]chunkAcc, len(d.digs))
				res.perHeight[st.Height] = at
			}
			for i, dig := range d.digs {
				if dig == nil {
					continue
				}
				for _, row := range d.rows.Table(i) {
					var err error
					if d.buf, err = d.encs[i].AppendRow(d.buf[:0], row); err != nil {
						failed = fmt.Errorf("height %d: %w", st.Height, err)
						return failed
					}
					h, err := dig.hash(d.buf)
					if err != nil {
						failed = fmt.Errorf("height %d: %w", st.Height, err)
						return failed
					}
					res.tables[i].rows++
					res.tables[i].sum.add(h)
					if at != nil {
						at[i].rows++
						at[i].sum.add(h)
					}
				}
			}
			return nil
		})
		if failed != nil {
			return res, fmt.Errorf("archive: verify rows: %w", failed)
		}
		if err != nil {
			// The store cannot be read to the end of the run: what is left
			// of the chunk is not compared.
			if res.bad == "" {
				res.bad = "staging cannot be read here: " + err.Error()
			}
			return res, nil
		}
		if next <= run.To {
			res.notStaged(next, run.To)
		}
	}
	return res, nil
}

// notStaged marks the chunk uncompared: exported heights from..to are not
// staged (pruned, or staged in another directory).
func (res *chunkResult) notStaged(from, to uint64) {
	if res.bad == "" {
		res.bad = fmt.Sprintf("exported heights %d-%d are not staged", from, to)
	}
}

// heightDigestsIn is the per-height digest of one table over [from, to],
// within tx.
func heightDigestsIn(ctx context.Context, tx pgx.Tx, schema string, t chain.Table, from, to uint64) (map[uint64]heightDigest, error) {
	hc := chain.QuoteIdent(t.HeightColumn)
	q := fmt.Sprintf("SELECT %s, count(*), sum(%s)::text FROM %s.%s AS t WHERE %s BETWEEN $1 AND $2 GROUP BY 1",
		hc, rowHash(t), chain.QuoteIdent(schema), chain.QuoteIdent(t.Name), hc)
	rows, err := tx.Query(ctx, q, int64(from), int64(to))
	if err != nil {
		return nil, fmt.Errorf("%s heights %d-%d: %w", t.Name, from, to, err)
	}
	defer rows.Close()
	out := map[uint64]heightDigest{}
	for rows.Next() {
		var h, n int64
		var sum string
		if err := rows.Scan(&h, &n, &sum); err != nil {
			return nil, fmt.Errorf("%s heights %d-%d: %w", t.Name, from, to, err)
		}
		out[uint64(h)] = heightDigest{rows: n, sum: sum}
	}
	return out, rows.Err()
}
