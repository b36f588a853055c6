package export

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Rows go to PostgreSQL in its binary COPY format, written here rather than
// by pgx's CopyFrom. pgx looks up an encode plan for every value (maps keyed
// by OID and reflect.Type: a fifth of the exporter's CPU at EVM density) and
// asks the server for the column types before every COPY. The column types
// are known from the table definitions, and nearly every value is one of a
// handful of Go types, so a plan per column, made once, writes them
// directly; any other value goes through pgx's encoder for that column's
// type, so what reaches the server is what pgx would have sent.

// copyColumn is how one column's values are written.
type copyColumn struct {
	name string
	typ  string // as in chain.Column.Type
	oid  uint32
	fast fastKind
}

// fastKind is a column type whose common Go values are written directly.
type fastKind uint8

const (
	fastNone        fastKind = iota
	fastInt8                 // bigint: int64
	fastInt4                 // integer: int32
	fastInt2                 // smallint: int16
	fastBytes                // bytea: []byte; text: string or []byte
	fastJSONB                // jsonb: []byte or string holding JSON text
	fastNumeric              // numeric: int64 (EVM quantities mostly fit)
	fastTimestamptz          // timestamptz: time.Time (every child row's block_time)
)

var fastKinds = map[uint32]fastKind{
	pgtype.Int8OID: fastInt8, pgtype.Int4OID: fastInt4, pgtype.Int2OID: fastInt2,
	pgtype.ByteaOID: fastBytes, pgtype.TextOID: fastBytes, pgtype.JSONBOID: fastJSONB,
	pgtype.NumericOID: fastNumeric, pgtype.TimestamptzOID: fastTimestamptz,
}

// copyPlan writes the rows of one table into one target with COPY ... FROM
// STDIN BINARY.
type copyPlan struct {
	table string // for errors
	sql   string
	cols  []copyColumn
	m     *pgtype.Map
}

// newCopyPlan plans the COPY of t's columns into target (already quoted);
// oids holds the OID of every column type, as the server resolves its name.
func newCopyPlan(m *pgtype.Map, oids map[string]uint32, target string, t chain.Table) (*copyPlan, error) {
	p := &copyPlan{table: t.Name, m: m, cols: make([]copyColumn, len(t.Columns))}
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		oid := oids[c.Type]
		if _, ok := m.TypeForOID(oid); !ok {
			return nil, fmt.Errorf("export: table %s column %s: no binary encoder for type %q (oid %d)", t.Name, c.Name, c.Type, oid)
		}
		p.cols[i] = copyColumn{name: c.Name, typ: c.Type, oid: oid, fast: fastKinds[oid]}
		names[i] = chain.QuoteIdent(c.Name)
	}
	p.sql = fmt.Sprintf("COPY %s (%s) FROM STDIN BINARY", target, strings.Join(names, ", "))
	return p, nil
}

// typeOIDs asks the server for the OID of every column type of tables.
func typeOIDs(ctx context.Context, conn *pgx.Conn, tables []chain.Table) (map[string]uint32, error) {
	oids := map[string]uint32{}
	for _, t := range tables {
		for _, c := range t.Columns {
			if _, ok := oids[c.Type]; ok {
				continue
			}
			var oid uint32
			if err := conn.QueryRow(ctx, "SELECT $1::regtype::oid", c.Type).Scan(&oid); err != nil {
				return nil, fmt.Errorf("export: table %s column %s: type %q: %w", t.Name, c.Name, c.Type, err)
			}
			oids[c.Type] = oid
		}
	}
	return oids, nil
}

// send COPYs rows through tx's connection and returns how many the server
// took.
func (p *copyPlan) send(ctx context.Context, tx pgx.Tx, rows [][]any) (int64, error) {
	r := &copyReader{p: p, rows: rows}
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, r, p.sql)
	if r.err != nil {
		return 0, r.err // the encoding error, rather than the abort it caused
	}
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// copyHeader starts a binary COPY stream: signature, flags, extension length.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// copyChunk is how much encoded data a Read prepares at a time, about what
// pgconn sends in one CopyData message.
const copyChunk = 64 << 10

// copyReader encodes rows as they are read.
type copyReader struct {
	p    *copyPlan
	rows [][]any
	next int // next row to encode
	buf  []byte
	off  int // read position in buf
	done bool
	err  error
}

func (r *copyReader) Read(dst []byte) (int, error) {
	if r.off == len(r.buf) {
		if r.done {
			return 0, io.EOF
		}
		if err := r.fill(); err != nil {
			r.err = err
			return 0, err
		}
	}
	n := copy(dst, r.buf[r.off:])
	r.off += n
	return n, nil
}

// fill encodes the next rows into buf, the header before the first and the
// trailer after the last.
func (r *copyReader) fill() error {
	if r.buf == nil {
		r.buf = make([]byte, 0, copyChunk+copyChunk/4)
		r.buf = append(r.buf, copyHeader...)
	} else {
		r.buf = r.buf[:0]
	}
	r.off = 0
	for r.next < len(r.rows) && len(r.buf) < copyChunk {
		var err error
		if r.buf, err = r.p.appendRow(r.buf, r.rows[r.next]); err != nil {
			return err
		}
		r.next++
	}
	if r.next == len(r.rows) {
		r.buf = binary.BigEndian.AppendUint16(r.buf, 0xffff) // trailer: -1
		r.done = true
	}
	return nil
}

// appendRow appends one tuple: its field count, then each field's length
// (-1 for NULL) and bytes.
func (p *copyPlan) appendRow(buf []byte, row []any) ([]byte, error) {
	if len(row) != len(p.cols) {
		return buf, fmt.Errorf("export: table %s: row of %d values for %d columns", p.table, len(row), len(p.cols))
	}
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(row)))
	for i, v := range row {
		c := &p.cols[i]
		if v == nil {
			buf = binary.BigEndian.AppendUint32(buf, 0xffffffff)
			continue
		}
		switch c.fast {
		case fastInt8:
			if x, ok := v.(int64); ok {
				buf = binary.BigEndian.AppendUint32(buf, 8)
				buf = binary.BigEndian.AppendUint64(buf, uint64(x))
				continue
			}
		case fastInt4:
			if x, ok := v.(int32); ok {
				buf = binary.BigEndian.AppendUint32(buf, 4)
				buf = binary.BigEndian.AppendUint32(buf, uint32(x))
				continue
			}
		case fastInt2:
			if x, ok := v.(int16); ok {
				buf = binary.BigEndian.AppendUint32(buf, 2)
				buf = binary.BigEndian.AppendUint16(buf, uint16(x))
				continue
			}
		case fastBytes:
			switch x := v.(type) {
			case []byte:
				if x == nil {
					buf = binary.BigEndian.AppendUint32(buf, 0xffffffff) // NULL
				} else {
					buf = appendField(buf, x)
				}
				continue
			case string:
				if c.oid == pgtype.TextOID {
					buf = appendField(buf, x)
					continue
				}
			}
		case fastJSONB:
			switch x := v.(type) {
			case []byte:
				if x != nil {
					buf = appendJSONB(buf, x)
					continue
				}
			case string:
				buf = appendJSONB(buf, x)
				continue
			}
		case fastNumeric:
			if x, ok := v.(int64); ok {
				buf = appendNumeric(buf, x)
				continue
			}
		case fastTimestamptz:
			if x, ok := v.(time.Time); ok {
				buf = appendTimestamptz(buf, x)
				continue
			}
		}
		var err error
		if buf, err = p.appendValue(buf, c, v); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// appendValue writes a value through pgx's encoder for the column's type.
func (p *copyPlan) appendValue(buf []byte, c *copyColumn, v any) ([]byte, error) {
	at := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, 0xffffffff)
	out, err := p.m.Encode(c.oid, pgtype.BinaryFormatCode, v, buf)
	if err != nil {
		return buf[:at], fmt.Errorf("export: table %s column %s (%s): cannot encode %T: %w", p.table, c.name, c.typ, v, err)
	}
	if out == nil { // NULL: the -1 stands
		return buf, nil
	}
	binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	return out, nil
}

// appendField writes one field: its length, then its bytes.
func appendField[T []byte | string](buf []byte, x T) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(x)))
	return append(buf, x...)
}

// appendJSONB writes JSON text as a binary jsonb field: a version byte, then
// the text.
func appendJSONB[T []byte | string](buf []byte, js T) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(js)+1))
	buf = append(buf, 1)
	return append(buf, js...)
}

// microsFromUnixEpochToY2K is PostgreSQL's epoch, 2000-01-01 UTC, in
// microseconds since the Unix epoch.
const microsFromUnixEpochToY2K = 946_684_800 * 1_000_000

// appendTimestamptz writes t as a binary timestamptz field: microseconds
// since 2000-01-01 UTC, truncated as pgx truncates them (its encoder costs
// a plan lookup per value, and every child row carries its block's time).
func appendTimestamptz(buf []byte, t time.Time) []byte {
	buf = binary.BigEndian.AppendUint32(buf, 8)
	micros := t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - microsFromUnixEpochToY2K
	return binary.BigEndian.AppendUint64(buf, uint64(micros))
}

// appendNumeric writes x as a binary numeric field: digit count, weight,
// sign and display scale, then base-10000 digits from the most significant,
// trailing zero digits left out as PostgreSQL stores them.
func appendNumeric(buf []byte, x int64) []byte {
	var sign uint16
	u := uint64(x)
	if x < 0 {
		sign, u = 0x4000, uint64(-(x+1))+1
	}
	var digits [5]uint16 // 2^63 has 19 decimal digits: five base-10000 digits
	n := 0
	for ; u > 0; u /= 10000 {
		digits[n] = uint16(u % 10000)
		n++
	}
	weight := n - 1
	low := 0 // trailing (least significant) zero digits
	for low < n && digits[low] == 0 {
		low++
	}
	nd := n - low
	buf = binary.BigEndian.AppendUint32(buf, uint32(8+2*nd))
	buf = binary.BigEndian.AppendUint16(buf, uint16(nd))
	buf = binary.BigEndian.AppendUint16(buf, uint16(max(weight, 0)))
	buf = binary.BigEndian.AppendUint16(buf, sign)
	buf = binary.BigEndian.AppendUint16(buf, 0) // dscale
	for i := n - 1; i >= low; i-- {
		buf = binary.BigEndian.AppendUint16(buf, digits[i])
	}
	return buf
}
