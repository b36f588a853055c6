package export

import (
	"context"
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// RowEncoder writes one table's rows as the binary COPY tuples export
// sends, so that a check can hash what export would have written (archive's
// verify --pg digests staged blocks so). It is not safe for concurrent use:
// one per goroutine.
type RowEncoder struct {
	plan *copyPlan
}

// ColumnOIDs asks the server for the OID of every column type of tables,
// keyed by the type as the table names it (chain.Column.Type).
func ColumnOIDs(ctx context.Context, conn *pgx.Conn, tables []chain.Table) (map[string]uint32, error) {
	return typeOIDs(ctx, conn, tables)
}

// NewRowEncoder plans t's encoding from the OIDs ColumnOIDs returned.
func NewRowEncoder(oids map[string]uint32, t chain.Table) (*RowEncoder, error) {
	for _, c := range t.Columns {
		if _, ok := oids[c.Type]; !ok {
			return nil, fmt.Errorf("export: table %s column %s: no OID for type %q", t.Name, c.Name, c.Type)
		}
	}
	p, err := newCopyPlan(pgtype.NewMap(), oids, chain.QuoteIdent(t.Name), t)
	if err != nil {
		return nil, err
	}
	return &RowEncoder{plan: p}, nil
}

// AppendRow appends row as one binary COPY tuple: the field count, then
// each field's length (-1 for NULL) and bytes.
func (e *RowEncoder) AppendRow(buf []byte, row []any) ([]byte, error) {
	return e.plan.appendRow(buf, row)
}
