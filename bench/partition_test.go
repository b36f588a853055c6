package bench

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/pgtest"
)

func TestPartitionBounds(t *testing.T) {
	for _, tc := range []struct {
		from, to, k uint64
		want        [][2]uint64
	}{
		{1, 10, 5, [][2]uint64{{1, 5}, {6, 10}}},
		{1, 11, 5, [][2]uint64{{1, 5}, {6, 10}, {11, 11}}},
		{7, 7, 100, [][2]uint64{{7, 7}}},
		{1, 3, 1, [][2]uint64{{1, 1}, {2, 2}, {3, 3}}},
		{^uint64(0) - 2, ^uint64(0), 2, [][2]uint64{{^uint64(0) - 2, ^uint64(0) - 1}, {^uint64(0), ^uint64(0)}}},
	} {
		if got := partitionBounds(tc.from, tc.to, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("partitionBounds(%d, %d, %d) = %v, want %v", tc.from, tc.to, tc.k, got, tc.want)
		}
	}
}

// TestRunPartitionSmall runs the partition measurement in miniature and
// checks what its figures rest on: the same rows in every load, partition
// pruning on a height range, one index probe per partition for a hash, and
// the re-export's dead rows on the plain tables only.
func TestRunPartitionSmall(t *testing.T) {
	res, err := RunPartition(context.Background(), PartitionConfig{
		DatabaseURL: pgtest.BaseURL(), Chain: chain.FamilyCometBFT, Blocks: 300, PartitionBlocks: 30,
		Rounds: 1, BatchBlocks: 50, Lookups: 20, ManyPartitions: 30, WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Partitions != 10 || res.Rows == 0 {
		t.Fatalf("partitions %d, rows %d", res.Partitions, res.Rows)
	}
	if len(res.Loads) != 4 {
		t.Fatalf("loads = %+v, want plain and partitioned with 1 and 2 streams", res.Loads)
	}
	for _, l := range res.Loads {
		if l.Seconds <= 0 || l.RowsPerSec <= 0 || len(l.AllSeconds) != 1 {
			t.Errorf("load %+v not measured", l)
		}
	}
	for name, a := range map[string]PartitionAfter{"plain": res.Plain, "partitioned": res.Parted} {
		if a.IndexSeconds <= 0 || a.BigMemIndexSeconds <= 0 || a.ParallelIndexSeconds <= 0 || a.ReloadSeconds <= 0 || a.HashMicros <= 0 || a.RangeMicros <= 0 {
			t.Errorf("%s: not measured: %+v", name, a)
		}
		if len(a.Index) != 10 {
			t.Errorf("%s: %d index build times, want the 10 CometBFT indexes: %v", name, len(a.Index), a.Index)
		}
	}
	if res.Plain.HashScans != 1 || res.Parted.HashScans != 10 {
		t.Errorf("relations scanned by a hash lookup: plain %d, partitioned %d; want 1 and 10", res.Plain.HashScans, res.Parted.HashScans)
	}
	if res.Plain.RangeScans != 1 || res.Parted.RangeScans < 1 || res.Parted.RangeScans > 2 {
		t.Errorf("relations scanned by a height range: plain %d, partitioned %d; want 1 and at most 2", res.Plain.RangeScans, res.Parted.RangeScans)
	}
	if res.Plain.RemoveSeconds != 0 || res.Parted.RemoveSeconds <= 0 {
		t.Errorf("remove: plain %v (inside the replay), partitioned %v", res.Plain.RemoveSeconds, res.Parted.RemoveSeconds)
	}
	if res.Plain.DeadRows < 1000 || res.Parted.DeadRows >= res.Plain.DeadRows/10 {
		t.Errorf("dead rows after the re-export: plain %d, partitioned %d", res.Plain.DeadRows, res.Parted.DeadRows)
	}
	if res.ManyLookupMicros <= 0 {
		t.Error("no lookup with many partitions")
	}
	md := res.Markdown()
	for _, want := range []string{"| export, 2 streams, rows/s |", "| transaction by hash, 30 partitions |", "10 partitions per table"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}
