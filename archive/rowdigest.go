package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5/pgtype"
)

// rowDigester computes, in Go, the hash rowHash(t) computes in SQL, from a
// row in its binary COPY form: the same chain of seeded hashes over the
// same columns, from the same record hash of the others. One per
// goroutine (its JSON hasher keeps buffers).
type rowDigester struct {
	order   wordOrder // the server's
	table   string
	oids    []uint32 // per column
	names   []string
	chained []int // columns with a seeded hash, never NULL, in order
	rest    []int // the others, hashed as one record
	all     []int
	jsonb   jsonbHasher
	fields  [][]byte
}

// newRowDigester plans t's row hash as a server reading words in order o
// computes it; oids are the column types' OIDs (export.ColumnOIDs). A
// column type the digest cannot compute is an error naming it.
func newRowDigester(t chain.Table, oids map[string]uint32, o wordOrder) (*rowDigester, error) {
	d := &rowDigester{order: o, table: t.Name, jsonb: jsonbHasher{order: o}}
	for i, c := range t.Columns {
		oid, ok := oids[c.Type]
		if !ok {
			return nil, fmt.Errorf("column %s: type %q has no OID", c.Name, c.Type)
		}
		if !digestible(oid) {
			return nil, fmt.Errorf("column %s: no client-side hash for type %q", c.Name, c.Type)
		}
		d.oids = append(d.oids, oid)
		d.names = append(d.names, c.Name)
		d.all = append(d.all, i)
		if _, ok := seededHash[strings.ToLower(c.Type)]; ok && !c.Null {
			d.chained = append(d.chained, i)
		} else {
			d.rest = append(d.rest, i)
		}
	}
	return d, nil
}

func digestible(oid uint32) bool {
	switch oid {
	case pgtype.Int8OID, pgtype.Int4OID, pgtype.Int2OID, pgtype.TimestamptzOID, pgtype.ByteaOID, pgtype.TextOID,
		pgtype.NumericOID, pgtype.JSONBOID, pgtype.BoolOID, pgtype.ByteaArrayOID, pgtype.TextArrayOID:
		return true
	}
	return false
}

// hash returns the row hash of one binary COPY tuple, as sum(rowHash(t))
// adds it up: a signed 64-bit value.
func (d *rowDigester) hash(tuple []byte) (int64, error) {
	if len(tuple) < 2 || int(binary.BigEndian.Uint16(tuple)) != len(d.oids) {
		return 0, fmt.Errorf("table %s: tuple of the wrong field count", d.table)
	}
	d.fields = d.fields[:0]
	p := tuple[2:]
	for range d.oids {
		if len(p) < 4 {
			return 0, fmt.Errorf("table %s: tuple truncated", d.table)
		}
		n := int32(binary.BigEndian.Uint32(p))
		p = p[4:]
		if n < 0 {
			d.fields = append(d.fields, nil)
			continue
		}
		if int(n) > len(p) {
			return 0, fmt.Errorf("table %s: tuple truncated", d.table)
		}
		d.fields = append(d.fields, p[:n:n])
		p = p[n:]
	}
	for _, i := range d.chained {
		if d.fields[i] == nil { // rowHash's coalesce: the whole row's text
			return d.whole()
		}
	}
	if len(d.chained) == 0 {
		return d.whole()
	}
	var h uint64
	if len(d.rest) > 0 {
		var err error
		if h, err = d.record(d.rest); err != nil {
			return 0, err
		}
	}
	for _, i := range d.chained {
		var err error
		if h, err = d.value(i, h); err != nil {
			return 0, err
		}
	}
	return int64(h), nil
}

// whole is hashtextextended(hash_record_extended(ROW(every column), 0)::text, 0).
func (d *rowDigester) whole() (int64, error) {
	r, err := d.record(d.all)
	if err != nil {
		return 0, err
	}
	var buf [24]byte
	return int64(pgHashBytes(d.order, strconv.AppendInt(buf[:0], int64(r), 10), 0)), nil
}

// record is hash_record_extended(ROW(columns), 0): 31·h + each column's
// hash (seed 0; 0 for NULL), from 0.
func (d *rowDigester) record(cols []int) (uint64, error) {
	var h uint64
	for _, i := range cols {
		var e uint64
		if d.fields[i] != nil {
			var err error
			if e, err = d.value(i, 0); err != nil {
				return 0, err
			}
		}
		h = h*31 + e
	}
	return h, nil
}

// value is the type's extended hash of column i's (non-NULL) value.
func (d *rowDigester) value(i int, seed uint64) (uint64, error) {
	v := d.fields[i]
	bad := func(what string) error {
		return fmt.Errorf("table %s column %s: %s of %d bytes", d.table, d.names[i], what, len(v))
	}
	switch d.oids[i] {
	case pgtype.Int8OID, pgtype.TimestamptzOID:
		if len(v) != 8 {
			return 0, bad("int8")
		}
		return pgHashInt8(int64(binary.BigEndian.Uint64(v)), seed), nil
	case pgtype.Int4OID:
		if len(v) != 4 {
			return 0, bad("int4")
		}
		return pgHashUint32(binary.BigEndian.Uint32(v), seed), nil
	case pgtype.Int2OID:
		if len(v) != 2 {
			return 0, bad("int2")
		}
		return pgHashUint32(uint32(int32(int16(binary.BigEndian.Uint16(v)))), seed), nil
	case pgtype.BoolOID:
		if len(v) != 1 {
			return 0, bad("bool")
		}
		return pgHashUint32(uint32(v[0]), seed), nil
	case pgtype.ByteaOID, pgtype.TextOID:
		return pgHashBytes(d.order, v, seed), nil
	case pgtype.NumericOID:
		h, err := pgHashNumeric(d.order, v, seed)
		if err != nil {
			return 0, fmt.Errorf("table %s column %s: %w", d.table, d.names[i], err)
		}
		return h, nil
	case pgtype.JSONBOID:
		if len(v) < 1 || v[0] != 1 {
			return 0, bad("jsonb")
		}
		h, err := d.jsonb.hash(v[1:], seed)
		if err != nil {
			return 0, fmt.Errorf("table %s column %s: %w", d.table, d.names[i], err)
		}
		return h, nil
	case pgtype.ByteaArrayOID, pgtype.TextArrayOID:
		h, err := pgHashArray(v, seed, func(e []byte, seed uint64) (uint64, error) { return pgHashBytes(d.order, e, seed), nil })
		if err != nil {
			return 0, fmt.Errorf("table %s column %s: %w", d.table, d.names[i], err)
		}
		return h, nil
	}
	return 0, errors.New("unreachable: type checked by newRowDigester")
}

// sum128 is an exact sum of signed 64-bit row hashes, as PostgreSQL's
// sum(int8) (a numeric) keeps it.
type sum128 struct {
	hi int64
	lo uint64
}

func (s *sum128) add(v int64) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, uint64(v), 0)
	s.hi += int64(carry)
	if v < 0 {
		s.hi--
	}
}

func (s *sum128) addSum(o sum128) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, o.lo, 0)
	s.hi += o.hi + int64(carry)
}

// String is the sum in decimal, as sum(...)::text prints it.
func (s sum128) String() string {
	b := new(big.Int).SetInt64(s.hi)
	b.Lsh(b, 64)
	b.Add(b, new(big.Int).SetUint64(s.lo))
	return b.String()
}
