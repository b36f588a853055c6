package export

import (
	"fmt"
	"slices"
	"strings"

	"github.com/blockhaul/blockhaul/chain"
)

// IndexSet is which of the tables' secondary indexes blockhaul creates and
// manages (--indexes): the default set (every index the family declares),
// the minimal set (lookups by hash), none, or a list of index names. The
// zero value is the default set. Indexes outside the set are neither
// created, nor dropped for a deferred fill, nor built; ones that already
// exist stay as they are.
type IndexSet struct {
	kind  string   // "default", "minimal", "none" or "list"
	names []string // kind "list": index names, as given
}

// Index sets by name.
var (
	IndexesDefault = IndexSet{kind: "default"}
	IndexesMinimal = IndexSet{kind: "minimal"}
	IndexesNone    = IndexSet{kind: "none"}
)

// ParseIndexSet reads --indexes: default, minimal, none, or index names
// separated by commas (checked against the family's tables by Check).
func ParseIndexSet(s string) (IndexSet, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch v {
	case "", "default":
		return IndexesDefault, nil
	case "minimal":
		return IndexesMinimal, nil
	case "none":
		return IndexesNone, nil
	}
	var names []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return IndexSet{}, fmt.Errorf("want default, minimal, none or index names separated by commas, got %q", s)
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return IndexSet{kind: "list", names: names}, nil
}

// String implements pflag.Value.
func (s *IndexSet) String() string {
	switch s.kind {
	case "":
		return "default"
	case "list":
		return strings.Join(s.names, ",")
	}
	return s.kind
}

// Set implements pflag.Value.
func (s *IndexSet) Set(v string) error {
	p, err := ParseIndexSet(v)
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// Type implements pflag.Value.
func (s *IndexSet) Type() string { return "set" }

// Check reports names of a list that no table of tables declares, with the
// names it could have meant.
func (s IndexSet) Check(tables []chain.Table) error {
	if s.kind != "list" {
		return nil
	}
	var known []string
	for _, t := range tables {
		for _, ix := range t.Indexes {
			known = append(known, ix.Name)
		}
	}
	var unknown []string
	for _, n := range s.names {
		if !slices.Contains(known, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown index %s (this chain's indexes: %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return nil
}

// Has reports whether ix is in the set.
func (s IndexSet) Has(ix chain.Index) bool {
	switch s.kind {
	case "", "default":
		return true
	case "minimal":
		return ix.Minimal
	case "list":
		return slices.Contains(s.names, ix.Name)
	}
	return false
}

// Select returns tables with only the indexes of the set; tables itself is
// not changed.
func (s IndexSet) Select(tables []chain.Table) []chain.Table {
	out := make([]chain.Table, len(tables))
	for i, t := range tables {
		var keep []chain.Index
		for _, ix := range t.Indexes {
			if s.Has(ix) {
				keep = append(keep, ix)
			}
		}
		t.Indexes = keep
		out[i] = t
	}
	return out
}
