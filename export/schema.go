package export

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/jackc/pgx/v5"
)

// Names of blockhaul's own tables, kept in the export schema beside the
// chain's tables.
const (
	checkpointTable = "blockhaul_checkpoints" // the head stream's cursor
	backfillTable   = "blockhaul_backfills"   // one row per backfill alias
)

// HeadStream is the name of the head stream's checkpoint row.
const HeadStream = "head"

func ownTablesSQL(qs string) []string {
	return []string{
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	stream       text PRIMARY KEY,
	height       bigint NOT NULL,
	hash         bytea,
	start_height bigint NOT NULL,
	updated_at   timestamptz NOT NULL DEFAULT now()
)`, qs, checkpointTable),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	alias        text PRIMARY KEY,
	range_start  bigint NOT NULL,
	range_end    bigint NOT NULL,
	last_height  bigint,
	last_hash    bytea,
	status       text NOT NULL DEFAULT 'in_progress' CHECK (status IN ('in_progress', 'complete')),
	started_at   timestamptz NOT NULL DEFAULT now(),
	updated_at   timestamptz NOT NULL DEFAULT now(),
	completed_at timestamptz
)`, qs, backfillTable),
		chainTableSQL(qs),
	}
}

// lockSchema takes, until tx ends, the lock that serialises blockhaul's DDL
// on schema: its creation, and the dropping and building of its secondary
// indexes. Concurrent CREATE … IF NOT EXISTS of the same object is not safe
// in PostgreSQL (both pass the check, one fails on a catalog unique index),
// so any number of streams may start at once only if they take turns here.
// The lock is transaction-scoped, so a process killed while holding it
// releases it when its backend ends.
func lockSchema(ctx context.Context, tx pgx.Tx, schema string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('blockhaul:' || $1))", schema); err != nil {
		return fmt.Errorf("export: lock schema %s: %w", schema, err)
	}
	return nil
}

// versionTable records the shape version of each of the chain's tables in
// the schema (chain.Table.Version), so that a newer blockhaul can tell an
// older shape it knows how to bring up to date from a table that is not
// its own.
const versionTable = "blockhaul_schema_versions"

func versionSQL(qs string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	table_name text PRIMARY KEY,
	version    integer NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
)`, qs, versionTable)
}

// Upgrade is what EnsureSchema did to one table an older blockhaul created:
// the columns it added (nullable: NULL in the rows already there until the
// table is replayed from staging) and the versions before and after.
type Upgrade struct {
	Table    string
	From, To int
	Added    []chain.Column
}

// shapePlan is what checkShapes found: the tables to create, and what to
// add to the tables of an older shape.
type shapePlan struct {
	existing []string // tables already in the schema
	create   []string // tables not there yet
	upgrades []Upgrade
}

// EnsureSchema creates the schema, the decoder's tables, their secondary
// indexes (unless skipIndexes) and blockhaul's own tables, idempotently, and
// brings tables of an older blockhaul's shape up to date: it adds the
// columns they lack (see chain.Table) and records each table's version. A
// table of a shape it does not know is refused (*ShapeError) before anything
// is changed. An advisory lock serialises concurrent blockhaul processes
// doing the same. What it adds is logged to log (nil: discarded).
func EnsureSchema(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table, skipIndexes bool, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	qs := chain.QuoteIdent(schema)
	var plan shapePlan
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := lockSchema(ctx, tx, schema); err != nil {
			return err
		}
		var err error
		if plan, err = checkShapes(ctx, tx, schema, tables); err != nil {
			return err
		}
		stmts := []string{"CREATE SCHEMA IF NOT EXISTS " + qs}
		for _, u := range plan.upgrades {
			for _, c := range u.Added {
				// Nullable whatever the decoder's definition: the rows
				// already there have no value until they are replayed.
				stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s.%s ADD COLUMN IF NOT EXISTS %s %s", qs, chain.QuoteIdent(u.Table), chain.QuoteIdent(c.Name), c.Type))
			}
		}
		for _, t := range tables {
			stmts = append(stmts, t.CreateSQL(qs))
			if !skipIndexes {
				for _, ix := range t.Indexes {
					stmts = append(stmts, t.IndexSQL(qs, ix))
				}
			}
		}
		for _, t := range tables {
			if t.Definition != "" && slices.Contains(plan.create, t.Name) {
				// What the rows are made from, checked by checkShapes
				// when the table is written again.
				stmts = append(stmts, fmt.Sprintf("COMMENT ON TABLE %s.%s IS %s", qs, chain.QuoteIdent(t.Name), quoteLiteral(t.Definition)))
			}
		}
		stmts = append(stmts, ownTablesSQL(qs)...)
		stmts = append(stmts, deferredSQL(qs))
		stmts = append(stmts, versionSQL(qs), replaySQL(qs))
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("export: create schema %s: %w\n%s", schema, err, s)
			}
		}
		if err := ensureDeferredTable(ctx, tx, schema); err != nil {
			return fmt.Errorf("export: create schema %s: %w", schema, err)
		}
		for _, t := range tables {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.%[2]s AS v (table_name, version) VALUES ($1, $2)
ON CONFLICT (table_name) DO UPDATE SET version = EXCLUDED.version, updated_at = now() WHERE v.version < EXCLUDED.version`, qs, versionTable),
				t.Name, t.Version()); err != nil {
				return fmt.Errorf("export: record the schema version of %s.%s: %w", schema, t.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, u := range plan.upgrades {
		if len(u.Added) == 0 {
			log.Info("table shape recorded", "table", u.Table, "version", u.To)
			continue
		}
		names := make([]string, len(u.Added))
		for i, c := range u.Added {
			names[i] = c.Name
		}
		log.Warn("table of an older blockhaul brought up to date: columns added, NULL in the rows already there until the table is replayed from staging (blockhaul export --replay "+u.Table+")",
			"schema", schema, "table", u.Table, "from_version", u.From, "to_version", u.To, "added", strings.Join(names, ", "))
	}
	if len(plan.existing) > 0 {
		for _, name := range plan.create {
			log.Warn("table created beside tables that already hold heights: it has no rows below this export's range until it is replayed from staging (blockhaul export --replay "+name+")",
				"schema", schema, "table", name)
		}
	}
	return nil
}

// CheckShapes is EnsureSchema's check of the tables that already exist,
// alone and read-only, for a caller with more to check before it creates
// anything. A table of an older blockhaul's shape passes: EnsureSchema
// brings it up to date.
func CheckShapes(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table) error {
	return pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		_, err := checkShapes(ctx, tx, schema, tables)
		return err
	})
}

// ShapeError reports a table that exists in the target schema with another
// shape than the decoder's, and not one an older blockhaul left: COPY into
// it would fail, or write columns that mean something else. Nothing was
// changed.
type ShapeError struct {
	Schema, Table string
	Diffs         []string // one per difference, e.g. `missing column "hash" bytea`
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("export: table %s.%s already exists with another shape: %s (another tool's table, or one changed by hand: export into another --schema, or drop the table)",
		e.Schema, e.Table, strings.Join(e.Diffs, "; "))
}

// Fault marks the error as a configuration error (exit 2): the target's tables are not this family's.
func (e *ShapeError) Fault() fault.Class { return fault.Config }

// schemaVersions reads the recorded version of each table (none when the
// schema predates them).
func schemaVersions(ctx context.Context, tx pgx.Tx, schema string) (map[string]int, error) {
	name := chain.QuoteIdent(schema) + "." + versionTable
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
		return nil, fmt.Errorf("export: look for %s: %w", name, err)
	}
	out := map[string]int{}
	if !exists {
		return out, nil
	}
	rows, err := tx.Query(ctx, "SELECT table_name, version FROM "+name)
	if err != nil {
		return nil, fmt.Errorf("export: read %s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var t string
		var v int32
		if err := rows.Scan(&t, &v); err != nil {
			return nil, fmt.Errorf("export: read %s: %w", name, err)
		}
		out[t] = int(v)
	}
	return out, rows.Err()
}

// checkShapes compares each of tables that already exists in schema with
// its definition: every column present with the same type, none NOT NULL
// that the decoder may leave NULL, no extra NOT NULL column without a
// default (COPY would leave it empty), the same primary key. Extra nullable
// columns are fine: COPY names its columns.
//
// A missing column is one to add, not a difference, when the table's
// version is older than the column (chain.Column.Since). The version is the
// one recorded in versionTable; a table without a record is taken to be of
// its first shape (version 1), so the columns it was released with must
// all be there. A table at a version newer than the decoder's is
// refused: this blockhaul would leave the newer columns empty.
func checkShapes(ctx context.Context, tx pgx.Tx, schema string, tables []chain.Table) (shapePlan, error) {
	var plan shapePlan
	versions, err := schemaVersions(ctx, tx, schema)
	if err != nil {
		return plan, err
	}
	deferredKeys, err := keysDeferredOf(ctx, tx, schema)
	if err != nil {
		return plan, err
	}
	canonical := map[string]string{} // a type as written in DDL → as format_type prints it
	for _, t := range tables {
		have, order, err := readShape(ctx, tx, schema, t.Name)
		if err != nil {
			return plan, err
		}
		if len(have) == 0 {
			plan.create = append(plan.create, t.Name) // not there yet
			continue
		}
		plan.existing = append(plan.existing, t.Name)
		version, recorded := versions[t.Name]
		if !recorded {
			version = 1 // the table's first shape
		}
		var diffs []string
		if version > t.Version() {
			diffs = append(diffs, fmt.Sprintf("schema version %d, newer than this blockhaul's %d (a newer blockhaul filled it: use that one)", version, t.Version()))
		}
		up := Upgrade{Table: t.Name, From: version, To: t.Version()}
		colDiffs, err := columnDiffs(ctx, tx, t, have, order, version, recorded, canonical, &up)
		if err != nil {
			return plan, err
		}
		diffs = append(diffs, colDiffs...)
		defDiff, err := definitionDiff(ctx, tx, schema, t)
		if err != nil {
			return plan, err
		}
		if defDiff != "" {
			diffs = append(diffs, defDiff)
		}
		var pk []string
		for _, name := range order {
			if have[name].inPK {
				pk = append(pk, name)
			}
		}
		if len(pk) == 0 && deferredKeys[t.Name] {
			pk = t.PrimaryKey // dropped for a fill; built as it was
		}
		if !slices.Equal(sorted(pk), sorted(t.PrimaryKey)) {
			diffs = append(diffs, fmt.Sprintf("primary key (%s), not (%s)", strings.Join(pk, ", "), strings.Join(t.PrimaryKey, ", ")))
		}
		if len(diffs) > 0 {
			return plan, &ShapeError{Schema: schema, Table: t.Name, Diffs: diffs}
		}
		if len(up.Added) > 0 || !recorded || version < up.To {
			plan.upgrades = append(plan.upgrades, up)
		}
	}
	return plan, nil
}

// pgColumn is one column of a table as the catalogue has it.
type pgColumn struct {
	typ             string
	notNull, hasDef bool
	inPK            bool
}

// readShape reads the columns of schema.table from the catalogue, by name
// and in their order; none when the table is not there.
func readShape(ctx context.Context, tx pgx.Tx, schema, table string) (map[string]pgColumn, []string, error) {
	rows, err := tx.Query(ctx, `
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atthasdef,
       coalesce(a.attnum = ANY (i.indkey), false)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, schema, table)
	if err != nil {
		return nil, nil, fmt.Errorf("export: read the shape of %s.%s: %w", schema, table, err)
	}
	have := map[string]pgColumn{}
	var order []string
	for rows.Next() {
		var name string
		var c pgColumn
		if err := rows.Scan(&name, &c.typ, &c.notNull, &c.hasDef, &c.inPK); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("export: read the shape of %s.%s: %w", schema, table, err)
		}
		have[name] = c
		order = append(order, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("export: read the shape of %s.%s: %w", schema, table, err)
	}
	return have, order, nil
}

// columnDiffs compares the columns t declares with those the table has
// (have, in their order), at its schema version: a column added since that
// version goes into up.Added, every other difference is returned, the
// declared columns first, then the extra ones. canonical caches the types
// as format_type prints them.
func columnDiffs(ctx context.Context, tx pgx.Tx, t chain.Table, have map[string]pgColumn, order []string, version int, recorded bool, canonical map[string]string, up *Upgrade) ([]string, error) {
	var diffs []string
	want := map[string]bool{}
	for _, c := range t.Columns {
		want[c.Name] = true
		h, ok := have[c.Name]
		if !ok {
			switch {
			case c.Since > version:
				up.Added = append(up.Added, c)
			case recorded:
				diffs = append(diffs, fmt.Sprintf("missing column %s %s (which its recorded schema version %d has)", chain.QuoteIdent(c.Name), c.Type, version))
			default:
				diffs = append(diffs, fmt.Sprintf("missing column %s %s", chain.QuoteIdent(c.Name), c.Type))
			}
			continue
		}
		typ, ok := canonical[c.Type]
		if !ok {
			if err := tx.QueryRow(ctx, "SELECT format_type(to_regtype($1), NULL)", c.Type).Scan(&typ); err != nil {
				return nil, fmt.Errorf("export: type %s of %s.%s: %w", c.Type, t.Name, c.Name, err)
			}
			canonical[c.Type] = typ
		}
		if h.typ != typ {
			diffs = append(diffs, fmt.Sprintf("column %s is %s, not %s", chain.QuoteIdent(c.Name), h.typ, typ))
		}
		if c.Null && h.notNull {
			diffs = append(diffs, fmt.Sprintf("column %s is NOT NULL, but may be NULL", chain.QuoteIdent(c.Name)))
		}
	}
	for _, name := range order {
		if h := have[name]; !want[name] && h.notNull && !h.hasDef {
			diffs = append(diffs, fmt.Sprintf("extra column %s %s is NOT NULL without a default", chain.QuoteIdent(name), h.typ))
		}
	}
	return diffs, nil
}

// definitionDiff says how the definition recorded on the table differs from
// the one t is made from; "" when they are the same or t has none.
func definitionDiff(ctx context.Context, tx pgx.Tx, schema string, t chain.Table) (string, error) {
	if t.Definition == "" {
		return "", nil
	}
	var def *string
	if err := tx.QueryRow(ctx, "SELECT obj_description(to_regclass($1), 'pg_class')", chain.QuoteIdent(schema)+"."+chain.QuoteIdent(t.Name)).Scan(&def); err != nil {
		return "", fmt.Errorf("export: read the definition of %s.%s: %w", schema, t.Name, err)
	}
	if def != nil && *def == t.Definition {
		return "", nil
	}
	was := "none recorded"
	if def != nil {
		was = strconv.Quote(*def)
	}
	return fmt.Sprintf("made from another definition: %s, not %q (drop the table and fill it again with blockhaul export --replay %s)", was, t.Definition, t.Name), nil
}

// quoteLiteral quotes s as a PostgreSQL string literal (standard
// conforming strings: only the quote is doubled).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// keysDeferredOf reads which tables of schema have their primary key
// deferred (DeferKeys). A record table of an older blockhaul, which defers
// no key, lacks the column: to_jsonb reads it as missing.
func keysDeferredOf(ctx context.Context, tx pgx.Tx, schema string) (map[string]bool, error) {
	name := chain.QuoteIdent(schema) + "." + deferredTable
	out := map[string]bool{}
	if exists, err := tableExists(ctx, tx, name); err != nil || !exists {
		return out, err
	}
	rows, err := tx.Query(ctx, "SELECT table_name FROM "+name+" AS d WHERE (to_jsonb(d) ->> 'primary_key')::boolean")
	if err != nil {
		return nil, fmt.Errorf("export: read deferred keys: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("export: read deferred keys: %w", err)
	}
	for _, t := range tables {
		out[t] = true
	}
	return out, nil
}
