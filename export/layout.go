package export

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5"
)

// RecordedStreams reads how an earlier export split backfill s into export
// streams, so that a resumed job carries on with the sub-ranges whose
// checkpoints exist rather than splitting the range another way (another
// count names other sub-ranges, which would start over): n is the count of
// the sub-ranges (rows PartAlias(s.Alias, i, n) over SplitRange(s.From,
// s.To, n)) the backfill table holds, or 1 when the backfill's own row has
// progress (an export with one stream moves it; one with several sets it
// only when every sub-range is complete). ok is false when nothing is
// recorded: no table yet, no row, or a row registered but never advanced.
// When rows of several counts exist (a count changed by a version that
// allowed it), the one with the most blocks committed wins, then the one
// written last. A complete backfill has nothing to resume: ok is false.
func RecordedStreams(ctx context.Context, conn *pgx.Conn, schema string, s Stream) (n int, ok bool, err error) {
	if s.Head {
		return 0, false, nil
	}
	qs := chain.QuoteIdent(schema)
	var have bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qs+"."+backfillTable).Scan(&have); err != nil {
		return 0, false, fmt.Errorf("export: read the stream layout of %s: %w", s.Name(), err)
	}
	if !have {
		return 0, false, nil
	}
	prefix := s.Alias + "/part-"
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT alias, range_start, range_end, last_height, updated_at FROM %s.%s
WHERE alias = $1 OR left(alias, length($2)) = $2`, qs, backfillTable), s.Alias, prefix)
	if err != nil {
		return 0, false, fmt.Errorf("export: read the stream layout of %s: %w", s.Name(), err)
	}
	defer rows.Close()
	type layout struct {
		committed uint64
		last      time.Time
	}
	layouts := map[int]*layout{}
	note := func(n int, from uint64, h *int64, at time.Time) {
		l := layouts[n]
		if l == nil {
			l = &layout{}
			layouts[n] = l
		}
		if h != nil && uint64(*h) >= from {
			l.committed += uint64(*h) - from + 1
		}
		if at.After(l.last) {
			l.last = at
		}
	}
	for rows.Next() {
		var alias string
		var from, to int64
		var h *int64
		var at time.Time
		if err := rows.Scan(&alias, &from, &to, &h, &at); err != nil {
			return 0, false, fmt.Errorf("export: read the stream layout of %s: %w", s.Name(), err)
		}
		if alias == s.Alias {
			if h != nil && uint64(*h) >= s.To {
				return 0, false, nil // complete
			}
			if h != nil {
				note(1, s.From, h, at)
			}
			continue
		}
		var i, k int
		if _, err := fmt.Sscanf(strings.TrimPrefix(alias, prefix), "%d-of-%d", &i, &k); err != nil || k < 2 || i < 1 || i > k || PartAlias(s.Alias, i-1, k) != alias {
			continue // another backfill's alias that happens to share the prefix
		}
		parts := SplitRange(s.From, s.To, k)
		if len(parts) != k || parts[i-1] != [2]uint64{uint64(from), uint64(to)} {
			continue // not a sub-range of this range
		}
		note(k, uint64(from), h, at)
	}
	if err := rows.Err(); err != nil {
		return 0, false, fmt.Errorf("export: read the stream layout of %s: %w", s.Name(), err)
	}
	for k, l := range layouts {
		if !ok || l.committed > layouts[n].committed || l.committed == layouts[n].committed && l.last.After(layouts[n].last) {
			n, ok = k, true
		}
	}
	return n, ok, nil
}
