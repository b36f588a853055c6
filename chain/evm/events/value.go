package events

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/jackc/pgx/v5/pgtype"
)

var (
	errNotText  = errors.New("not text PostgreSQL can hold (invalid UTF-8 or a NUL byte)")
	errTooLarge = errors.New("out of its column's range")
)

// value is the column value of c for a log with topics whose data
// decoded to values (the non-indexed arguments, in order).
func (c *column) value(topics [][]byte, values []any, rows *chain.Rows) (any, error) {
	if c.arg.Indexed {
		t := topics[c.topic]
		if c.hashed {
			return rows.BoxBytes(t), nil
		}
		// A static indexed value's topic is its ABI encoding, one word.
		vs, err := abi.Arguments{{Type: c.arg.Type}}.UnpackValues(t)
		if err != nil {
			return nil, err
		}
		return c.convert(vs[0], rows)
	}
	return c.convert(values[c.dataPos], rows)
}

// convert turns a value accounts/abi decoded into the column's value.
func (c *column) convert(v any, rows *chain.Rows) (any, error) {
	switch c.kind {
	case kindBytes:
		return rows.BoxBytes(bytesOf(reflect.ValueOf(v))), nil
	case kindInt:
		x, ok := int64Of(v)
		if !ok {
			return nil, errTooLarge
		}
		return rows.BoxInt64(x), nil
	case kindNumeric:
		if x, ok := int64Of(v); ok {
			return rows.BoxInt64(x), nil // numeric's common case, written without big.Int
		}
		b, ok := bigOf(v)
		if !ok {
			return nil, fmt.Errorf("%T is not an integer", v)
		}
		return pgtype.Numeric{Int: b, Valid: true}, nil
	case kindBool:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("%T is not a bool", v)
		}
		return b, nil
	case kindText:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%T is not a string", v)
		}
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return nil, errNotText
		}
		return s, nil
	case kindJSON:
		b, err := appendJSON(nil, c.arg.Type, reflect.ValueOf(v))
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("kind %d", c.kind)
}

// bytesOf is the bytes of an address, a fixed-size byte array or a byte
// slice.
func bytesOf(v reflect.Value) []byte {
	if v.Kind() == reflect.Slice {
		return v.Bytes()
	}
	out := make([]byte, v.Len())
	reflect.Copy(reflect.ValueOf(out), v)
	return out
}

func int64Of(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case *big.Int:
		return x.Int64(), x.IsInt64()
	}
	return 0, false
}

func bigOf(v any) (*big.Int, bool) {
	switch x := v.(type) {
	case *big.Int:
		return x, true
	case uint64:
		return new(big.Int).SetUint64(x), true
	}
	if x, ok := int64Of(v); ok {
		return big.NewInt(x), true
	}
	return nil, false
}

// appendJSON appends the JSON of an array or tuple value: integers as JSON
// numbers (jsonb keeps them exact, as numeric), addresses and bytes as 0x
// hex strings, a tuple as an object keyed by its components' names (their
// positions when unnamed).
func appendJSON(b []byte, t abi.Type, v reflect.Value) ([]byte, error) {
	switch t.T {
	case abi.IntTy, abi.UintTy:
		x, ok := bigOf(v.Interface())
		if !ok {
			return nil, fmt.Errorf("%s is not an integer", v.Type())
		}
		return x.Append(b, 10), nil
	case abi.BoolTy:
		return strconv.AppendBool(b, v.Bool()), nil
	case abi.StringTy:
		s := v.String()
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return nil, errNotText // jsonb holds no \u0000 either
		}
		q, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		return append(b, q...), nil
	case abi.AddressTy, abi.FixedBytesTy, abi.BytesTy, abi.FunctionTy, abi.HashTy:
		b = append(b, `"0x`...)
		b = hex.AppendEncode(b, bytesOf(v))
		return append(b, '"'), nil
	case abi.SliceTy, abi.ArrayTy:
		b = append(b, '[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, *t.Elem, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case abi.TupleTy:
		b = append(b, '{')
		for i, et := range t.TupleElems {
			if i > 0 {
				b = append(b, ',')
			}
			name := t.TupleRawNames[i]
			if name == "" {
				name = strconv.Itoa(i)
			}
			q, _ := json.Marshal(name)
			b = append(append(b, q...), ':')
			var err error
			if b, err = appendJSON(b, *et, v.Field(i)); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("type %s has no JSON form", t)
}
