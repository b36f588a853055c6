package export

import (
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
)

func TestParseTables(t *testing.T) {
	all := []chain.Table{{Name: "blocks"}, {Name: "transactions"}, {Name: "logs"}, {Name: "withdrawals"}}
	for _, c := range []struct {
		spec string
		want []string
		err  string
	}{
		{"", []string{"blocks", "transactions", "logs", "withdrawals"}, ""},
		{"-logs", []string{"blocks", "transactions", "withdrawals"}, ""},
		{"-logs, -withdrawals", []string{"blocks", "transactions"}, ""},
		{"logs,blocks", []string{"blocks", "logs"}, ""}, // the family's order
		{"logs,logs", []string{"logs"}, ""},
		{"blocks,lgs", nil, `unknown table "lgs" (the tables are blocks, transactions, logs, withdrawals)`},
		{"-lgs", nil, `unknown table "lgs"`},
		{"blocks,-logs", nil, "either name the tables to export"},
		{"-blocks,-transactions,-logs,-withdrawals", nil, "leaves no table"},
		{"blocks,", nil, "empty table name"},
	} {
		got, err := ParseTables(c.spec, all)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseTables(%q) = %v, %v; want an error saying %q", c.spec, got, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseTables(%q) = %v, %v; want %v", c.spec, got, err, c.want)
		}
	}
}

// TestSelectKeepsTheChosenTablesRows: a selection's Tables are the chosen
// ones and its rows those the full decoder gives for them; a failed block
// adds none.
func TestSelectKeepsTheChosenTablesRows(t *testing.T) {
	dec, err := Select(testDecoder{}, []string{"items"})
	if err != nil {
		t.Fatal(err)
	}
	if ts := dec.Tables(); len(ts) != 1 || ts[0].Name != "items" {
		t.Fatalf("Tables() = %v, want items alone", ts)
	}
	rows := chain.NewRows(dec.Tables())
	for h := uint64(1); h <= 3; h++ {
		if err := dec.Decode(h, []byte("n=2"), rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := dec.Decode(4, []byte("bad"), rows); err == nil {
		t.Fatal("a bad record decoded")
	}
	if rows.Len(0) != 6 {
		t.Fatalf("%d item rows, want 6", rows.Len(0))
	}
	for i, r := range rows.Table(0) {
		if r[0] != int64(i/2+1) || r[1] != int32(i%2) || r[2] != "ok" {
			t.Errorf("row %d = %v", i, r)
		}
	}
	if same, err := Select(testDecoder{}, []string{"items", "blocks"}); err != nil || same != (testDecoder{}) {
		t.Errorf("selecting every table gives %v, %v; want the decoder itself", same, err)
	}
	if _, err := Select(testDecoder{}, []string{"itemz"}); err == nil || !strings.Contains(err.Error(), `"itemz"`) {
		t.Errorf("an unknown table: %v", err)
	}
	if all := AllTables(dec); len(all) != 2 {
		t.Errorf("AllTables of a selection: %d tables, want 2", len(all))
	}
}
