package export

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5/pgtype"
)

// The timestamptz fast path writes what pgx's encoder writes, for times
// before and after both epochs, with sub-microsecond parts and zones.
func TestTimestamptzFastPathIsPgxsEncoding(t *testing.T) {
	m := pgtype.NewMap()
	east := time.FixedZone("UTC+5:30", 5*3600+1800)
	for _, tm := range []time.Time{
		time.Date(2019, 3, 14, 1, 2, 3, 456_789_123, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(1969, 7, 20, 20, 17, 40, 1_500, time.UTC),
		time.Date(1960, 1, 1, 0, 0, 0, 999, east),
		time.Date(2026, 12, 1, 13, 30, 0, 1, east),
		time.Unix(0, -1).UTC(),
		time.Unix(1_700_000_000, 0).UTC(),
	} {
		want, err := m.Encode(pgtype.TimestamptzOID, pgtype.BinaryFormatCode, tm, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := appendTimestamptz(nil, tm)
		if n := binary.BigEndian.Uint32(got); n != 8 || !bytes.Equal(got[4:], want) {
			t.Errorf("%s: wrote % x, pgx % x", tm, got, want)
		}
	}

	// Through a plan: time.Time takes the fast path, any other value of
	// the column pgx's encoder, with the same bytes.
	tm := time.Date(2021, 6, 1, 12, 0, 0, 123_456_000, time.UTC)
	p, err := newCopyPlan(m, map[string]uint32{"timestamptz": pgtype.TimestamptzOID}, `"s"."t"`,
		chain.Table{Name: "t", Columns: []chain.Column{{Name: "at", Type: "timestamptz"}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.cols[0].fast != fastTimestamptz {
		t.Fatalf("timestamptz column planned as %v", p.cols[0].fast)
	}
	fast, err := p.appendRow(nil, []any{tm})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := p.appendRow(nil, []any{pgtype.Timestamptz{Time: tm, Valid: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fast, slow) || len(fast) != 2+4+8 {
		t.Errorf("time.Time row % x, pgtype.Timestamptz row % x", fast, slow)
	}
}
