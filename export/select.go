package export

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/blockhaul/blockhaul/chain"
)

// ParseTables reads a table selection against the family's tables: a
// comma-separated list of the tables to export ("blocks,transactions"), or
// of tables to leave out, each with a leading "-" ("-logs"); empty means
// every table. It returns the names selected, in the family's order. An
// unknown name is refused naming it and the valid ones; so is a list that
// mixes both forms, or one that leaves no table.
func ParseTables(spec string, all []chain.Table) ([]string, error) {
	valid := tableNames(all)
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return valid, nil
	}
	var include, exclude []string
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		name, minus := strings.CutPrefix(item, "-")
		if name == "" {
			return nil, fmt.Errorf("empty table name in %q", spec)
		}
		if !slices.Contains(valid, name) {
			return nil, unknownTable(name, valid)
		}
		if minus {
			exclude = append(exclude, name)
		} else {
			include = append(include, name)
		}
	}
	if len(include) > 0 && len(exclude) > 0 {
		return nil, fmt.Errorf("%q both lists tables and leaves some out: either name the tables to export (blocks,transactions) or those to leave out (-logs)", spec)
	}
	var out []string
	for _, name := range valid {
		if len(include) > 0 && slices.Contains(include, name) || len(exclude) > 0 && !slices.Contains(exclude, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q leaves no table to export", spec)
	}
	return out, nil
}

func unknownTable(name string, valid []string) error {
	return fmt.Errorf("unknown table %q (the tables are %s)", name, strings.Join(valid, ", "))
}

func tableNames(tables []chain.Table) []string {
	out := make([]string, len(tables))
	for i, t := range tables {
		out[i] = t.Name
	}
	return out
}

// Select returns dec restricted to the named tables (see ParseTables): its
// Tables are those, in dec's order, and Decode keeps only their rows. With
// every table named it returns dec itself. Export, checkpoints and
// rollbacks then see only the selected tables: a table left out is neither
// created nor written.
//
// The selection decodes every table of dec into rows of its own and copies
// the selected ones' values out: what it saves is PostgreSQL's work and
// space, not the decoder's.
func Select(dec Decoder, names []string) (Decoder, error) {
	all := dec.Tables()
	valid := tableNames(all)
	for _, n := range names {
		if !slices.Contains(valid, n) {
			return nil, fmt.Errorf("export: %w", unknownTable(n, valid))
		}
	}
	s := &selection{dec: dec, all: all}
	for i, t := range all {
		if slices.Contains(names, t.Name) {
			s.keep = append(s.keep, i)
			s.tables = append(s.tables, t)
		}
	}
	switch {
	case len(s.keep) == 0:
		return nil, errors.New("export: no table selected")
	case len(s.keep) == len(all):
		return dec, nil
	}
	s.pool.New = func() any { return chain.NewRows(all) }
	if _, ok := dec.(BlockVerifier); ok {
		return verifyingSelection{s}, nil
	}
	return s, nil
}

// AllTables returns every table of dec's family, also when dec is a
// selection of them: what a rollback must clear whatever this process
// writes.
func AllTables(dec Decoder) []chain.Table {
	switch s := dec.(type) {
	case *selection:
		return slices.Clone(s.all)
	case verifyingSelection:
		return slices.Clone(s.all)
	}
	return dec.Tables()
}

// selection is a Decoder restricted to some of its tables. It is safe for
// concurrent use, as the decoder it wraps is.
type selection struct {
	dec    Decoder
	all    []chain.Table
	keep   []int // positions in all of the selected tables
	tables []chain.Table
	pool   sync.Pool // *chain.Rows over all, one per concurrent Decode
}

func (s *selection) Family() chain.Family  { return s.dec.Family() }
func (s *selection) Tables() []chain.Table { return slices.Clone(s.tables) }

func (s *selection) Decode(height uint64, raw []byte, rows *chain.Rows) error {
	full := s.pool.Get().(*chain.Rows)
	defer func() {
		full.Recycle()
		s.pool.Put(full)
	}()
	if err := s.dec.Decode(height, raw, full); err != nil {
		return err
	}
	for j, i := range s.keep {
		for _, src := range full.Table(i) {
			copy(rows.Row(j), src)
		}
	}
	return nil
}

// verifyingSelection is a selection of a decoder that is also a
// BlockVerifier, and stays one (see blame).
type verifyingSelection struct{ *selection }

func (s verifyingSelection) VerifyBlock(raw []byte) ([]byte, error) {
	return s.dec.(BlockVerifier).VerifyBlock(raw)
}
