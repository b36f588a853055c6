package export

import (
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
)

func TestIndexSetSelect(t *testing.T) {
	tables := []chain.Table{
		{Name: "blocks", Indexes: []chain.Index{{Name: "blocks_hash_idx", Minimal: true}}},
		{Name: "events", Indexes: []chain.Index{{Name: "events_type_idx"}, {Name: "events_attributes_idx"}}},
	}
	names := func(ts []chain.Table) []string {
		var out []string
		for _, t := range ts {
			for _, ix := range t.Indexes {
				out = append(out, ix.Name)
			}
		}
		return out
	}
	for _, tc := range []struct {
		flag string
		want []string
	}{
		{"", []string{"blocks_hash_idx", "events_type_idx", "events_attributes_idx"}},
		{"Default", []string{"blocks_hash_idx", "events_type_idx", "events_attributes_idx"}},
		{"minimal", []string{"blocks_hash_idx"}},
		{" none ", nil},
		{"events_attributes_idx, blocks_hash_idx,events_attributes_idx", []string{"blocks_hash_idx", "events_attributes_idx"}},
	} {
		var s IndexSet
		if err := s.Set(tc.flag); err != nil {
			t.Fatalf("%q: %v", tc.flag, err)
		}
		if err := s.Check(tables); err != nil {
			t.Fatalf("%q: %v", tc.flag, err)
		}
		if got := names(s.Select(tables)); !slices.Equal(got, tc.want) {
			t.Errorf("--indexes %q selects %v, want %v", tc.flag, got, tc.want)
		}
	}
	if got := names(tables); len(got) != 3 {
		t.Fatalf("Select changed its argument: %v", got)
	}
	var s IndexSet
	if err := s.Set("events_type_idx,events_tpye_idx"); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(tables); err == nil || !strings.Contains(err.Error(), "events_tpye_idx") || !strings.Contains(err.Error(), "events_attributes_idx") {
		t.Fatalf("an unknown name: got %v, want an error naming it and the known ones", err)
	}
	if err := s.Set("a,,b"); err == nil {
		t.Fatal("an empty name in the list was accepted")
	}
}
