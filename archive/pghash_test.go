package archive

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestPGHashMatchesServer: each hash computed in Go equals the server's own
// function on the same value, over lengths around the 12-byte blocks, signs
// and halves of integers, numerics of every shape, and jsonb with keys to
// sort, duplicates, escapes, numbers and nesting.
func TestPGHashMatchesServer(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Connect(t)
	order := probeOrder(t, conn)
	seeds := []int64{0, 1, -1, 0x0123456789abcdef, math.MinInt64}
	server := func(sql string, args ...any) uint64 {
		t.Helper()
		var v int64
		if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
			t.Fatalf("%s %v: %v", sql, args, err)
		}
		return uint64(v)
	}
	for n := 0; n <= 40; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte((i*37+n)%126 + 1)
		}
		for _, s := range seeds {
			if got, want := pgHashBytes(order, b, uint64(s)), server("SELECT hashtextextended($1::text, $2)", string(b), s); got != want {
				t.Fatalf("text of %d, seed %d: %x, server %x", n, s, got, want)
			}
		}
	}
	// bytea has no hash callable from SQL but through a record (31·0 + h).
	for n := 0; n <= 40; n += 3 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(0xff - i*7)
		}
		if got, want := pgHashBytes(order, b, 0), server("SELECT hash_record_extended(ROW($1::bytea), 0)", b); got != want {
			t.Fatalf("bytea of %d: %x, server %x", n, got, want)
		}
	}
	for _, v := range []int64{0, 1, -1, 42, math.MaxInt32, math.MinInt32, 1 << 32, -(1 << 32) - 5, math.MaxInt64, math.MinInt64} {
		for _, s := range seeds {
			if got, want := pgHashInt8(v, uint64(s)), server("SELECT hashint8extended($1::int8, $2)", v, s); got != want {
				t.Fatalf("int8 %d seed %d: %x, server %x", v, s, got, want)
			}
			if int64(int32(v)) == v {
				if got, want := pgHashUint32(uint32(int32(v)), uint64(s)), server("SELECT hashint4extended($1::int4, $2)", v, s); got != want {
					t.Fatalf("int4 %d seed %d: %x, server %x", v, s, got, want)
				}
			}
		}
	}
	for _, num := range []string{"0", "-0", "1", "-1", "10000", "1e4", "12345.678", "0.0001", "0.00012", "-98765432109876543210.5", "1.50", "1.5", "3e-7", "123456789012345678901234567890", "NaN"} {
		var bin []byte
		if err := conn.QueryRow(ctx, "SELECT numeric_send($1::numeric)", num).Scan(&bin); err != nil {
			t.Fatal(err)
		}
		for _, s := range seeds {
			got, err := pgHashNumeric(order, bin, uint64(s))
			if err != nil {
				t.Fatalf("numeric %s: %v", num, err)
			}
			if want := server("SELECT hash_numeric_extended($1::numeric, $2)", num, s); got != want {
				t.Fatalf("numeric %s seed %d: %x, server %x", num, s, got, want)
			}
		}
	}
	docs := []string{
		`[]`, `{}`, `"x"`, `7`, `null`, `true`, `false`, `-0.0`, `[[]]`, `[{}]`,
		`[["sender","cosmos1abc",true],["amount","100uatom",false]]`,
		`{"b":1,"a":2,"aa":[1,2,{"z":null,"y":"é\u00e9\ud83d\ude00"}],"a":3}`,
		`{"key":"with \"quotes\" and \\ and \/ and \n\t\r\b\f"}`,
		` { "n" : [ 1e3 , 1E-3, 12.5e+2, -7, 0, 100000000000000000000000 ] } `,
		`[1.10, 1.1, 10, 0.0001]`, `{"":""}`, `[null, [null], {"x": {}}]`,
	}
	var j jsonbHasher
	for _, doc := range docs {
		for _, s := range seeds {
			got, err := j.hash([]byte(doc), uint64(s))
			if err != nil {
				t.Fatalf("jsonb %s: %v", doc, err)
			}
			if want := server("SELECT jsonb_hash_extended($1::jsonb, $2)", doc, s); got != want {
				t.Fatalf("jsonb %s seed %d: %x, server %x", doc, s, got, want)
			}
		}
	}
	for _, arr := range []string{"{}", "{a}", "{a,NULL,bcd}", `{"x y","",z}`} {
		var bin []byte
		if err := conn.QueryRow(ctx, "SELECT array_send($1::text[])", arr).Scan(&bin); err != nil {
			t.Fatal(err)
		}
		for _, s := range seeds {
			got, err := pgHashArray(bin, uint64(s), func(e []byte, seed uint64) (uint64, error) { return pgHashBytes(order, e, seed), nil })
			if err != nil {
				t.Fatalf("array %s: %v", arr, err)
			}
			if want := server("SELECT hash_array_extended($1::text[], $2)", arr, s); got != want {
				t.Fatalf("array %s seed %d: %x, server %x", arr, s, got, want)
			}
		}
	}
}

// TestRowDigestMatchesServerOnRecordedEVMBlocks: the rows of a real geth
// node's blocks (recorded, with their receipts), written as pgx writes
// them, digest in Go per height as PostgreSQL digests them: every table,
// every height.
func TestRowDigestMatchesServerOnRecordedEVMBlocks(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Connect(t)
	order := probeOrder(t, conn)
	dir := filepath.Join("..", "chain", "evm", "testdata", "geth-dev")
	result := func(name string) json.RawMessage {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Result json.RawMessage }
		if err := json.Unmarshal(b, &env); err != nil || env.Result == nil {
			t.Fatalf("%s: no result (%v)", name, err)
		}
		return env.Result
	}
	dec := evm.NewDecoder()
	tables := dec.Tables()
	rows := chain.NewRows(tables)
	var last uint64
	for h := uint64(0); ; h++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("block_%d.json", h))); err != nil {
			break
		}
		if err := dec.Decode(h, evm.MarshalRecord(result(fmt.Sprintf("block_%d.json", h)), result(fmt.Sprintf("receipts_%d.json", h))), rows); err != nil {
			t.Fatalf("height %d: %v", h, err)
		}
		last = h
	}
	schema := "recorded_evm"
	if err := export.EnsureSchema(ctx, conn, schema, tables, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA recorded_evm CASCADE") })
	oids, err := export.ColumnOIDs(ctx, conn, tables)
	if err != nil {
		t.Fatal(err)
	}
	for i, tb := range tables {
		if len(rows.Table(i)) == 0 {
			if tb.Name != "withdrawals" { // a dev chain withdraws nothing
				t.Fatalf("table %s: no rows in the recorded blocks 0-%d", tb.Name, last)
			}
			continue
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{schema, tb.Name}, tb.ColumnNames(), pgx.CopyFromRows(rows.Table(i))); err != nil {
			t.Fatalf("copy %s: %v", tb.Name, err)
		}
		enc, err := export.NewRowEncoder(oids, tb)
		if err != nil {
			t.Fatal(err)
		}
		dig, err := newRowDigester(tb, oids, order)
		if err != nil {
			t.Fatal(err)
		}
		mine := map[uint64]*chunkAcc{}
		hcol := slices.Index(tb.ColumnNames(), tb.HeightColumn)
		var buf []byte
		for _, row := range rows.Table(i) {
			if buf, err = enc.AppendRow(buf[:0], row); err != nil {
				t.Fatal(err)
			}
			v, err := dig.hash(buf)
			if err != nil {
				t.Fatal(err)
			}
			h := uint64(row[hcol].(int64))
			if mine[h] == nil {
				mine[h] = &chunkAcc{}
			}
			mine[h].rows++
			mine[h].sum.add(v)
		}
		server, err := heightDigests(ctx, conn, schema, tb, 0, last)
		if err != nil {
			t.Fatal(err)
		}
		if len(server) != len(mine) {
			t.Fatalf("%s: %d heights in PostgreSQL, %d digested", tb.Name, len(server), len(mine))
		}
		for h, s := range server {
			if m := mine[h]; m == nil || m.rows != s.rows || m.sum.String() != s.sum {
				t.Errorf("%s height %d: PostgreSQL %d rows %s, Go %+v", tb.Name, h, s.rows, s.sum, m)
			}
		}
	}
}

// probeOrder is the test server's word order, as verify asks it.
func probeOrder(t *testing.T, conn *pgx.Conn) wordOrder {
	t.Helper()
	order, err := serverWordOrder(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	return order
}

// The server's word order decides bytes', text's, numerics' and jsonb's
// hashes (PostgreSQL reads keys in native words); verify asks the server
// which and computes in it (before: always little-endian, so every table
// of a big-endian server would have differed). This server is
// little-endian, as its CPU is. No big-endian server is at hand: the
// big-endian hash is checked against the little-endian one of the same
// words byte-swapped, which PostgreSQL's code makes equal for keys whose
// tail fills whole words, and is not equal for the others.
func TestServerWordOrder(t *testing.T) {
	conn := pgtest.Connect(t)
	if o := probeOrder(t, conn); o != nativeOrder() {
		t.Errorf("the server (on this %s machine) reads words %s", nativeOrder(), o)
	}
	for n := 0; n <= 48; n++ {
		k := make([]byte, n)
		for i := range k {
			k[i] = byte(i*29 + n)
		}
		swapped := slices.Clone(k)
		for i := 0; i+4 <= n; i += 4 {
			slices.Reverse(swapped[i : i+4])
		}
		be, le := pgHashBytes(bigEndianWords, k, 5), pgHashBytes(littleEndianWords, swapped, 5)
		if n%4 == 0 && be != le {
			t.Errorf("%d bytes: big-endian %x, little-endian of the swapped words %x", n, be, le)
		}
		if n%4 != 0 && be == le && n > 0 {
			t.Errorf("%d bytes: the tail hashes alike in both orders (%x)", n, be)
		}
	}
	// A server whose hashes are neither order's: said, never guessed.
	if _, err := serverWordOrder(context.Background(), fixedRow{1, 2}); !errors.Is(err, errUnknownWordOrder) {
		t.Errorf("a server hashing the probe to 1 and 2: %v, want errUnknownWordOrder", err)
	}
	if pgHashNumericDigits(bigEndianWords, []int16{1234, 5678}, 0, 0) != pgHashBytes(bigEndianWords, []byte{0x04, 0xd2, 0x16, 0x2e}, 0) {
		t.Error("a big-endian server's numeric digits are big-endian int16s")
	}
}

func nativeOrder() wordOrder {
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		return littleEndianWords
	}
	return bigEndianWords
}

// fixedRow answers every query with one row of its values.
type fixedRow []int64

func (r fixedRow) QueryRow(context.Context, string, ...any) pgx.Row { return r }

func (r fixedRow) Scan(dest ...any) error {
	for i, d := range dest {
		*d.(*int64) = r[i]
	}
	return nil
}
