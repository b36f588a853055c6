package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// deferredTable records the definitions of secondary indexes, and of the
// primary keys of a fresh fill (see DeferKeys), dropped for a bulk fill, so
// that the run that completes the range — or any later run without
// --defer-indexes — can build them again. A key's row has primary_key set,
// and names the fill that may write its table meanwhile (filler, a token,
// and filler_alias, its stream's alias).
const deferredTable = "blockhaul_deferred_indexes"

func deferredSQL(qs string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	index_name   text PRIMARY KEY,
	table_name   text NOT NULL,
	definition   text NOT NULL,
	deferred_at  timestamptz NOT NULL DEFAULT now(),
	primary_key  boolean NOT NULL DEFAULT false,
	filler       text,
	filler_alias text
)`, qs, deferredTable)
}

// ensureDeferredTable creates the deferred table, and adds the columns a
// schema of an older blockhaul lacks only when one is missing: ALTER TABLE
// takes the table in ACCESS EXCLUSIVE mode even when it adds nothing, and
// every batch reads the table (keysDeferredByOther) while it holds the
// chain's tables, so a DDL transaction that held it and then waited for a
// chain's table deadlocked with any batch in flight.
func ensureDeferredTable(ctx context.Context, tx pgx.Tx, schema string) error {
	qs := chain.QuoteIdent(schema)
	if _, err := tx.Exec(ctx, deferredSQL(qs)); err != nil {
		return err
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1)
	AND attname IN ('primary_key', 'filler', 'filler_alias') AND NOT attisdropped`, qs+"."+deferredTable).Scan(&have); err != nil {
		return err
	}
	if have == 3 {
		return nil
	}
	_, err := tx.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s.%s ADD COLUMN IF NOT EXISTS primary_key boolean NOT NULL DEFAULT false,
	ADD COLUMN IF NOT EXISTS filler text, ADD COLUMN IF NOT EXISTS filler_alias text`, qs, deferredTable))
	return err
}

// DeferIndexes drops the secondary indexes (never primary keys) of tables,
// recording each definition first, in one transaction under the schema's
// DDL lock.
func DeferIndexes(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table, log *slog.Logger) error {
	qs := chain.QuoteIdent(schema)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := lockSchema(ctx, tx, schema); err != nil {
			return err
		}
		if err := ensureDeferredTable(ctx, tx, schema); err != nil {
			return fmt.Errorf("export: defer indexes: %w", err)
		}
		for _, t := range tables {
			for _, ix := range t.Indexes {
				if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.%s (index_name, table_name, definition) VALUES ($1, $2, $3) ON CONFLICT (index_name) DO NOTHING`, qs, deferredTable),
					ix.Name, t.Name, t.IndexSQL(qs, ix)); err != nil {
					return fmt.Errorf("export: record index %s: %w", ix.Name, err)
				}
				if _, err := tx.Exec(ctx, fmt.Sprintf("DROP INDEX IF EXISTS %s.%s", qs, chain.QuoteIdent(ix.Name))); err != nil {
					return fmt.Errorf("export: drop index %s: %w", ix.Name, err)
				}
			}
		}
		log.Info("secondary indexes deferred until the range completes", "schema", schema)
		return nil
	})
}

// IndexesPendingError reports deferred indexes a build left unbuilt: the
// range's rows are all there, but the job is not done until a later run
// builds these.
type IndexesPendingError struct {
	Schema  string
	Pending []string // index names, in build order
	Keys    []string // those of Pending that are primary keys
	Err     error
}

func (e *IndexesPendingError) Error() string {
	return fmt.Sprintf("%v (%d deferred indexes of schema %s not built yet: %s; run again to build them)",
		e.Err, len(e.Pending), e.Schema, strings.Join(e.Pending, ", "))
}
func (e *IndexesPendingError) Unwrap() error { return e.Err }

// BuildOptions says how BuildIndexes builds the deferred indexes.
type BuildOptions struct {
	// Workers is how many indexes are built at once, the first on the
	// caller's connection and each other on one of its own from Dial.
	// Default 1; without Dial, 1.
	Workers int
	// Dial opens the connections of the workers beyond the first.
	Dial func(ctx context.Context) (*pgx.Conn, error)
	// MaintenanceWorkers, when above 0, is each build's
	// max_parallel_maintenance_workers: the parallel workers PostgreSQL may
	// use for one B-tree build (it builds GIN and BRIN indexes alone before
	// version 17/18). 0 keeps the server's setting (2 by default).
	MaintenanceWorkers int
	// MaintenanceWorkMem, when above 0, is each build's
	// maintenance_work_mem, in bytes: what a B-tree build sorts in before
	// it spills to disk, and what a GIN build collects its entries in
	// before it writes them into the index. 0 keeps the server's setting
	// (64 MB by default). Each of the Workers builds may use it at once.
	MaintenanceWorkMem int64
	// Analyze lists tables to ANALYZE once the deferred indexes of each
	// are built (at once for a table with none pending), by the same
	// workers: one table's statistics are gathered while another's
	// indexes still build. ANALYZE cannot run beside a build on its own
	// table (their locks conflict), hence after them. A failed ANALYZE
	// does not fail the builds; OnAnalyze hears of each.
	Analyze []string
	// OnAnalyze, if set, is called after each ANALYZE of Analyze, with its
	// time and its error.
	OnAnalyze func(table string, took time.Duration, err error)
	// KeysOnly builds the deferred primary keys alone (BuildKeys).
	KeysOnly bool
	// Logger receives each build's time. Default: discard.
	Logger *slog.Logger
}

// DefaultIndexWorkers is how many deferred indexes are built at once by
// default: the builds of different tables overlap, and the largest table's
// indexes, started first, bound the time.
const DefaultIndexWorkers = 4

// BuildIndexes builds every index recorded as deferred and forgets it,
// up to opts.Workers at once, in the order of PendingIndexes (the GIN and
// GiST builds first, then the primary keys, each largest table first),
// logging each build time. It is idempotent: with nothing recorded it does nothing. It returns
// the number of indexes built; when a build fails, the others stop and the
// error is an *IndexesPendingError naming the indexes still unbuilt.
//
// Each index is built in a transaction of its own that deletes the index's
// record, so the build and the bookkeeping commit together or not at all,
// and that holds two advisory locks: the schema's DDL lock, shared (builds
// run beside each other, never beside a process creating the schema or
// dropping its indexes, which take it exclusively), and the index's own,
// exclusive. Two processes finishing at once thus never build one index
// twice: the second waits for the first and finds its record gone. A
// process killed mid-build leaves its backend building (PostgreSQL notices
// the lost client only when it next writes to it); that backend still
// holds the index's lock, so the next run waits for it, finds its work
// rolled back, and builds the index itself, instead of racing it to the
// catalog.
//
// A primary key is built in two steps (keyStatements): its unique index,
// beside the table's other builds, in a transaction that keeps its record,
// then, once every other build of its table in this call has ended, the
// constraint attached over it in the transaction that forgets it. The
// attach takes the table's ACCESS EXCLUSIVE lock: asked for while another
// build of the table ran, it would hold its worker idle until that build
// ended and queue every later build of the table behind it. A run stopped
// between the steps leaves the key pending with its index built; the next
// finds the index there and attaches it.
func BuildIndexes(ctx context.Context, conn *pgx.Conn, schema string, opts BuildOptions) (int, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	qs := chain.QuoteIdent(schema)
	if exists, err := tableExists(ctx, conn, qs+"."+deferredTable); err != nil || !exists {
		return 0, err
	}
	pending, err := pendingIndexes(ctx, conn, schema, opts.KeysOnly)
	if err != nil || len(pending) == 0 {
		return 0, err
	}
	names := make([]string, len(pending))
	left := map[string]int{} // indexes of a table not built yet
	keys := map[string]bool{}
	for i, p := range pending {
		names[i] = p.name
		left[p.table]++
		keys[p.name] = p.key
	}
	analyze := map[string]bool{}
	for _, t := range opts.Analyze {
		analyze[t] = true
	}
	// The jobs: every index (in pendingIndexes' order), each key's attach
	// once the other builds of its table are done, then each table's
	// ANALYZE once its indexes are built and its keys attached.
	type job struct {
		index, table, analyze string
		key, attach           bool
	}
	jobs := make(chan job, 2*len(pending)+len(analyze))
	for _, p := range pending {
		jobs <- job{index: p.name, table: p.table, key: p.key}
	}
	for t := range analyze {
		if left[t] == 0 {
			jobs <- job{analyze: t}
		}
	}
	workers := max(1, min(opts.Workers, len(pending)+len(analyze)))
	if opts.Dial == nil {
		workers = 1
	}
	var (
		mu        sync.Mutex
		done      = map[string]bool{}
		built     int
		remaining = len(pending) + len(analyze)
		unkeyed   = map[string][]string{} // keys whose index is built, to attach
		attaching = map[string]int{}      // attaches of a table not done yet
	)
	// finished counts a job done and queues what it allowed (attach says
	// the job built a key's index, its attach still to come); the last
	// closes the queue.
	finished := func(j job, attach bool) {
		mu.Lock()
		defer mu.Unlock()
		remaining--
		if j.index != "" {
			if attach {
				unkeyed[j.table] = append(unkeyed[j.table], j.index)
			} else {
				done[j.index] = true
			}
			tableDone := false
			if j.attach {
				attaching[j.table]--
				tableDone = attaching[j.table] == 0
			} else if left[j.table]--; left[j.table] == 0 {
				for _, k := range unkeyed[j.table] {
					jobs <- job{index: k, table: j.table, key: true, attach: true}
					remaining++
					attaching[j.table]++
				}
				tableDone = attaching[j.table] == 0
			}
			if tableDone && analyze[j.table] {
				jobs <- job{analyze: j.table}
			}
		}
		if remaining == 0 {
			close(jobs)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for w := range workers {
		g.Go(func() error {
			c := conn
			if w > 0 {
				var err error
				if c, err = opts.Dial(gctx); err != nil {
					return fmt.Errorf("export: connect for index builds: %w", err)
				}
				defer c.Close(context.WithoutCancel(ctx))
			}
			for {
				var j job
				select {
				case next, ok := <-jobs:
					if !ok {
						return nil
					}
					j = next
				case <-gctx.Done():
					return nil
				}
				t0 := time.Now()
				if j.analyze != "" {
					_, err := c.Exec(gctx, "ANALYZE "+qs+"."+chain.QuoteIdent(j.analyze))
					if gctx.Err() != nil {
						return nil
					}
					if err != nil {
						err = fmt.Errorf("export: analyze %s.%s: %w", schema, j.analyze, err)
					}
					if opts.OnAnalyze != nil {
						opts.OnAnalyze(j.analyze, time.Since(t0), err)
					}
					finished(j, false)
					continue
				}
				step := buildWhole
				if j.key && !j.attach {
					step = buildKeyIndex
				}
				table, did, attach, err := buildDeferred(gctx, c, schema, j.index, step, opts.MaintenanceWorkers, opts.MaintenanceWorkMem)
				if err != nil {
					return err
				}
				took := time.Since(t0).Round(time.Millisecond)
				switch {
				case attach:
					log.Info("index built", "index", j.index, "table", table, "duration", took)
				case did:
					mu.Lock()
					built++
					mu.Unlock()
					if j.attach {
						log.Debug("primary key attached", "index", j.index, "table", table, "duration", took)
					} else {
						log.Info("index built", "index", j.index, "table", table, "duration", took)
					}
				}
				finished(j, attach)
			}
		})
	}
	err = g.Wait()
	if mu.Lock(); remaining > 0 && err == nil {
		// Stopped between jobs: the caller's context ended.
		err = ctx.Err()
		if err == nil {
			err = errors.New("export: index builds stopped")
		}
	}
	mu.Unlock()
	if err != nil {
		pe := &IndexesPendingError{Schema: schema, Err: err}
		for _, name := range names {
			if !done[name] {
				pe.Pending = append(pe.Pending, name)
				if keys[name] {
					pe.Keys = append(pe.Keys, name)
				}
			}
		}
		return built, pe
	}
	return built, nil
}

// PendingIndexes lists the deferred indexes (and primary keys) of schema
// not built yet, in the order BuildIndexes starts them: the GIN and GiST
// indexes first, then the primary keys, then the others, each largest
// table first. PostgreSQL (15 to 17) builds a GIN or GiST index in one
// process, with no parallel workers, and slower per row than a B-tree: the
// GIN index on a chain's events is the longest build by far, and the index
// phase lasts at least as long as it; started after the keys, it waited
// for a worker (see docs/benchmarks.md). A table partitioned
// by hand is as large as its partitions (pg_relation_size of the parent
// alone is 0).
func PendingIndexes(ctx context.Context, conn *pgx.Conn, schema string) ([]string, error) {
	return pendingNames(ctx, conn, schema, false)
}

// PendingKeys lists the primary keys among PendingIndexes.
func PendingKeys(ctx context.Context, conn *pgx.Conn, schema string) ([]string, error) {
	return pendingNames(ctx, conn, schema, true)
}

// PendingTables names the tables of PendingIndexes, in name order.
func PendingTables(ctx context.Context, conn *pgx.Conn, schema string) ([]string, error) {
	pending, err := pendingIndexes(ctx, conn, schema, false)
	var tables []string
	for _, p := range pending {
		tables = append(tables, p.table)
	}
	slices.Sort(tables)
	return slices.Compact(tables), err
}

// pendingNames is the names of pendingIndexes.
func pendingNames(ctx context.Context, conn *pgx.Conn, schema string, keysOnly bool) ([]string, error) {
	pending, err := pendingIndexes(ctx, conn, schema, keysOnly)
	names := make([]string, len(pending))
	for i, p := range pending {
		names[i] = p.name
	}
	return names, err
}

// pendingIndex is a deferred index (or primary key) and its table.
type pendingIndex struct {
	name, table string
	key         bool
}

// pendingIndexes is PendingIndexes with each index's table; with keysOnly,
// the primary keys alone.
func pendingIndexes(ctx context.Context, conn *pgx.Conn, schema string, keysOnly bool) ([]pendingIndex, error) {
	qs := chain.QuoteIdent(schema)
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT index_name, table_name, primary_key FROM %s.%s AS d WHERE primary_key OR NOT $2
ORDER BY definition ~* '\sUSING\s+(gin|gist)\s' DESC, primary_key DESC, coalesce((SELECT sum(pg_relation_size(p.relid)) FROM pg_partition_tree(to_regclass(quote_ident($1) || '.' || quote_ident(d.table_name))) AS p), 0) DESC, table_name, index_name`, qs, deferredTable), schema, keysOnly)
	if err != nil {
		return nil, fmt.Errorf("export: read deferred indexes: %w", err)
	}
	pending, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (p pendingIndex, err error) {
		err = r.Scan(&p.name, &p.table, &p.key)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("export: read deferred indexes: %w", err)
	}
	return pending, nil
}

// lockIndexBuild takes, until tx ends, the locks of one index build: the
// schema's DDL lock shared (see lockSchema) and the index's own.
func lockIndexBuild(ctx context.Context, tx pgx.Tx, schema, name string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock_shared(hashtext('blockhaul:' || $1))", schema); err != nil {
		return fmt.Errorf("export: lock schema %s: %w", schema, err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('blockhaul:' || $1), hashtext($2))", schema, name); err != nil {
		return fmt.Errorf("export: lock index %s: %w", name, err)
	}
	return nil
}

// buildStep is what buildDeferred does of a deferred index.
type buildStep int

const (
	// buildWhole builds the index, or the primary key with its constraint
	// (its unique index first unless built already), and forgets it.
	buildWhole buildStep = iota
	// buildKeyIndex builds a primary key's unique index alone and keeps
	// its record: the attach (buildWhole) is to come. Any other index is
	// built whole.
	buildKeyIndex
)

// buildDeferred builds one deferred index and deletes its record, in one
// transaction under lockIndexBuild, or, with buildKeyIndex, a primary key's
// index alone (attach: its record kept for the attach to come). It builds
// nothing when another process built it while this one waited for the lock.
func buildDeferred(ctx context.Context, conn *pgx.Conn, schema, name string, step buildStep, maintenanceWorkers int, workMem int64) (table string, built, attach bool, err error) {
	qs := chain.QuoteIdent(schema)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := lockIndexBuild(ctx, tx, schema, name); err != nil {
			return err
		}
		var def string
		var key bool
		err := tx.QueryRow(ctx, fmt.Sprintf("SELECT table_name, definition, primary_key FROM %s.%s WHERE index_name = $1", qs, deferredTable), name).Scan(&table, &def, &key)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("export: read deferred index %s: %w", name, err)
		}
		// An index left INVALID (a CREATE INDEX CONCURRENTLY cut short, by
		// hand or by an older blockhaul) would satisfy IF NOT EXISTS and
		// stay unusable: drop it and build it again.
		var invalid bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
	JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2 AND NOT i.indisvalid)`, schema, name).Scan(&invalid); err != nil {
			return fmt.Errorf("export: check index %s: %w", name, err)
		}
		if invalid {
			if _, err := tx.Exec(ctx, fmt.Sprintf("DROP INDEX %s.%s", qs, chain.QuoteIdent(name))); err != nil {
				return fmt.Errorf("export: drop invalid index %s: %w", name, err)
			}
		}
		// A deferred index over a chain's history takes minutes to hours: a
		// statement_timeout set for the database's readers (or a cautious
		// default) would cancel it every time, and each retry would start
		// the build again from nothing. It runs without one, as pg_restore's
		// index builds do (pg_dump writes SET statement_timeout = 0); the
		// rows' COPY and every other statement keep the database's setting.
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
			return fmt.Errorf("export: build index %s: %w", name, err)
		}
		if maintenanceWorkers > 0 {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL max_parallel_maintenance_workers = %d", maintenanceWorkers)); err != nil {
				return fmt.Errorf("export: build index %s: %w", name, err)
			}
		}
		if workMem > 0 {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL maintenance_work_mem = '%dkB'", max(workMem>>10, 1024))); err != nil {
				return fmt.Errorf("export: build index %s: %w", name, err)
			}
		}
		if err := crashpoint.Hit(ctx, crashpoint.MidIndexBuild); err != nil {
			return err
		}
		if key {
			// ADD CONSTRAINT has no IF NOT EXISTS: a table given its key
			// by hand keeps it.
			var has bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p')", qs+"."+chain.QuoteIdent(table)).Scan(&has); err != nil {
				return fmt.Errorf("export: check primary key %s: %w", name, err)
			}
			if has {
				def = ""
			}
		}
		stmts := []string{def}
		if key && def != "" {
			stmts = keyStatements(def, qs, table, name)
			if attach = step == buildKeyIndex && len(stmts) == 2; attach {
				stmts = stmts[:1]
			}
		}
		for _, def := range stmts {
			if def == "" {
				continue
			}
			if _, err := tx.Exec(ctx, def); err != nil {
				if key {
					return asDuplicateKey(fmt.Errorf("export: build primary key %s on %s: %w", name, table, err), schema, table, name)
				}
				return fmt.Errorf("export: build index %s on %s: %w", name, table, err)
			}
		}
		if attach {
			return nil
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM %s.%s WHERE index_name = $1", qs, deferredTable), name); err != nil {
			return fmt.Errorf("export: forget deferred index %s: %w", name, err)
		}
		built = true
		return nil
	})
	if err != nil {
		return table, false, false, err
	}
	return table, built, attach, nil
}

// keyStatements builds a deferred primary key (def: ALTER TABLE … ADD
// CONSTRAINT name PRIMARY KEY (…)) in two steps: its unique index, built
// under a SHARE lock as any CREATE INDEX is, so beside the table's other
// index builds (ADD PRIMARY KEY would hold the table ACCESS EXCLUSIVE the
// whole time, and the table's GIN build, the longest, would start only
// after it), then the constraint over that index, which takes the
// exclusive lock only to attach it (its columns are NOT NULL already:
// nothing to scan). A definition of another shape runs as it is.
func keyStatements(def, qs, table, name string) []string {
	_, cols, ok := strings.Cut(def, " PRIMARY KEY (")
	if !ok {
		return []string{def}
	}
	qt, qn := chain.QuoteIdent(table), chain.QuoteIdent(name)
	return []string{
		fmt.Sprintf("CREATE UNIQUE INDEX IF NOT EXISTS %s ON %s.%s (%s", qn, qs, qt, cols),
		fmt.Sprintf("ALTER TABLE %s.%s ADD CONSTRAINT %s PRIMARY KEY USING INDEX %s", qs, qt, qn, qn),
	}
}

// TablesEmpty reports whether every one of tables in schema is missing or
// holds no row.
func TablesEmpty(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table) (bool, error) {
	return tablesEmpty(ctx, conn, schema, tables)
}

func tablesEmpty(ctx context.Context, conn querier, schema string, tables []chain.Table) (bool, error) {
	qs := chain.QuoteIdent(schema)
	for _, t := range tables {
		name := qs + "." + chain.QuoteIdent(t.Name)
		if exists, err := tableExists(ctx, conn, name); err != nil {
			return false, err
		} else if !exists {
			continue
		}
		var any bool
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s)", name)).Scan(&any); err != nil {
			return false, fmt.Errorf("export: look into table %s: %w", name, err)
		}
		if any {
			return false, nil
		}
	}
	return true, nil
}

// IndexesDeferred reports whether schema has indexes that a run deferred
// and nothing has built since.
func IndexesDeferred(ctx context.Context, conn *pgx.Conn, schema string) (bool, error) {
	name := chain.QuoteIdent(schema) + "." + deferredTable
	if exists, err := tableExists(ctx, conn, name); err != nil || !exists {
		return false, err
	}
	var pending bool
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s)", name)).Scan(&pending); err != nil {
		return false, fmt.Errorf("export: read deferred indexes: %w", err)
	}
	return pending, nil
}

// tableExists reports whether the table named by name (quoted, schema
// qualified) exists.
func tableExists(ctx context.Context, conn querier, name string) (bool, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
		return false, fmt.Errorf("export: look for table %s: %w", name, err)
	}
	return exists, nil
}

// IndexesPresent reads the catalog for which of the deferred indexes names
// exist in schema already, whatever the deferred record says (a build
// interrupted between building and forgetting one): "built" for an index,
// or a primary key whose constraint is attached; "index" for a primary key
// whose unique index is built and not yet attached as the key.
func IndexesPresent(ctx context.Context, conn *pgx.Conn, schema string, names []string) (map[string]string, error) {
	rows, err := conn.Query(ctx, `SELECT n, to_regclass(quote_ident($1) || '.' || quote_ident(n)) IS NOT NULL,
       EXISTS (SELECT 1 FROM pg_constraint c JOIN pg_namespace s ON s.oid = c.connamespace WHERE s.nspname = $1 AND c.conname = n AND c.contype = 'p')
FROM unnest($2::text[]) AS n`, schema, names)
	if err != nil {
		return nil, fmt.Errorf("export: read which deferred indexes exist: %w", err)
	}
	present := map[string]string{}
	for rows.Next() {
		var n string
		var idx, key bool
		if err := rows.Scan(&n, &idx, &key); err != nil {
			rows.Close()
			return nil, fmt.Errorf("export: read which deferred indexes exist: %w", err)
		}
		switch {
		case key:
			present[n] = "built"
		case idx:
			present[n] = "index"
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("export: read which deferred indexes exist: %w", err)
	}
	return present, nil
}
