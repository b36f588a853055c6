package chain

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"testing"
)

func testRows() *Rows {
	return NewRows([]Table{{Name: "a", Columns: make([]Column, 3)}, {Name: "b", Columns: make([]Column, 2)}})
}

// A boxed value is the value any() would hold: the same dynamic type, the
// same contents, for type switches, reflect and formatting alike.
func TestBoxesHoldTheValue(t *testing.T) {
	r := testRows()
	b := []byte{1, 2, 3}
	cases := []struct {
		boxed, want any
	}{
		{r.BoxBytes(b), any(b)},
		{r.BoxBytes([]byte{}), any([]byte{})},
		{r.BoxBytes(nil), any([]byte(nil))},
		{r.BoxInt64(-1 << 62), any(int64(-1 << 62))},
		{r.BoxInt64(7), any(int64(7))},
		{r.BoxInt32(1 << 30), any(int32(1 << 30))},
	}
	for i, c := range cases {
		if reflect.TypeOf(c.boxed) != reflect.TypeOf(c.want) || !reflect.DeepEqual(c.boxed, c.want) {
			t.Errorf("case %d: boxed %#v (%T), want %#v (%T)", i, c.boxed, c.boxed, c.want, c.want)
		}
		if fmt.Sprintf("%v", c.boxed) != fmt.Sprintf("%v", c.want) {
			t.Errorf("case %d: prints %v, want %v", i, c.boxed, c.want)
		}
	}
	switch v := cases[0].boxed.(type) {
	case []byte:
		if &v[0] != &b[0] {
			t.Error("BoxBytes copied the bytes; want the same slice")
		}
	default:
		t.Fatalf("type switch sees %T", v)
	}
	if x, ok := cases[3].boxed.(int64); !ok || x != -1<<62 {
		t.Errorf("assertion gives %d, %v", x, ok)
	}
	if cases[2].boxed.([]byte) != nil {
		t.Error("a boxed nil slice is not nil")
	}
}

// Boxes and bytes survive garbage collection for as long as their values
// are reachable, across many chunks.
func TestBoxesSurviveGC(t *testing.T) {
	r := testRows()
	const n = 100_000
	vals := make([]any, 0, 2*n)
	for i := range n {
		b := r.Bytes(8)
		for j := range b {
			b[j] = byte(i + j)
		}
		vals = append(vals, r.BoxBytes(b), r.BoxInt64(int64(i)*1000))
	}
	runtime.GC()
	runtime.GC()
	for i := range n {
		b := vals[2*i].([]byte)
		for j := range b {
			if b[j] != byte(i+j) {
				t.Fatalf("value %d byte %d = %d after GC", i, j, b[j])
			}
		}
		if x := vals[2*i+1].(int64); x != int64(i)*1000 {
			t.Fatalf("int %d = %d after GC", i, x)
		}
	}
}

// Reuse decodes the next batch into the same memory, with no allocation;
// every new row starts out empty.
func TestReuseKeepsMemory(t *testing.T) {
	r := testRows()
	fill := func() {
		for i := range 1000 {
			row := r.Row(i % 2)
			b := r.Bytes(32)
			row[0] = r.BoxBytes(b)
			row[1] = r.BoxInt64(int64(i) << 20)
			if i%2 == 0 {
				row[2] = r.BoxInt32(int32(i) << 10)
			}
		}
	}
	fill()
	if n := testing.AllocsPerRun(5, func() { r.Reuse(); fill() }); n != 0 {
		t.Errorf("a reused batch allocates %.0f times; want none", n)
	}
	r.Reuse()
	if r.Total() != 0 {
		t.Fatalf("%d rows after Reuse", r.Total())
	}
	row := r.Row(0)
	for i, v := range row {
		if v != nil {
			t.Errorf("reused row value %d = %v, want nil", i, v)
		}
	}
}

// Reset and Recycle never hand out memory that a value taken out before
// points to.
func TestResetAndRecycleKeepTakenValues(t *testing.T) {
	for _, name := range []string{"Reset", "Recycle"} {
		r := testRows()
		row := r.Row(0)
		b := r.Bytes(4)
		copy(b, "keep")
		row[0], row[1] = r.BoxBytes(b), r.BoxInt64(1<<40)
		kept := append([]any(nil), row...)
		if name == "Reset" {
			r.Reset()
		} else {
			r.Recycle()
		}
		for range 10_000 {
			nb := r.Bytes(4)
			copy(nb, "over")
			nr := r.Row(0)
			nr[0], nr[1] = r.BoxBytes(nb), r.BoxInt64(-1)
		}
		if got := kept[0].([]byte); !bytes.Equal(got, []byte("keep")) {
			t.Errorf("%s: a value taken out reads %q", name, got)
		}
		if got := kept[1].(int64); got != 1<<40 {
			t.Errorf("%s: an int taken out reads %d", name, got)
		}
	}
}

// Requests of every size are served, the large ones on their own.
func TestBytesSizes(t *testing.T) {
	r := testRows()
	for _, n := range []int{0, 1, byteChunk / 64, byteChunk / 4, byteChunk/4 + 1, 3 * byteChunk} {
		b := r.Bytes(n)
		if len(b) != n || cap(b) != n {
			t.Errorf("Bytes(%d): len %d cap %d", n, len(b), cap(b))
		}
		for i := range b {
			b[i] = 0xff
		}
	}
	a, b := r.Bytes(16), r.Bytes(16)
	copy(a, bytes.Repeat([]byte{1}, 16))
	copy(b, bytes.Repeat([]byte{2}, 16))
	if a[15] != 1 || b[0] != 2 {
		t.Error("two slices overlap")
	}
}
