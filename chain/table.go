package chain

import (
	"fmt"
	"strings"
)

// Column is one column of an export table.
type Column struct {
	Name string
	Type string // PostgreSQL type as written in DDL, e.g. "bigint", "bytea", "numeric"
	Null bool   // nullable
	// Since is the version of the table's shape that added the column (see
	// Table); 0 or 1: it came with the table.
	Since int
}

// Index is a secondary index of a table (not its primary key). Secondary
// indexes may be dropped for a bulk fill and rebuilt afterwards.
type Index struct {
	Name    string // unqualified index name, unique within the schema
	Columns string // the parenthesised part, e.g. "(hash)" or "USING gin (attributes)"
	Unique  bool
	// Minimal marks an index of the minimal set (--indexes minimal): the
	// lookups by hash. Every index is in the default set.
	Minimal bool
}

// Table describes one export table: its columns in COPY order, primary key
// and secondary indexes. Every table carries the block height as a column
// (HeightColumn) so export can delete or re-check a height range.
//
// A table's shape is versioned so that a database filled by an older
// blockhaul can be brought up to date in place: a column added to a table
// after its first release says in which version of the table's shape
// (Column.Since: 2, 3, …), and export adds such a column to a table that
// lacks it. Versions count per table from 1, the shape it was first
// released with (for the first tables: before versions were recorded); a
// new table needs no Since.
type Table struct {
	Name         string
	Columns      []Column
	PrimaryKey   []string
	HeightColumn string
	Indexes      []Index
	// Facts are lines status --pg prints about the table's rows.
	Facts []Fact
	// Definition, when set, is what the rows are made from beyond the
	// table's shape (an EVM event table: the event's declaration and the
	// addresses it is read from). Export records it on the table (as its
	// PostgreSQL comment) and refuses a table made from another
	// definition: the same columns would hold rows that mean other things.
	Definition string
}

// Fact is a line status --pg prints about a table's rows, such as what a
// decoder left undecoded. Query, with %s for the table's qualified name,
// returns one row: a count (bigint) and a detail (text). Nothing is printed
// when the count is 0; else Line, formatted with the count and the detail.
// The query may scan the table: status says so by printing it last.
type Fact struct {
	Query string
	Line  string
}

// Version is the version of the table's shape: the latest that added one
// of its columns, 1 when none was added after the first.
func (t Table) Version() int {
	v := 1
	for _, c := range t.Columns {
		v = max(v, c.Since)
	}
	return v
}

// ColumnNames returns the column names in COPY order.
func (t Table) ColumnNames() []string {
	out := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = c.Name
	}
	return out
}

// CreateSQL returns an idempotent CREATE TABLE for the table in schema. The
// schema must already be a quoted identifier (see QuoteIdent).
func (t Table) CreateSQL(quotedSchema string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s.%s (\n", quotedSchema, QuoteIdent(t.Name))
	for _, c := range t.Columns {
		null := " NOT NULL"
		if c.Null {
			null = ""
		}
		fmt.Fprintf(&b, "\t%s %s%s,\n", QuoteIdent(c.Name), c.Type, null)
	}
	pk := make([]string, len(t.PrimaryKey))
	for i, c := range t.PrimaryKey {
		pk[i] = QuoteIdent(c)
	}
	fmt.Fprintf(&b, "\tPRIMARY KEY (%s)\n)", strings.Join(pk, ", "))
	return b.String()
}

// IndexSQL returns an idempotent CREATE INDEX for ix on table t in schema.
func (t Table) IndexSQL(quotedSchema string, ix Index) string {
	u := ""
	if ix.Unique {
		u = "UNIQUE "
	}
	return fmt.Sprintf("CREATE %sINDEX IF NOT EXISTS %s ON %s.%s %s",
		u, QuoteIdent(ix.Name), quotedSchema, QuoteIdent(t.Name), ix.Columns)
}

// QuoteIdent quotes a PostgreSQL identifier: identifiers that come from
// flags are always quoted, never spliced.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
