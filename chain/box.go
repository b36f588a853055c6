package chain

import "unsafe"

// An interface value is two words: its dynamic type and a pointer to its
// value. Converting a []byte or an int64 to any copies the value into a new
// heap object of its own (24 or 8 bytes), which at EVM density is several
// allocations per row, and most of what the garbage collector has to do
// while an export decodes. boxes keeps those copies in chunks instead and
// builds the interface value around a pointer to the copy: the same dynamic
// type and value as the conversion gives, for every reader (type switches,
// reflect, pgx). As the runtime requires of a value held by an interface,
// a copy is never written again while it can be reached: only after a
// rewind (Rows.Reuse), when no row and no copy of a value may be held.
type boxes[T any] struct {
	chunks chunks[T]
	typ    unsafe.Pointer // T's type word
}

// eface is the layout of an empty interface value (runtime.eface).
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

// typeWord returns the type word of v's dynamic type.
func typeWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

func (b *boxes[T]) box(x T) any {
	p := &b.chunks.take(1, boxChunk)[0]
	*p = x
	var v any
	*(*eface)(unsafe.Pointer(&v)) = eface{typ: b.typ, data: unsafe.Pointer(p)}
	return v
}
