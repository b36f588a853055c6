package export

import (
	"context"
	"log/slog"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
)

// What the tests (of this package and of export_test) call and blockhaul
// does not.

// CopyRows COPYs every table's rows into schema in one transaction, the way
// export does, and returns the number of rows written (tests).
func CopyRows(ctx context.Context, conn *pgx.Conn, schema string, tables []chain.Table, rows *chain.Rows) (int64, error) {
	cp, err := newCopier(ctx, conn, schema, tables)
	if err != nil {
		return 0, err
	}
	var total int64
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		total, err = cp.sendAll(ctx, tx, tables, rows)
		return err
	})
	return total, err
}

// RestoreIndexes builds every index recorded as deferred, one at a time on
// conn; see BuildIndexes.
func RestoreIndexes(ctx context.Context, conn *pgx.Conn, schema string, log *slog.Logger) (int, error) {
	return BuildIndexes(ctx, conn, schema, BuildOptions{Workers: 1, Logger: log})
}
