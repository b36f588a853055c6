//go:build cgo

package parquet_test

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/blockhaul/blockhaul/export/parquet"
)

// A height-range query in DuckDB reads only the segment that holds the
// range: its profile (EXPLAIN ANALYZE, JSON) counts one row group scanned of
// the five the files hold, where a query over every height scans five.
// (DuckDB opens every file's footer for its statistics: its "Total Files
// Read" is 5 either way; the row groups are the data it reads.)
func TestDuckDBReadsOnlyTheSegmentOfARange(t *testing.T) {
	ctx := context.Background()
	c := cometChain()
	tmp := t.TempDir()
	store := stage(t, filepath.Join(tmp, "staging"), c, 1, 400)
	defer store.Close()
	out := filepath.Join(tmp, "out")
	if _, err := parquet.Write(ctx, store, c.dec, dirBucket(t, out), parquet.Config{From: 1, To: 400, SegmentBlocks: 100, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	db := duck(t)
	if _, err := db.Exec("PRAGMA enable_profiling='json'"); err != nil {
		t.Fatal(err)
	}
	profile := func(where string) (scanned int) {
		var plan string
		rows, err := db.Query("EXPLAIN ANALYZE SELECT count(*) FROM read_parquet('" + glob(out, "events") + "') WHERE " + where)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var a, b string
			if err := rows.Scan(&a, &b); err != nil {
				t.Fatal(err)
			}
			plan += b
		}
		rows.Close()
		field := func(name string) int {
			m := regexp.MustCompile(`"` + name + `":\s*(\d+)`).FindStringSubmatch(plan)
			if m == nil {
				t.Fatalf("no %s in DuckDB's profile:\n%s", name, plan)
			}
			n, _ := strconv.Atoi(m[1])
			return n
		}
		return field("total_row_groups_scanned")
	}
	if all := profile("height >= 1"); all != 5 {
		t.Fatalf("a query over every height scanned %d row groups, want the files' 5", all)
	}
	if n := profile("height BETWEEN 150 AND 160"); n != 1 {
		t.Fatalf("heights 150-160 scanned %d row groups, want 1: the segment 100-199's", n)
	}
}
