package parquet

import (
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5/pgtype"
	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

// kind is how one PostgreSQL column type is written.
type kind uint8

const (
	kindInt64     kind = iota + 1 // bigint: INT64
	kindInt32                     // integer: INT32
	kindInt16                     // smallint: INT32 annotated INT(16)
	kindBool                      // boolean: BOOLEAN
	kindBytes                     // bytea: BYTE_ARRAY, the bytes PostgreSQL holds
	kindText                      // text: BYTE_ARRAY annotated STRING
	kindJSON                      // jsonb: BYTE_ARRAY annotated JSON
	kindNumeric                   // numeric: BYTE_ARRAY annotated STRING, the exact decimal
	kindTime                      // timestamptz: INT64 TIMESTAMP(MICROS, UTC)
	kindBytesList                 // bytea[]: LIST of BYTE_ARRAY
	kindTextList                  // text[]: LIST of STRING
)

// kinds maps the column types the families declare (chain.Column.Type) to
// how they are written. A type not here is refused when the schema is
// built, naming the table and column.
var kinds = map[string]kind{
	"bigint": kindInt64, "int8": kindInt64,
	"integer": kindInt32, "int": kindInt32, "int4": kindInt32,
	"smallint": kindInt16, "int2": kindInt16,
	"boolean": kindBool, "bool": kindBool,
	"bytea": kindBytes,
	"text":  kindText,
	"jsonb": kindJSON, "json": kindJSON,
	"numeric":     kindNumeric,
	"timestamptz": kindTime, "timestamp with time zone": kindTime,
	"bytea[]": kindBytesList,
	"text[]":  kindTextList,
}

// ParquetType is the Parquet type a column of PostgreSQL type typ is
// written as, for docs and the manifest ("" when typ cannot be written).
func ParquetType(typ string) string {
	switch kinds[strings.ToLower(typ)] {
	case kindInt64:
		return "INT64"
	case kindInt32:
		return "INT32"
	case kindInt16:
		return "INT32 (INT(16))"
	case kindBool:
		return "BOOLEAN"
	case kindBytes:
		return "BYTE_ARRAY"
	case kindText:
		return "BYTE_ARRAY (STRING)"
	case kindJSON:
		return "BYTE_ARRAY (JSON)"
	case kindNumeric:
		return "BYTE_ARRAY (STRING, decimal)"
	case kindTime:
		return "INT64 (TIMESTAMP(MICROS, UTC))"
	case kindBytesList:
		return "LIST<BYTE_ARRAY>"
	case kindTextList:
		return "LIST<BYTE_ARRAY (STRING)>"
	}
	return ""
}

// tableSchema is how one table's rows become Parquet rows.
type tableSchema struct {
	table  chain.Table
	schema *pq.Schema
	kinds  []kind
	height int // the height column's index
}

// newTableSchema builds t's Parquet schema: its columns in t's order (a
// reader's SELECT * gives them as PostgreSQL does), required unless
// nullable.
func newTableSchema(t chain.Table) (*tableSchema, error) {
	ts := &tableSchema{table: t, kinds: make([]kind, len(t.Columns)), height: -1}
	fields := make([]field, len(t.Columns))
	for i, c := range t.Columns {
		k, ok := kinds[strings.ToLower(c.Type)]
		if !ok {
			return nil, fmt.Errorf("parquet: table %s column %s: type %q has no Parquet form", t.Name, c.Name, c.Type)
		}
		ts.kinds[i] = k
		n := leafOf(k)
		if c.Null {
			n = pq.Optional(n)
		}
		fields[i] = field{Node: n, name: c.Name}
		if c.Name == t.HeightColumn {
			ts.height = i
		}
	}
	if ts.height < 0 {
		return nil, fmt.Errorf("parquet: table %s: height column %q is not one of its columns", t.Name, t.HeightColumn)
	}
	ts.schema = pq.NewSchema(t.Name, group(fields))
	return ts, nil
}

func leafOf(k kind) pq.Node {
	switch k {
	case kindInt64:
		return pq.Leaf(pq.Int64Type)
	case kindInt32:
		return pq.Leaf(pq.Int32Type)
	case kindInt16:
		return pq.Int(16)
	case kindBool:
		return pq.Leaf(pq.BooleanType)
	case kindBytes:
		return pq.Leaf(pq.ByteArrayType)
	case kindText, kindNumeric:
		return pq.String()
	case kindJSON:
		return pq.JSON()
	case kindTime:
		return pq.TimestampAdjusted(pq.Microsecond, true)
	case kindBytesList:
		return pq.List(pq.Optional(pq.Leaf(pq.ByteArrayType)))
	case kindTextList:
		return pq.List(pq.Optional(pq.String()))
	}
	panic(fmt.Sprintf("parquet: kind %d", k))
}

// group is a schema group whose fields keep the order given (parquet-go's
// Group is a map and sorts them by name).
type group []field

type field struct {
	pq.Node
	name string
}

func (f field) Name() string                           { return f.name }
func (f field) Value(base reflect.Value) reflect.Value { return base.Field(0) } // rows are written as pq.Row, never from Go structs
func (g group) ID() int                                { return 0 }
func (g group) String() string                         { return fmt.Sprint(g.Fields()) }
func (g group) Type() pq.Type                          { return pq.Group{}.Type() }
func (g group) Optional() bool                         { return false }
func (g group) Repeated() bool                         { return false }
func (g group) Required() bool                         { return true }
func (g group) Leaf() bool                             { return false }
func (g group) Encoding() encoding.Encoding            { return nil }
func (g group) Compression() compress.Codec            { return nil }
func (g group) GoType() reflect.Type                   { return reflect.TypeFor[map[string]any]() }
func (g group) Fields() []pq.Field                     { return g.fields() }
func (g group) fields() []pq.Field {
	out := make([]pq.Field, len(g))
	for i := range g {
		out[i] = g[i]
	}
	return out
}

// appendRow appends the Parquet values of row (a decoded row of ts's
// table) to out.
func (ts *tableSchema) appendRow(out pq.Row, row []any) (pq.Row, error) {
	if len(row) != len(ts.kinds) {
		return out, fmt.Errorf("parquet: table %s: row of %d values for %d columns", ts.table.Name, len(row), len(ts.kinds))
	}
	for i, v := range row {
		var err error
		if out, err = ts.appendValue(out, i, v); err != nil {
			c := ts.table.Columns[i]
			return out, fmt.Errorf("parquet: table %s column %s (%s): %w", ts.table.Name, c.Name, c.Type, err)
		}
	}
	return out, nil
}

func (ts *tableSchema) appendValue(out pq.Row, i int, v any) (pq.Row, error) {
	null := ts.table.Columns[i].Null
	var def int // the definition level of a present value
	if null {
		def = 1
	}
	if isNull(v) {
		if !null {
			return out, fmt.Errorf("NULL in a NOT NULL column")
		}
		return append(out, pq.Value{}.Level(0, 0, i)), nil
	}
	var val pq.Value
	switch ts.kinds[i] {
	case kindInt64:
		x, ok := v.(int64)
		if !ok {
			return out, typeErr(v)
		}
		val = pq.Int64Value(x)
	case kindInt32:
		x, ok := v.(int32)
		if !ok {
			return out, typeErr(v)
		}
		val = pq.Int32Value(x)
	case kindInt16:
		x, ok := v.(int16)
		if !ok {
			return out, typeErr(v)
		}
		val = pq.Int32Value(int32(x))
	case kindBool:
		x, ok := v.(bool)
		if !ok {
			return out, typeErr(v)
		}
		val = pq.BooleanValue(x)
	case kindBytes, kindText, kindJSON:
		switch x := v.(type) {
		case []byte:
			val = pq.ByteArrayValue(x)
		case string:
			val = pq.ByteArrayValue(unsafeBytes(x))
		default:
			return out, typeErr(v)
		}
	case kindNumeric:
		s, err := decimal(v)
		if err != nil {
			return out, err
		}
		val = pq.ByteArrayValue(s)
	case kindTime:
		t, ok := v.(time.Time)
		if !ok {
			return out, typeErr(v)
		}
		// Microseconds, truncated as PostgreSQL's binary COPY of it is.
		val = pq.Int64Value(t.Unix()*1_000_000 + int64(t.Nanosecond())/1000)
	case kindBytesList, kindTextList:
		return appendList(out, i, null, v)
	}
	return append(out, val.Level(0, def, i)), nil
}

// appendList appends a LIST column's values: a NULL or empty list is one
// value at definition level 0 (NULL, nullable columns) or the list's own
// level; each element one value, the first at repetition level 0.
func appendList(out pq.Row, i int, null bool, v any) (pq.Row, error) {
	base := 0 // definition level of an empty list
	if null {
		base = 1
	}
	var elems []any
	switch x := v.(type) {
	case [][]byte:
		for _, e := range x {
			if e == nil {
				elems = append(elems, nil)
			} else {
				elems = append(elems, e)
			}
		}
	case []string:
		for _, e := range x {
			elems = append(elems, e)
		}
	case []*string:
		for _, e := range x {
			if e == nil {
				elems = append(elems, nil)
			} else {
				elems = append(elems, *e)
			}
		}
	default:
		return out, typeErr(v)
	}
	if len(elems) == 0 {
		return append(out, pq.Value{}.Level(0, base, i)), nil
	}
	for j, e := range elems {
		rep := 1
		if j == 0 {
			rep = 0
		}
		switch x := e.(type) {
		case nil:
			out = append(out, pq.Value{}.Level(rep, base+1, i))
		case []byte:
			out = append(out, pq.ByteArrayValue(x).Level(rep, base+2, i))
		case string:
			out = append(out, pq.ByteArrayValue(unsafeBytes(x)).Level(rep, base+2, i))
		}
	}
	return out, nil
}

func isNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []byte:
		return x == nil
	case pgtype.Numeric:
		return !x.Valid
	case *big.Int:
		return x == nil
	case [][]byte:
		return x == nil
	case []*string:
		return x == nil
	}
	return false
}

func typeErr(v any) error { return fmt.Errorf("cannot write a %T", v) }

// decimal is a numeric value's exact decimal text, as PostgreSQL prints
// it.
func decimal(v any) ([]byte, error) {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	case int32:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(nil, x, 10), nil
	case *big.Int:
		return x.Append(nil, 10), nil
	case pgtype.Numeric:
		if x.NaN || x.InfinityModifier != pgtype.Finite {
			return nil, fmt.Errorf("numeric %v is not a number", x)
		}
		if x.Int == nil {
			return []byte("0"), nil
		}
		s := x.Int.String()
		switch {
		case x.Exp > 0:
			s += strings.Repeat("0", int(x.Exp))
		case x.Exp < 0:
			neg := strings.HasPrefix(s, "-")
			s = strings.TrimPrefix(s, "-")
			n := int(-x.Exp)
			if len(s) <= n {
				s = strings.Repeat("0", n-len(s)+1) + s
			}
			s = s[:len(s)-n] + "." + s[len(s)-n:]
			if neg {
				s = "-" + s
			}
		}
		return []byte(s), nil
	}
	return nil, typeErr(v)
}

// unsafeBytes is s's bytes without a copy, for parquet-go to read (it
// copies values into its column buffers and never writes them).
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
