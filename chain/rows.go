package chain

// Rows collects decoded rows for a batch of blocks, one list per table in the
// order of the decoder's Tables(). Its memory is carved from chunks it owns:
// Row hands out a []any of the table's width, Bytes the bytes of a bytea
// value, and BoxBytes, BoxInt64 and BoxInt32 the interface values that hold
// them, so that decoding a block costs a few chunk allocations rather than
// several allocations per row, and Reuse lets the next batch decode into the
// same memory with nothing for the garbage collector to do.
//
// Rows is not safe for concurrent use.
type Rows struct {
	widths []int
	tables [][][]any
	values chunks[any]
	bytes  chunks[byte]
	slices boxes[[]byte]
	int64s boxes[int64]
	int32s boxes[int32]
}

// Chunk sizes, in elements: about 1 MB of values and of bytes, and boxes
// for a few thousand rows.
const (
	valueChunk = 64 << 10
	byteChunk  = 1 << 20
	boxChunk   = 16 << 10
)

// NewRows returns Rows for tables.
func NewRows(tables []Table) *Rows {
	r := &Rows{
		widths: make([]int, len(tables)),
		tables: make([][][]any, len(tables)),
		slices: boxes[[]byte]{typ: typeWord([]byte(nil))},
		int64s: boxes[int64]{typ: typeWord(int64(0))},
		int32s: boxes[int32]{typ: typeWord(int32(0))},
	}
	for i, t := range tables {
		r.widths[i] = len(t.Columns)
	}
	return r
}

// Row appends a new row to table i and returns its values slice, of length
// equal to the table's column count and every value nil, for the caller to
// fill.
func (r *Rows) Row(i int) []any {
	row := r.values.take(r.widths[i], valueChunk)
	r.tables[i] = append(r.tables[i], row)
	return row
}

// Bytes returns n bytes for a value of a row, valid until Reset or Reuse.
// Their contents are undefined (they may hold an earlier batch's): the
// caller writes all of them.
func (r *Rows) Bytes(n int) []byte { return r.bytes.take(n, byteChunk) }

// BoxBytes returns b as an interface value, as any(b) does, without
// allocating: the slice header is kept in the rows' memory.
func (r *Rows) BoxBytes(b []byte) any { return r.slices.box(b) }

// BoxInt64 returns x as an interface value, as any(x) does, without
// allocating.
func (r *Rows) BoxInt64(x int64) any { return r.int64s.box(x) }

// BoxInt32 returns x as an interface value, as any(x) does, without
// allocating.
func (r *Rows) BoxInt32(x int32) any { return r.int32s.box(x) }

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

// Reset empties every table and lets go of all memory: values already
// taken out of the rows stay valid.
func (r *Rows) Reset() {
	r.emptyTables()
	r.values.drop()
	r.dropValueMemory()
}

// Recycle empties every table and keeps the memory of the rows' value
// slices for the next rows, but not the memory that values point to (bytes
// and boxes): it is for a Rows whose values have been copied out (as
// export's table selection copies them) and are still in use.
func (r *Rows) Recycle() {
	r.emptyTables()
	r.values.rewind(true)
	r.dropValueMemory()
}

// Reuse empties every table and keeps all its memory for the next rows. It
// is only for a Rows none of whose values is held any more, not even a copy
// of one (export reuses a batch's rows once the batch is committed): the
// next rows overwrite them.
func (r *Rows) Reuse() {
	r.emptyTables()
	r.values.rewind(true)
	r.bytes.rewind(false)
	r.slices.chunks.rewind(false)
	r.int64s.chunks.rewind(false)
	r.int32s.chunks.rewind(false)
}

func (r *Rows) emptyTables() {
	for i := range r.tables {
		clear(r.tables[i])
		r.tables[i] = r.tables[i][:0]
	}
}

func (r *Rows) dropValueMemory() {
	r.bytes.drop()
	r.slices.chunks.drop()
	r.int64s.chunks.drop()
	r.int32s.chunks.drop()
}

// chunks hands out slices carved from chunks, kept for reuse after a
// rewind. The first chunk is a 64th of the largest size and each new one
// twice the last, so that a Rows that holds one small block (as export's
// table selection uses one) allocates little, and a batch's few large
// chunks are kept. A request larger than a quarter of the largest size gets
// an allocation of its own.
type chunks[T any] struct {
	list [][]T // every chunk; each one's length is how much of it is taken
	at   int   // the chunk being filled (when list is not empty)
}

func (c *chunks[T]) take(n, largest int) []T {
	if n > largest/4 {
		return make([]T, n)
	}
	for c.at < len(c.list) {
		ch := c.list[c.at]
		if l := len(ch); l+n <= cap(ch) {
			c.list[c.at] = ch[:l+n]
			return ch[l : l+n : l+n]
		}
		if c.at+1 == len(c.list) {
			break
		}
		c.at++
	}
	size := largest / 64
	if len(c.list) > 0 {
		size = min(2*cap(c.list[len(c.list)-1]), largest)
	}
	ch := make([]T, n, max(size, n))
	c.list = append(c.list, ch)
	c.at = len(c.list) - 1
	return ch[:n:n]
}

// rewind makes every chunk free again, zeroing what was taken of it if
// zero is set.
func (c *chunks[T]) rewind(zero bool) {
	for i, ch := range c.list {
		if zero {
			clear(ch)
		}
		c.list[i] = ch[:0]
	}
	c.at = 0
}

// drop lets go of every chunk.
func (c *chunks[T]) drop() {
	clear(c.list)
	c.list = c.list[:0]
	c.at = 0
}
