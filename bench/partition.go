package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// PartitionConfig configures RunPartition: the measurement behind the
// decision on range partitions of the chain's tables by height (issue 13,
// `--partition-blocks K`). Zero fields take the defaults in their comments.
type PartitionConfig struct {
	// DatabaseURL is the PostgreSQL server; every load gets a database of
	// its own. Required.
	DatabaseURL string
	// Chain is the workload's family. Default CometBFT.
	Chain chain.Family
	// Blocks is the staged range [1, Blocks]. Default 10,000 CometBFT or
	// 2,000 EVM blocks.
	Blocks uint64
	// PartitionBlocks is K, the heights of one partition; the partitions
	// are aligned to the range's start. Default Blocks/10.
	PartitionBlocks uint64
	// Streams are the export stream counts, each loaded into the plain and
	// the partitioned tables. Default 1, 2.
	Streams []int
	// Rounds of every load, the order rotating; the best of each counts.
	// Default 2.
	Rounds int
	// BatchBlocks is the export batch. Default 500.
	BatchBlocks int
	// IndexWorkers is export.BuildOptions.Workers for the deferred index
	// build after each one-stream load. Default 1: the build time is then
	// the sum of every index's, whatever order they are taken in.
	IndexWorkers int
	// ParallelIndexWorkers is the connections of the second index build
	// (PartitionAfter.ParallelIndexSeconds). Default: the machine's CPUs.
	ParallelIndexWorkers int
	// BigMaintenanceMem is the maintenance_work_mem of the third index
	// build. Default 640MB (the server's default is 64MB).
	BigMaintenanceMem string
	// Lookups is the number of queries of each kind timed. Default 300.
	Lookups int
	// ManyPartitions is the partition count of the by-hash lookup's last
	// measurement, the partitions past the range empty: a long chain's
	// count. Default 200.
	ManyPartitions int
	// Seed of the synthetic chain. Default 1.
	Seed int64
	// WorkDir holds the staging store. Default: the temporary directory.
	WorkDir string
	// Logger receives progress. Default: discard.
	Logger *slog.Logger
}

func (c *PartitionConfig) ensureDefaults() {
	if c.Chain == chain.FamilyUnknown {
		c.Chain = chain.FamilyCometBFT
	}
	if c.Blocks == 0 {
		c.Blocks = 10_000
		if c.Chain == chain.FamilyEVM {
			c.Blocks = 2_000
		}
	}
	if c.PartitionBlocks == 0 {
		c.PartitionBlocks = max(1, c.Blocks/10)
	}
	if len(c.Streams) == 0 {
		c.Streams = []int{1, 2}
	}
	if !slices.Contains(c.Streams, 1) {
		c.Streams = append([]int{1}, c.Streams...)
	}
	if c.Rounds == 0 {
		c.Rounds = 2
	}
	if c.BatchBlocks == 0 {
		c.BatchBlocks = 500
	}
	if c.IndexWorkers == 0 {
		c.IndexWorkers = 1
	}
	if c.ParallelIndexWorkers == 0 {
		c.ParallelIndexWorkers = runtime.NumCPU()
	}
	if c.BigMaintenanceMem == "" {
		c.BigMaintenanceMem = "640MB"
	}
	if c.Lookups == 0 {
		c.Lookups = 300
	}
	if c.ManyPartitions == 0 {
		c.ManyPartitions = 200
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// PartitionResult is what RunPartition measured. Every duration is the
// best of the rounds.
type PartitionResult struct {
	Chain           string
	Blocks          uint64
	PartitionBlocks uint64
	Partitions      int
	Rows            uint64
	Rounds          int
	Loads           []PartitionLoad // plain and partitioned, per stream count
	Plain, Parted   PartitionAfter  // the one-stream loads' index build, queries and re-export
	// ManyLookupMicros is the by-hash lookup with ManyPartitions
	// partitions, those past the range empty.
	ParallelIndexWorkers int
	BigMaintenanceMem    string
	ManyPartitions       int
	ManyLookupMicros     float64
	ManyRangeMicros      float64
	// CPUOther is the share of the machine's CPU that other processes took
	// over the whole run.
	CPUOther float64
}

// PartitionLoad is one layout and stream count's export.
type PartitionLoad struct {
	Partitioned bool
	Streams     int
	Seconds     float64 // export.RunStreams, schema creation excluded
	RowsPerSec  float64
	AllSeconds  []float64 // every round's, in round order
}

// PartitionAfter is what follows a one-stream load, per layout.
type PartitionAfter struct {
	IndexSeconds float64 // export.BuildIndexes of every deferred index
	// IndexAll is every round's IndexSeconds; Index each index's build
	// time in seconds, of the round with the fastest build.
	IndexAll []float64
	Index    map[string]float64
	// ParallelIndexSeconds is the same indexes built again with
	// PartitionConfig.ParallelIndexWorkers connections: on plain tables by
	// export.BuildIndexes (different indexes at once), on partitioned ones
	// partition by partition (each partition's index a job of its own,
	// attached to the parent's), which also splits one index's build.
	ParallelIndexSeconds float64
	// BigMemIndexSeconds is the one-at-a-time build again with
	// maintenance_work_mem at PartitionConfig.BigMaintenanceMem.
	BigMemIndexSeconds float64
	// Range is `count(*)` of one partition's worth of transactions heights
	// (a tenth of K), HashLookup a transaction by its hash, in µs each;
	// RangeScans and HashScans are the partitions the plan touches.
	RangeMicros, HashMicros float64
	RangeScans, HashScans   int
	// The re-export of one partition's heights: removing the rows (plain:
	// inside export.Replay's chunks, counted in Reload; partitioned:
	// DETACH, DROP and CREATE of that partition of every table) and
	// writing them again (plain: export.Replay; partitioned: export.Run of
	// a backfill of those heights), with the indexes in place.
	RemoveSeconds, ReloadSeconds float64
	// VacuumSeconds is the VACUUM of the tables after the re-export (the
	// dead rows a DELETE leaves; a dropped partition leaves none), and
	// DeadRows what it found to remove.
	VacuumSeconds float64
	DeadRows      int64
}

// RunPartition stages one range and loads it into plain tables and into
// tables partitioned by height range (PARTITION BY RANGE on the height
// column, K heights each, every partition created before the COPY), with
// each stream count, the layouts and counts taking turns round by round,
// each load into a fresh database with its secondary indexes deferred as a
// fresh `blockhaul export` does. After each one-stream load it builds the
// deferred indexes, times two queries (a height range; a by-hash lookup,
// which on partitioned tables has no global index and probes every
// partition's) and re-exports the heights of one partition: by
// export.Replay (DELETE and COPY per chunk) on the plain tables, by
// dropping and recreating that partition and exporting its heights on the
// partitioned ones. Rows are checked equal across every load.
func RunPartition(ctx context.Context, cfg PartitionConfig) (res PartitionResult, err error) {
	cfg.ensureDefaults()
	if cfg.DatabaseURL == "" {
		return res, errors.New("bench: partition: no database URL")
	}
	bc := Config{DatabaseURL: cfg.DatabaseURL, Seed: cfg.Seed, WorkDir: cfg.WorkDir, Logger: cfg.Logger,
		CometBFTBlocks: cfg.Blocks, EVMBlocks: cfg.Blocks, StreamsChain: cfg.Chain, StreamsBlocks: cfg.Blocks}
	bc.EnsureDefaults()
	d := streamsDensity(&bc)
	res = PartitionResult{Chain: d.name, Blocks: d.blocks, PartitionBlocks: cfg.PartitionBlocks, Rounds: cfg.Rounds,
		Partitions: len(partitionBounds(1, d.blocks, cfg.PartitionBlocks)), ManyPartitions: cfg.ManyPartitions, ParallelIndexWorkers: cfg.ParallelIndexWorkers, BigMaintenanceMem: cfg.BigMaintenanceMem}
	store, closeStore, err := openScratchStore(&bc, "partition-"+d.name)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, closeStore()) }()
	cfg.Logger.Info("partition: ingest", "chain", d.name, "blocks", d.blocks)
	if _, err := ingest(ctx, &bc, d, store); err != nil {
		return res, err
	}
	cpu0 := takeCPUSnapshot()

	for _, n := range cfg.Streams {
		res.Loads = append(res.Loads, PartitionLoad{Streams: n}, PartitionLoad{Streams: n, Partitioned: true})
	}
	var rows uint64
	for round := range cfg.Rounds {
		for k := range res.Loads {
			l := &res.Loads[(k+round)%len(res.Loads)]
			cfg.Logger.Info("partition: load", "chain", d.name, "partitioned", l.Partitioned, "streams", l.Streams, "round", round+1)
			after := &res.Plain
			if l.Partitioned {
				after = &res.Parted
			}
			sec, n, err := partitionLoad(ctx, &cfg, d, store, l.Partitioned, l.Streams, after, &res)
			if err != nil {
				return res, err
			}
			if rows != 0 && n != rows {
				return res, fmt.Errorf("bench: partition: the loads exported %d and %d rows: not comparable", rows, n)
			}
			rows = n
			l.AllSeconds = append(l.AllSeconds, round3(sec))
			if l.Seconds == 0 || sec < l.Seconds {
				l.Seconds, l.RowsPerSec = sec, perSec(n, sec)
			}
			cfg.Logger.Info("partition: load done", "partitioned", l.Partitioned, "streams", l.Streams, "seconds", round2(sec))
		}
	}
	res.Rows = rows
	res.CPUOther = cpuUsage(cpu0, takeCPUSnapshot(), runtime.NumCPU()).OtherShare()
	return res, nil
}

// partitionBounds splits [from, to] into ranges of k heights from from.
func partitionBounds(from, to, k uint64) [][2]uint64 {
	var out [][2]uint64
	for lo := from; lo <= to; lo += k {
		hi := lo + k - 1
		if hi < lo || hi > to { // past the range, or past uint64
			hi = to
		}
		out = append(out, [2]uint64{lo, hi})
		if hi == to {
			break
		}
	}
	return out
}

// partitionName is the name of table's partition of the heights from lo.
func partitionName(table string, lo uint64) string {
	return fmt.Sprintf("%s_p%012d", table, lo)
}

// createPartitioned creates tables in schema partitioned by range of their
// height column, and a partition for each of bounds.
func createPartitioned(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table, bounds [][2]uint64) error {
	qs := chain.QuoteIdent(schema)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+qs); err != nil {
			return err
		}
		for _, t := range tables {
			ddl := t.CreateSQL(qs) + " PARTITION BY RANGE (" + chain.QuoteIdent(t.HeightColumn) + ")"
			if _, err := tx.Exec(ctx, ddl); err != nil {
				return fmt.Errorf("bench: create %s: %w", t.Name, err)
			}
			for _, b := range bounds {
				if err := createPartition(ctx, tx, qs, t.Name, b); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func createPartition(ctx context.Context, tx pgx.Tx, qs, table string, b [2]uint64) error {
	_, err := tx.Exec(ctx, fmt.Sprintf("CREATE TABLE %s.%s PARTITION OF %s.%s FOR VALUES FROM (%d) TO (%d)",
		qs, chain.QuoteIdent(partitionName(table, b[0])), qs, chain.QuoteIdent(table), b[0], b[1]+1))
	if err != nil {
		return fmt.Errorf("bench: create partition %s of %s: %w", partitionName(table, b[0]), table, err)
	}
	return nil
}

// partitionLoad is one load into a fresh database; with one stream, the
// index build, queries and re-export after it, each kept in after when it
// is the fastest yet.
func partitionLoad(ctx context.Context, cfg *PartitionConfig, d density, store *staging.Store, parted bool, n int, after *PartitionAfter, res *PartitionResult) (sec float64, rows uint64, err error) {
	purpose := fmt.Sprintf("part_plain%d", n)
	if parted {
		purpose = fmt.Sprintf("part_parted%d", n)
	}
	db, err := createDatabase(ctx, cfg.DatabaseURL, purpose)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, db.drop(ctx)) }()
	dial := func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, db.url) }
	sessions := make([]*export.Session, n)
	for i := range n {
		conn, err := dial(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: connect to %s: %w", db.name, err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		sessions[i] = export.Fixed(conn)
	}
	conn := sessions[0].Conn()
	schema, tables := d.name, d.dec.Tables()
	bounds := partitionBounds(1, d.blocks, cfg.PartitionBlocks)
	if parted {
		if err := createPartitioned(ctx, conn, schema, tables, bounds); err != nil {
			return 0, 0, err
		}
	}
	if err := export.EnsureSchema(ctx, conn, schema, tables, true, nil); err != nil {
		return 0, 0, err
	}
	if err := export.DeferIndexes(ctx, conn, schema, tables, cfg.Logger); err != nil {
		return 0, 0, err
	}
	settle()
	t0 := time.Now()
	r, err := export.RunStreams(ctx, sessions, store, d.dec, export.Config{
		Schema: schema, Stream: export.Stream{Alias: "bench", From: 1, To: d.blocks},
		BatchBlocks: cfg.BatchBlocks, SkipIndexes: true,
	})
	sec = time.Since(t0).Seconds()
	if err != nil {
		return 0, 0, fmt.Errorf("bench: partition: export: %w", err)
	}
	if !r.Complete || r.Blocks != d.blocks {
		return 0, 0, fmt.Errorf("bench: partition: exported %d blocks of %d", r.Blocks, d.blocks)
	}
	for _, v := range r.Rows {
		rows += v
	}
	if n != 1 {
		return sec, rows, nil
	}

	builds := &buildTimes{times: map[string]float64{}}
	t0 = time.Now()
	if _, err := export.BuildIndexes(ctx, conn, schema, export.BuildOptions{Workers: cfg.IndexWorkers, Dial: dial, Logger: slog.New(builds)}); err != nil {
		return 0, 0, err
	}
	ix := time.Since(t0).Seconds()
	after.IndexAll = append(after.IndexAll, round3(ix))
	if after.IndexSeconds == 0 || ix < after.IndexSeconds {
		after.IndexSeconds, after.Index = ix, builds.times
	}
	// Again one at a time with maintenance_work_mem raised to
	// cfg.BigMaintenanceMem: whether a partition's build is faster for
	// being smaller or for fitting the memory it has.
	if err := export.DeferIndexes(ctx, conn, schema, tables, cfg.Logger); err != nil {
		return 0, 0, err
	}
	if _, err := conn.Exec(ctx, "SELECT set_config('maintenance_work_mem', $1, false)", cfg.BigMaintenanceMem); err != nil {
		return 0, 0, fmt.Errorf("bench: set maintenance_work_mem: %w", err)
	}
	t0 = time.Now()
	_, err = export.BuildIndexes(ctx, conn, schema, export.BuildOptions{Workers: 1})
	if _, rerr := conn.Exec(ctx, "RESET maintenance_work_mem"); err == nil && rerr != nil {
		err = fmt.Errorf("bench: reset maintenance_work_mem: %w", rerr)
	}
	if err != nil {
		return 0, 0, err
	}
	keepMin(&after.BigMemIndexSeconds, time.Since(t0).Seconds())
	// Again with cfg.ParallelIndexWorkers connections: BuildIndexes on
	// plain tables (different indexes at once), one job per partition's
	// index on partitioned ones.
	if err := export.DeferIndexes(ctx, conn, schema, tables, cfg.Logger); err != nil {
		return 0, 0, err
	}
	t0 = time.Now()
	if parted {
		err = buildPerPartition(ctx, conn, dial, schema, tables, bounds, cfg.ParallelIndexWorkers)
	} else {
		_, err = export.BuildIndexes(ctx, conn, schema, export.BuildOptions{Workers: cfg.ParallelIndexWorkers, Dial: dial})
	}
	if err != nil {
		return 0, 0, err
	}
	keepMin(&after.ParallelIndexSeconds, time.Since(t0).Seconds())
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		return 0, 0, fmt.Errorf("bench: analyze: %w", err)
	}
	txs := tables[slices.IndexFunc(tables, func(t chain.Table) bool { return t.Name == "transactions" })]
	if err := timeQueries(ctx, conn, cfg, schema, txs, d.blocks, after); err != nil {
		return 0, 0, err
	}
	mid := bounds[len(bounds)/2]
	if err := reexport(ctx, cfg, sessions[0], store, d, parted, mid, after); err != nil {
		return 0, 0, err
	}
	if parted && cfg.ManyPartitions > len(bounds) {
		// A long chain's partition count, the partitions past the range
		// empty: what a by-hash lookup costs as the chain grows.
		extra := partitionBounds(d.blocks+1, d.blocks+uint64(cfg.ManyPartitions-len(bounds))*cfg.PartitionBlocks, cfg.PartitionBlocks)
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, b := range extra {
				if err := createPartition(ctx, tx, chain.QuoteIdent(schema), txs.Name, b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
		if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
			return 0, 0, fmt.Errorf("bench: analyze: %w", err)
		}
		var many PartitionAfter
		if err := timeQueries(ctx, conn, cfg, schema, txs, d.blocks, &many); err != nil {
			return 0, 0, err
		}
		keepMin(&res.ManyLookupMicros, many.HashMicros)
		keepMin(&res.ManyRangeMicros, many.RangeMicros)
	}
	return sec, rows, nil
}

// buildPerPartition builds tables' secondary indexes the way a partitioned
// schema allows and a plain one does not: each index created ON ONLY the
// parent (invalid until every partition's is attached), then each
// partition's index built as a job of its own on one of workers
// connections, largest partitions first, and attached. It forgets the
// deferred records DeferIndexes left.
func buildPerPartition(ctx context.Context, conn *pgx.Conn, dial func(context.Context) (*pgx.Conn, error), schema string, tables []chain.Table, bounds [][2]uint64, workers int) error {
	qs := chain.QuoteIdent(schema)
	type job struct {
		sql  [2]string // build, attach
		size int64
	}
	var jobs []job
	for _, t := range tables {
		for _, ix := range t.Indexes {
			if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE INDEX %s ON ONLY %s.%s %s", chain.QuoteIdent(ix.Name), qs, chain.QuoteIdent(t.Name), ix.Columns)); err != nil {
				return fmt.Errorf("bench: create index %s on only %s: %w", ix.Name, t.Name, err)
			}
			for _, b := range bounds {
				part := partitionName(t.Name, b[0])
				pix := chain.QuoteIdent(fmt.Sprintf("%s_p%012d", ix.Name, b[0]))
				var size int64
				if err := conn.QueryRow(ctx, "SELECT pg_relation_size($1::regclass)", qs+"."+chain.QuoteIdent(part)).Scan(&size); err != nil {
					return fmt.Errorf("bench: size of %s: %w", part, err)
				}
				jobs = append(jobs, job{size: size, sql: [2]string{
					fmt.Sprintf("CREATE INDEX %s ON %s.%s %s", pix, qs, chain.QuoteIdent(part), ix.Columns),
					fmt.Sprintf("ALTER INDEX %s.%s ATTACH PARTITION %s.%s", qs, chain.QuoteIdent(ix.Name), qs, pix),
				}})
			}
		}
	}
	slices.SortStableFunc(jobs, func(a, b job) int { return cmp.Compare(b.size, a.size) })
	queue := make(chan job)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(queue)
		for _, j := range jobs {
			select {
			case queue <- j:
			case <-gctx.Done():
				return nil
			}
		}
		return nil
	})
	for w := range max(1, workers) {
		g.Go(func() error {
			c := conn
			if w > 0 {
				var err error
				if c, err = dial(gctx); err != nil {
					return fmt.Errorf("bench: connect for index builds: %w", err)
				}
				defer c.Close(context.WithoutCancel(ctx))
			}
			for j := range queue {
				for _, q := range j.sql {
					if _, err := c.Exec(gctx, q); err != nil {
						return fmt.Errorf("bench: %s: %w", q, err)
					}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var invalid int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
	JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT i.indisvalid`, schema).Scan(&invalid); err != nil {
		return fmt.Errorf("bench: check indexes: %w", err)
	}
	if invalid > 0 {
		return fmt.Errorf("bench: %d indexes of %s still invalid after every partition's was attached", invalid, schema)
	}
	if _, err := conn.Exec(ctx, "DELETE FROM "+qs+".blockhaul_deferred_indexes"); err != nil {
		return fmt.Errorf("bench: forget deferred indexes: %w", err)
	}
	return nil
}

// timeQueries times the height-range count and the by-hash lookup on the
// transactions table, each over cfg.Lookups random arguments, and counts
// the partitions each plan scans.
func timeQueries(ctx context.Context, conn *pgx.Conn, cfg *PartitionConfig, schema string, txs chain.Table, blocks uint64, out *PartitionAfter) error {
	name := chain.QuoteIdent(schema) + "." + chain.QuoteIdent(txs.Name)
	hc := chain.QuoteIdent(txs.HeightColumn)
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT hash FROM %s TABLESAMPLE BERNOULLI (5) REPEATABLE (1) LIMIT %d", name, cfg.Lookups))
	if err != nil {
		return fmt.Errorf("bench: sample hashes: %w", err)
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil || len(hashes) == 0 {
		return fmt.Errorf("bench: sample hashes: %d found: %w", len(hashes), err)
	}
	span := max(1, cfg.PartitionBlocks/10)
	rng := rand.New(rand.NewPCG(1, 2))
	rangeQ := fmt.Sprintf("SELECT count(*) FROM %s WHERE %s BETWEEN $1 AND $2", name, hc)
	hashQ := fmt.Sprintf("SELECT %s FROM %s WHERE hash = $1", hc, name)
	// Each query runs warmup times untimed first: the plan cache and the
	// catalog caches of every partition filled, as on a serving database.
	warmup := min(20, cfg.Lookups)
	timed := func(n int, q func(i int) error) (float64, error) {
		for i := range warmup {
			if err := q(i); err != nil {
				return 0, err
			}
		}
		t0 := time.Now()
		for i := range n {
			if err := q(i); err != nil {
				return 0, err
			}
		}
		return 1e6 * time.Since(t0).Seconds() / float64(n), nil
	}
	us, err := timed(cfg.Lookups, func(int) error {
		lo := 1 + rng.Uint64N(blocks-span+1)
		var c int64
		if err := conn.QueryRow(ctx, rangeQ, int64(lo), int64(lo+span-1)).Scan(&c); err != nil {
			return fmt.Errorf("bench: range query: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	keepMin(&out.RangeMicros, us)
	us, err = timed(cfg.Lookups, func(i int) error {
		var h int64
		if err := conn.QueryRow(ctx, hashQ, hashes[i%len(hashes)]).Scan(&h); err != nil {
			return fmt.Errorf("bench: hash lookup: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	keepMin(&out.HashMicros, us)
	if out.RangeScans, err = scansOf(ctx, conn, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s BETWEEN %d AND %d", name, hc, blocks/2, blocks/2+span-1)); err != nil {
		return err
	}
	out.HashScans, err = scansOf(ctx, conn, fmt.Sprintf("SELECT %s FROM %s WHERE hash = '\\x%x'", hc, name, hashes[0]))
	return err
}

// scansOf counts the relation scans in query's executed plan.
func scansOf(ctx context.Context, conn *pgx.Conn, query string) (int, error) {
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+query)
	if err != nil {
		return 0, fmt.Errorf("bench: explain: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("bench: explain: %w", err)
	}
	n := 0
	for _, l := range lines {
		if strings.Contains(l, " Scan ") && !strings.Contains(l, "(never executed)") && !strings.Contains(l, "Bitmap Index Scan") {
			n++
		}
	}
	return n, nil
}

// reexport writes the heights b again, with the indexes in place: by
// export.Replay on plain tables, by replacing the partition of every table
// and exporting its heights on partitioned ones; then VACUUMs the tables.
func reexport(ctx context.Context, cfg *PartitionConfig, sess *export.Session, store *staging.Store, d density, parted bool, b [2]uint64, out *PartitionAfter) error {
	conn := sess.Conn()
	schema, tables := d.name, d.dec.Tables()
	qs := chain.QuoteIdent(schema)
	var before uint64
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.transactions", qs)).Scan(&before); err != nil {
		return fmt.Errorf("bench: count: %w", err)
	}
	if !parted {
		t0 := time.Now()
		if _, err := export.Replay(ctx, sess, store, d.dec, export.ReplayConfig{Schema: schema, From: b[0], To: b[1], FromSet: true, ToSet: true, BatchBlocks: cfg.BatchBlocks}); err != nil {
			return fmt.Errorf("bench: replay: %w", err)
		}
		keepMin(&out.ReloadSeconds, time.Since(t0).Seconds())
	} else {
		t0 := time.Now()
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, t := range tables {
				p := qs + "." + chain.QuoteIdent(partitionName(t.Name, b[0]))
				if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s.%s DETACH PARTITION %s", qs, chain.QuoteIdent(t.Name), p)); err != nil {
					return fmt.Errorf("bench: detach %s: %w", p, err)
				}
				if _, err := tx.Exec(ctx, "DROP TABLE "+p); err != nil {
					return fmt.Errorf("bench: drop %s: %w", p, err)
				}
				if err := createPartition(ctx, tx, qs, t.Name, b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		keepMin(&out.RemoveSeconds, time.Since(t0).Seconds())
		t0 = time.Now()
		if _, err := export.Run(ctx, sess, store, d.dec, export.Config{Schema: schema, Stream: export.Stream{Alias: "reexport", From: b[0], To: b[1]}, BatchBlocks: cfg.BatchBlocks}); err != nil {
			return fmt.Errorf("bench: re-export: %w", err)
		}
		keepMin(&out.ReloadSeconds, time.Since(t0).Seconds())
	}
	var after uint64
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.transactions", qs)).Scan(&after); err != nil {
		return fmt.Errorf("bench: count: %w", err)
	}
	if after != before {
		return fmt.Errorf("bench: re-export left %d transactions, not %d", after, before)
	}
	// The deletes' counts reach pg_stat_user_tables when a transaction of
	// this backend ends after this.
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		return fmt.Errorf("bench: flush statistics: %w", err)
	}
	var dead int64
	if err := conn.QueryRow(ctx, "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = $1", schema).Scan(&dead); err != nil {
		return fmt.Errorf("bench: dead rows: %w", err)
	}
	out.DeadRows = dead
	t0 := time.Now()
	for _, t := range tables {
		if _, err := conn.Exec(ctx, fmt.Sprintf("VACUUM %s.%s", qs, chain.QuoteIdent(t.Name))); err != nil {
			return fmt.Errorf("bench: vacuum %s: %w", t.Name, err)
		}
	}
	keepMin(&out.VacuumSeconds, time.Since(t0).Seconds())
	return nil
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// buildTimes is a slog.Handler that keeps the duration of each "index
// built" record of export.BuildIndexes, by index name.
type buildTimes struct {
	mu    sync.Mutex
	times map[string]float64
}

func (h *buildTimes) Enabled(context.Context, slog.Level) bool { return true }
func (h *buildTimes) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *buildTimes) WithGroup(string) slog.Handler            { return h }
func (h *buildTimes) Handle(_ context.Context, r slog.Record) error {
	var name string
	var d time.Duration
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "index":
			name = a.Value.String()
		case "duration":
			d = a.Value.Duration()
		}
		return true
	})
	if name != "" {
		h.mu.Lock()
		h.times[name] = round3(d.Seconds())
		h.mu.Unlock()
	}
	return nil
}

func keepMin(have *float64, v float64) {
	if *have == 0 || v < *have {
		*have = v
	}
}

// Markdown is the result as a table of ratios partitioned / plain, with
// the figures they come from.
func (r PartitionResult) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %s blocks, %s rows; K = %s heights: %d partitions per table; best of %d rounds; other processes took %.0f%% of the CPU\n\n",
		r.Chain, groupThousands(fmt.Sprint(r.Blocks)), groupThousands(fmt.Sprint(r.Rows)), groupThousands(fmt.Sprint(r.PartitionBlocks)), r.Partitions, r.Rounds, 100*r.CPUOther)
	fmt.Fprintf(&b, "| measure | plain | partitioned | partitioned / plain |\n|---|---:|---:|---:|\n")
	row := func(name string, plain, parted float64, unit string) {
		ratio := "–"
		if plain > 0 {
			ratio = fmt.Sprintf("%.2f", parted/plain)
		}
		if unit != "" {
			unit = " " + unit
		}
		fmt.Fprintf(&b, "| %s | %s%s | %s%s | %s |\n", name, fmtNum(plain), unit, fmtNum(parted), unit, ratio)
	}
	for i := 0; i+1 < len(r.Loads); i += 2 { // pairs: plain, partitioned (RunPartition)
		plain, parted := r.Loads[i], r.Loads[i+1]
		row(fmt.Sprintf("export, %d stream%s, rows/s", plain.Streams, plural(plain.Streams)), plain.RowsPerSec, parted.RowsPerSec, "")
	}
	row("deferred index build, one at a time", r.Plain.IndexSeconds, r.Parted.IndexSeconds, "s")
	row("deferred index build, one at a time, maintenance_work_mem "+r.BigMaintenanceMem, r.Plain.BigMemIndexSeconds, r.Parted.BigMemIndexSeconds, "s")
	row(fmt.Sprintf("deferred index build, %d connections (partitioned: per partition)", r.ParallelIndexWorkers), r.Plain.ParallelIndexSeconds, r.Parted.ParallelIndexSeconds, "s")
	var names []string
	for name := range r.Plain.Index {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		row("… index "+name, r.Plain.Index[name], r.Parted.Index[name], "s")
	}
	row(fmt.Sprintf("transactions of %s heights, count(*)", groupThousands(fmt.Sprint(max(1, r.PartitionBlocks/10)))), r.Plain.RangeMicros, r.Parted.RangeMicros, "µs")
	fmt.Fprintf(&b, "| … relations scanned | %d | %d | |\n", r.Plain.RangeScans, r.Parted.RangeScans)
	row("transaction by hash", r.Plain.HashMicros, r.Parted.HashMicros, "µs")
	fmt.Fprintf(&b, "| … relations scanned | %d | %d | |\n", r.Plain.HashScans, r.Parted.HashScans)
	if r.ManyLookupMicros > 0 {
		row(fmt.Sprintf("transaction by hash, %d partitions", r.ManyPartitions), r.Plain.HashMicros, r.ManyLookupMicros, "µs")
		row(fmt.Sprintf("height range count, %d partitions", r.ManyPartitions), r.Plain.RangeMicros, r.ManyRangeMicros, "µs")
	}
	plainRe := r.Plain.RemoveSeconds + r.Plain.ReloadSeconds
	partedRe := r.Parted.RemoveSeconds + r.Parted.ReloadSeconds
	row("re-export of one partition's heights: remove", r.Plain.RemoveSeconds, r.Parted.RemoveSeconds, "s")
	row("… write again", r.Plain.ReloadSeconds, r.Parted.ReloadSeconds, "s")
	row("… together", plainRe, partedRe, "s")
	row("… VACUUM after it", r.Plain.VacuumSeconds, r.Parted.VacuumSeconds, "s")
	fmt.Fprintf(&b, "| … dead rows left | %s | %s | |\n", groupThousands(fmt.Sprint(r.Plain.DeadRows)), groupThousands(fmt.Sprint(r.Parted.DeadRows)))
	b.WriteString("\nEvery round, in seconds:\n")
	for _, l := range r.Loads {
		layout := "plain"
		if l.Partitioned {
			layout = "partitioned"
		}
		fmt.Fprintf(&b, "- export, %s, %d stream%s: %v\n", layout, l.Streams, plural(l.Streams), l.AllSeconds)
	}
	fmt.Fprintf(&b, "- index build, plain: %v; partitioned: %v\n", r.Plain.IndexAll, r.Parted.IndexAll)
	return b.String()
}
