// Package chaintest holds small fixtures shared by the engines' tests.
package chaintest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
)

// HashOf is a deterministic 32-byte block hash for height h, so that a test
// chain's block h has ParentHash HashOf(h-1).
func HashOf(h uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h)
	s := sha256.Sum256(b[:])
	return s[:]
}

// ParseGethRecord reads an EVM raw record as encoding/json sees it, to check
// its shapes apart from the decoder: the block object, its transactions and
// the receipts. A record that is not JSON fails the test.
func ParseGethRecord(t testing.TB, raw []byte) (block map[string]json.RawMessage, txs, receipts []map[string]json.RawMessage) {
	t.Helper()
	var r struct {
		Block    map[string]json.RawMessage   `json:"block"`
		Receipts []map[string]json.RawMessage `json:"receipts"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("record is not valid JSON: %v", err)
	}
	if err := json.Unmarshal(r.Block["transactions"], &txs); err != nil {
		t.Fatalf("transactions: %v", err)
	}
	return r.Block, txs, r.Receipts
}

// RecordedResult reads the result of a JSON-RPC answer recorded at path
// (testdata/…), its bytes untouched. A file without a result fails the
// test.
func RecordedResult(t testing.TB, path string) json.RawMessage {
	t.Helper()
	env := ReadJSON[struct{ Result json.RawMessage }](t, path)
	if env.Result == nil {
		t.Fatalf("%s: no result", path)
	}
	return env.Result
}

// ReadJSON reads the JSON file at path into a T; a file that cannot be
// read or is not JSON of that shape fails the test.
func ReadJSON[T any](t testing.TB, path string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// ColumnIndex is the position of column name in table's rows; a table
// without it fails the test.
func ColumnIndex(t testing.TB, table chain.Table, name string) int {
	t.Helper()
	for i, c := range table.Columns {
		if c.Name == name {
			return i
		}
	}
	t.Fatalf("table %s has no column %s", table.Name, name)
	return -1
}

// OrderBy returns the ORDER BY of pgtest.Fingerprint for tables: each table's
// primary key. A table without one fails the test.
func OrderBy(t testing.TB, tables []chain.Table) map[string]string {
	t.Helper()
	out := make(map[string]string, len(tables))
	for _, tb := range tables {
		if len(tb.PrimaryKey) == 0 {
			t.Fatalf("chaintest: table %s has no primary key to order by", tb.Name)
		}
		out[tb.Name] = strings.Join(tb.PrimaryKey, ", ")
	}
	return out
}
