package export

import (
	"context"
	"fmt"
	"slices"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
)

// Analyze runs ANALYZE on each table that res filled (a row count above
// zero), in name order, so that the planner knows what a bulk load put
// there without waiting for autovacuum: after a fill from empty it still
// estimates the table's size from before (22 k rows where there are 616 k),
// and picks plans for that. It returns the tables analyzed.
func Analyze(ctx context.Context, conn *pgx.Conn, schema string, res Result) ([]string, error) {
	var filled []string
	for name, n := range res.Rows {
		if n > 0 {
			filled = append(filled, name)
		}
	}
	slices.Sort(filled)
	return AnalyzeTables(ctx, conn, schema, filled)
}

// AnalyzeTables ANALYZEs the tables named, in order, and returns those it
// analyzed.
func AnalyzeTables(ctx context.Context, conn *pgx.Conn, schema string, tables []string) ([]string, error) {
	qs := chain.QuoteIdent(schema)
	for i, name := range tables {
		if _, err := conn.Exec(ctx, "ANALYZE "+qs+"."+chain.QuoteIdent(name)); err != nil {
			return tables[:i], fmt.Errorf("export: analyze %s.%s: %w", schema, name, err)
		}
	}
	return tables, nil
}
