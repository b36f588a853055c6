package aptos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/aptos"
	"github.com/blockhaul/blockhaul/chain/aptossynth"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// TestTablesInPostgres creates the tables and their indexes in a real
// PostgreSQL, COPYs the rows of the recorded mainnet blocks and of
// synthetic ones, and reads back what users query: a transaction by hash,
// an account's transactions, events by type, a failed transaction's
// status, jsonb payloads, NULLs of module events.
func TestTablesInPostgres(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Connect(t)
	const schemaName = "aptos data"
	schema := chain.QuoteIdent(schemaName)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	d := aptos.NewDecoder()
	tables := d.Tables()
	for _, tb := range tables {
		if _, err := conn.Exec(ctx, tb.CreateSQL(schema)); err != nil {
			t.Fatalf("%s: %v", tb.Name, err)
		}
		for _, ix := range tb.Indexes {
			if _, err := conn.Exec(ctx, tb.IndexSQL(schema, ix)); err != nil {
				t.Fatalf("%s: %v", ix.Name, err)
			}
		}
	}
	rows := chain.NewRows(tables)
	for _, h := range realBlocks {
		raw := readReal(t, fmt.Sprintf("mainnet_block_%d.json", h))
		e := parseEnvelope(t, raw)
		rec := aptos.MarshalRecord(raw, nil, &aptos.Parent{BlockHash: assembledParentHash(h), LastVersion: fmt.Sprint(e.u64(t, "first_version") - 1)})
		if err := d.Decode(h, rec, rows); err != nil {
			t.Fatal(err)
		}
	}
	syn := aptossynth.New(aptossynth.Config{Seed: 3})
	for h := uint64(0); h < 20; h++ {
		if err := d.Decode(h, mustRecord(t, syn, h), rows); err != nil {
			t.Fatal(err)
		}
	}
	for i, tb := range tables {
		n, err := conn.CopyFrom(ctx, pgx.Identifier{schemaName, tb.Name}, tb.ColumnNames(), pgx.CopyFromRows(rows.Table(i)))
		if err != nil || int(n) != rows.Len(i) {
			t.Fatalf("copy %s: %d of %d rows, %v", tb.Name, n, rows.Len(i), err)
		}
	}
	q := func(sql string, args ...any) string {
		t.Helper()
		var s string
		if err := conn.QueryRow(ctx, fmt.Sprintf(sql, schema), args...).Scan(&s); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return s
	}
	// The failed transaction of block 456015808, by its hash.
	var tx map[string]any
	json.Unmarshal(readReal(t, "mainnet_transaction_3556737308.json"), &tx)
	if got, want := q(`SELECT version || ' ' || success || ' ' || gas_used || ' ' || block_height FROM %s.transactions WHERE hash = $1`, hexBytes(t, tx["hash"])),
		fmt.Sprintf("%s false %s 456015808", tx["version"], tx["gas_used"]); got != want {
		t.Fatalf("the failed transaction by hash: %q, want %q (its own answer, recorded apart from the block)", got, want)
	}
	if got, want := q(`SELECT entry_function_id || ' ' || signature_type || ' ' || (payload->>'type') FROM %s.user_transactions WHERE sender = $1 AND sequence_number = $2`,
		hexBytes(t, tx["sender"]), tx["sequence_number"]), fmt.Sprintf("%s fee_payer_signature entry_function_payload", tx["payload"].(map[string]any)["function"]); got != want {
		t.Fatalf("the sender's transaction: %q, want %q", got, want)
	}
	fees := 0
	for _, h := range realBlocks {
		for _, x := range parseEnvelope(t, readReal(t, fmt.Sprintf("mainnet_block_%d.json", h))).txs {
			var tx struct{ Events []struct{ Type string } }
			json.Unmarshal(x, &tx)
			for _, e := range tx.Events {
				if e.Type == "0x1::transaction_fee::FeeStatement" {
					fees++
				}
			}
		}
	}
	if got := q(`SELECT count(*) || ' ' || count(account_address) FROM %s.events WHERE type = '0x1::transaction_fee::FeeStatement' AND block_height > 1000`); got != fmt.Sprintf("%d 0", fees) || fees == 0 {
		t.Fatalf("fee statements (module events) %q, want %d without handles", got, fees)
	}
	if got := q(`SELECT string_agg(height || ':' || epoch || ':' || round, ' ' ORDER BY height) FROM %s.blocks WHERE height > 1000`); got != "57347454:2708:7819 445814139:13086:17211 456015808:13223:51888" {
		t.Fatalf("blocks %q", got)
	}
	if got := q(`SELECT count(*) FROM %s.write_set_changes WHERE type = 'delete_table_item' AND handle IS NOT NULL AND address IS NULL AND data ? 'key'`); got == "0" {
		t.Fatal("no deleted table item")
	}
}
