package evm

import (
	"context"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestTablesInPostgres creates the tables in a real PostgreSQL, COPYs the
// decoded rows of 30 synthetic blocks into them with pgx's binary COPY, and
// reads back counts and values of every awkward kind: numeric beyond
// int64, bytea[], NULLs, timestamptz.
func TestTablesInPostgres(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Connect(t)

	const schemaName = "evm data" // needs quoting
	schema := chain.QuoteIdent(schemaName)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	d := NewDecoder()
	tables := d.Tables()
	for _, tb := range tables {
		for range 2 { // idempotent
			if _, err := conn.Exec(ctx, tb.CreateSQL(schema)); err != nil {
				t.Fatalf("%s: %v\n%s", tb.Name, err, tb.CreateSQL(schema))
			}
			for _, ix := range tb.Indexes {
				if _, err := conn.Exec(ctx, tb.IndexSQL(schema, ix)); err != nil {
					t.Fatalf("%s: %v", ix.Name, err)
				}
			}
		}
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = $1 AND table_name = $2 AND column_name = $3`, schemaName, tb.Name, tb.HeightColumn).Scan(&n)
		if err != nil || n != 1 {
			t.Fatalf("%s: height column %q not found (%d, %v)", tb.Name, tb.HeightColumn, n, err)
		}
	}

	s := NewSynthetic(SyntheticConfig{Seed: 7})
	rows := chain.NewRows(tables)
	for h := uint64(0); h < 30; h++ {
		if err := d.Decode(h, s.Record(h), rows); err != nil {
			t.Fatal(err)
		}
	}
	for i, tb := range tables {
		n, err := conn.CopyFrom(ctx, pgx.Identifier{schemaName, tb.Name}, tb.ColumnNames(), pgx.CopyFromRows(rows.Table(i)))
		if err != nil {
			t.Fatalf("copy %s: %v", tb.Name, err)
		}
		if int(n) != rows.Len(i) {
			t.Fatalf("copy %s: %d rows, want %d", tb.Name, n, rows.Len(i))
		}
		var count int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+schema+"."+chain.QuoteIdent(tb.Name)).Scan(&count); err != nil {
			t.Fatal(err)
		}
		if count != rows.Len(i) {
			t.Fatalf("%s holds %d rows, want %d", tb.Name, count, rows.Len(i))
		}
	}
	var sumTx, sumLogs int
	for h := uint64(0); h < 30; h++ {
		a, b := s.ExpectedCounts(h)
		sumTx += a
		sumLogs += b
	}
	var txCount, txRows, logRows int
	err := conn.QueryRow(ctx, `SELECT (SELECT sum(transaction_count) FROM `+schema+`.blocks),
		(SELECT count(*) FROM `+schema+`.transactions), (SELECT count(*) FROM `+schema+`.logs)`).Scan(&txCount, &txRows, &logRows)
	if err != nil {
		t.Fatal(err)
	}
	if txCount != sumTx || txRows != sumTx || logRows != sumLogs {
		t.Fatalf("sum(transaction_count) %d, %d transactions, %d logs; generator says %d and %d",
			txCount, txRows, logRows, sumTx, sumLogs)
	}
	var wdRows, wdTimed int
	err = conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE w.block_time = b.timestamp)
		FROM `+schema+`.withdrawals w JOIN `+schema+`.blocks b ON b.number = w.block_number`).Scan(&wdRows, &wdTimed)
	if err != nil || wdRows != 29*16 || wdTimed != wdRows {
		t.Fatalf("%d withdrawals, %d with their block's time (%v); want 29*16 = 464, all", wdRows, wdTimed, err)
	}
	// Every child row carries its block's time.
	var txTimed, logTimed int
	err = conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM `+schema+`.transactions x JOIN `+schema+`.blocks b ON b.number = x.block_number WHERE x.block_time = b.timestamp),
		(SELECT count(*) FROM `+schema+`.logs l JOIN `+schema+`.blocks b ON b.number = l.block_number WHERE l.block_time = b.timestamp)`).Scan(&txTimed, &logTimed)
	if err != nil || txTimed != sumTx || logTimed != sumLogs {
		t.Fatalf("block_time equal to the block's timestamp on %d transactions and %d logs (%v), want %d and %d", txTimed, logTimed, err, sumTx, sumLogs)
	}

	// Find one value beyond int64, one blob transaction, the creations.
	var big []any
	var blob []any
	creations := 0
	for _, r := range rows.Table(TableTransactions) {
		if n, ok := r[colTxValue].(pgtype.Numeric); ok && big == nil {
			big = r
			if n.Int.IsInt64() {
				t.Fatalf("decoder made a numeric of %v, which fits int64", n.Int)
			}
		}
		if r[colTxType] == int16(3) && blob == nil {
			blob = r
		}
		if r[colTxTo] == nil {
			creations++
		}
	}
	if big == nil || blob == nil || creations == 0 {
		t.Fatalf("30 blocks had no value beyond int64 (%v), blob transaction (%v) or creation (%d)", big != nil, blob != nil, creations)
	}
	var text string
	var beyond bool
	var hash []byte
	err = conn.QueryRow(ctx, `SELECT value::text, value > 9223372036854775807, hash FROM `+schema+`.transactions
		WHERE block_number = $1 AND transaction_index = $2`, big[colTxBlockNumber], big[colTxIndex]).Scan(&text, &beyond, &hash)
	if err != nil {
		t.Fatal(err)
	}
	if want := big[colTxValue].(pgtype.Numeric).Int.String(); text != want || !beyond || string(hash) != string(big[colTxHash].([]byte)) {
		t.Fatalf("value read back as %s (beyond int64: %v), want %s", text, beyond, want)
	}

	var hashes [][]byte
	var blobGasPrice, maxFee, maxBlobFee pgtype.Numeric
	var blobGasUsed int64
	err = conn.QueryRow(ctx, `SELECT blob_versioned_hashes, blob_gas_price, max_fee_per_gas, max_fee_per_blob_gas, blob_gas_used FROM `+schema+`.transactions
		WHERE block_number = $1 AND transaction_index = $2`, blob[colTxBlockNumber], blob[colTxIndex]).Scan(&hashes, &blobGasPrice, &maxFee, &maxBlobFee, &blobGasUsed)
	if err != nil {
		t.Fatal(err)
	}
	want := blob[colTxBlobHashes].([][]byte)
	if len(hashes) != len(want) || string(hashes[0]) != string(want[0]) || !blobGasPrice.Valid || !maxFee.Valid {
		t.Fatalf("blob tx read back: %d hashes (want %d), blob gas price %v, max fee %v", len(hashes), len(want), blobGasPrice, maxFee)
	}
	if blobGasUsed != blob[colTxBlobGasUsed].(int64) || blobGasUsed != int64(len(want))*blobGas ||
		int8Of(maxBlobFee) != numericValue(blob[colTxMaxFeePerBlobGas]) || int8Of(blobGasPrice) != numericValue(blob[colTxBlobGasPrice]) {
		t.Fatalf("blob tx read back: blob gas used %d (decoded %v, %d hashes), max fee per blob gas %d (decoded %v), blob gas price %d (decoded %v)",
			blobGasUsed, blob[colTxBlobGasUsed], len(want), int8Of(maxBlobFee), blob[colTxMaxFeePerBlobGas], int8Of(blobGasPrice), blob[colTxBlobGasPrice])
	}
	// Transactions of other types have none of the blob fields.
	var blobless int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.transactions WHERE type <> 3 AND (blob_versioned_hashes IS NOT NULL
		OR max_fee_per_blob_gas IS NOT NULL OR blob_gas_used IS NOT NULL OR blob_gas_price IS NOT NULL)`).Scan(&blobless); err != nil || blobless != 0 {
		t.Fatalf("%d non-blob transactions with blob fields (%v)", blobless, err)
	}

	var nullTo, nullMaxFee, legacy int
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE to_address IS NULL AND contract_address IS NOT NULL),
		count(*) FILTER (WHERE max_fee_per_gas IS NULL), count(*) FILTER (WHERE type IN (0, 1))
		FROM `+schema+`.transactions`).Scan(&nullTo, &nullMaxFee, &legacy)
	if err != nil {
		t.Fatal(err)
	}
	if nullTo != creations || nullMaxFee != legacy || legacy == 0 {
		t.Fatalf("creations with NULL to: %d (want %d); NULL max fee %d, legacy %d", nullTo, creations, nullMaxFee, legacy)
	}

	var epoch int64
	if err := conn.QueryRow(ctx, `SELECT extract(epoch FROM timestamp)::bigint FROM `+schema+`.blocks WHERE number = 5`).Scan(&epoch); err != nil {
		t.Fatal(err)
	}
	if epoch != genesisTime+5*blockTime {
		t.Fatalf("block 5 timestamp %d", epoch)
	}
}

// numericValue is a decoded numeric that fits int64 (the synthetic blob
// fees do).
func numericValue(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case pgtype.Numeric:
		return x.Int.Int64()
	}
	return -1
}

// int8Of is a numeric read back from PostgreSQL as an int64 (-2 when it is
// NULL or does not fit).
func int8Of(n pgtype.Numeric) int64 {
	v, err := n.Int64Value()
	if err != nil || !v.Valid {
		return -2
	}
	return v.Int64
}
