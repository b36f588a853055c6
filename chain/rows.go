package chain

// Rows collects decoded rows for a batch of blocks, one list per table in the
// order of the decoder's Tables(). Values are slab-allocated: Row hands out a
// []any of the table's width carved from a shared backing array, so decoding
// a block costs no per-row slice allocation.
//
// Rows is not safe for concurrent use. Reset keeps the memory for reuse.
type Rows struct {
	widths []int
	tables [][][]any
	slab   []any
}

const slabSize = 64 << 10 // values per slab chunk

// NewRows returns Rows for tables.
func NewRows(tables []Table) *Rows {
	r := &Rows{widths: make([]int, len(tables)), tables: make([][][]any, len(tables))}
	for i, t := range tables {
		r.widths[i] = len(t.Columns)
	}
	return r
}

// Row appends a new row to table i and returns its values slice, of length
// equal to the table's column count, for the caller to fill.
func (r *Rows) Row(i int) []any {
	w := r.widths[i]
	if len(r.slab)+w > cap(r.slab) {
		r.slab = make([]any, 0, max(slabSize, w))
	}
	n := len(r.slab)
	r.slab = r.slab[:n+w]
	row := r.slab[n : n+w : n+w]
	r.tables[i] = append(r.tables[i], row)
	return row
}

// Table returns the rows of table i.
func (r *Rows) Table(i int) [][]any { return r.tables[i] }

// Len returns the number of rows of table i.
func (r *Rows) Len(i int) int { return len(r.tables[i]) }

// Total returns the number of rows over all tables.
func (r *Rows) Total() int {
	n := 0
	for _, t := range r.tables {
		n += len(t)
	}
	return n
}

// Truncate drops every row appended after the given per-table lengths; a
// decoder uses it to discard the partial rows of a block that failed.
func (r *Rows) Truncate(lens []int) {
	for i := range r.tables {
		r.tables[i] = r.tables[i][:lens[i]]
	}
}

// Lens returns the current per-table row counts (for Truncate).
func (r *Rows) Lens() []int {
	out := make([]int, len(r.tables))
	for i, t := range r.tables {
		out[i] = len(t)
	}
	return out
}

// Reset empties every table. Previously returned rows must no longer be used.
func (r *Rows) Reset() {
	for i := range r.tables {
		clear(r.tables[i])
		r.tables[i] = r.tables[i][:0]
	}
	r.slab = nil
}

// Recycle empties every table and keeps the memory of the last slab chunk
// for the next rows. Unlike Reset it reuses the values' backing array, so
// it is only for a Rows whose rows nobody holds any more (their values
// copied out, as export's table selection does).
func (r *Rows) Recycle() {
	for i := range r.tables {
		clear(r.tables[i])
		r.tables[i] = r.tables[i][:0]
	}
	clear(r.slab)
	r.slab = r.slab[:0]
}
