package pipeline

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

// TestShardRange: the slices of every shard are disjoint, chunk-aligned,
// in order, and together exactly the range; more shards than chunks leave
// the rest empty.
func TestShardRange(t *testing.T) {
	type slice struct{ lo, hi uint64 } // hi < lo: empty
	empty := slice{1, 0}
	for _, tc := range []struct {
		name            string
		from, to, chunk uint64
		shards          uint64
		want            []slice
	}{
		{"one shard is the range", 1, 25_000, 10_000, 1, []slice{{1, 25_000}}},
		{"partial first and last chunks", 1, 25_000, 10_000, 3, []slice{{1, 9_999}, {10_000, 19_999}, {20_000, 25_000}}},
		{"uneven split: first shards take one chunk more", 0, 99, 10, 3, []slice{{0, 39}, {40, 69}, {70, 99}}},
		{"unaligned both ends, uneven", 15, 94, 10, 4, []slice{{15, 39}, {40, 59}, {60, 79}, {80, 94}}},
		{"more shards than chunks: the rest are empty", 1, 25_000, 10_000, 5, []slice{{1, 9_999}, {10_000, 19_999}, {20_000, 25_000}, empty, empty}},
		{"range inside one chunk", 12_345, 12_400, 10_000, 2, []slice{{12_345, 12_400}, empty}},
		{"one height", 7, 7, 10_000, 3, []slice{{7, 7}, empty, empty}},
		{"chunk of one height", 5, 9, 1, 2, []slice{{5, 7}, {8, 9}}},
		{"ends on a chunk boundary", 10_000, 29_999, 10_000, 2, []slice{{10_000, 19_999}, {20_000, 29_999}}},
		// 2^64-1 ends in ...615: chunks ...590, ...600 and ...610 (partial).
		{"near the top of uint64", math.MaxUint64 - 25, math.MaxUint64, 10, 2, []slice{{math.MaxUint64 - 25, math.MaxUint64 - 6}, {math.MaxUint64 - 5, math.MaxUint64}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []slice
			for i := uint64(0); i < tc.shards; i++ {
				lo, hi, ok := ShardRange(tc.from, tc.to, tc.chunk, tc.shards, i)
				if !ok {
					got = append(got, empty)
					continue
				}
				got = append(got, slice{lo, hi})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ShardRange(%d, %d, chunk %d) over %d shards = %v, want %v", tc.from, tc.to, tc.chunk, tc.shards, got, tc.want)
			}
			// The properties, independently of the table: in order,
			// adjacent, aligned, covering exactly [from, to].
			next := tc.from
			for i, s := range got {
				if s == empty {
					continue
				}
				if s.lo != next {
					t.Errorf("shard %d starts at %d, want %d (gap or overlap)", i, s.lo, next)
				}
				if s.lo != tc.from && s.lo%tc.chunk != 0 {
					t.Errorf("shard %d starts at %d, not on a chunk boundary", i, s.lo)
				}
				if s.hi != tc.to && (s.hi+1)%tc.chunk != 0 {
					t.Errorf("shard %d ends at %d, not on a chunk boundary", i, s.hi)
				}
				next = s.hi + 1
			}
			if last := next - 1; last != tc.to { // next wraps to 0 past MaxUint64: last is then MaxUint64
				t.Errorf("the shards end at %d, want %d", last, tc.to)
			}
		})
	}
	for _, bad := range [][5]uint64{{5, 4, 10, 1, 0}, {1, 9, 0, 1, 0}, {1, 9, 10, 0, 0}, {1, 9, 10, 2, 2}} {
		if lo, hi, ok := ShardRange(bad[0], bad[1], bad[2], bad[3], bad[4]); ok {
			t.Errorf("ShardRange%v = %d..%d, want no slice", bad, lo, hi)
		}
	}
}

// TestShardRangeLinesUpAcrossRuns: two runs over other ranges and shard
// counts cut on the same absolute boundaries.
func TestShardRangeLinesUpAcrossRuns(t *testing.T) {
	bounds := func(from, to, shards uint64) map[uint64]bool {
		b := map[uint64]bool{}
		for i := uint64(0); i < shards; i++ {
			if lo, _, ok := ShardRange(from, to, 1000, shards, i); ok && lo != from {
				b[lo] = true
			}
		}
		return b
	}
	for lo := range bounds(1, 50_000, 7) {
		if lo%1000 != 0 {
			t.Errorf("boundary %d is not a multiple of the chunk", lo)
		}
	}
	for lo := range bounds(20_500, 90_000, 3) {
		if lo%1000 != 0 {
			t.Errorf("boundary %d is not a multiple of the chunk", lo)
		}
	}
}

func TestValidateShards(t *testing.T) {
	base := DefaultConfig()
	base.Command, base.To, base.ToSet = CmdFetch, 1000, true
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   []string // empty: accepted
	}{
		{"not sharded", func(c *Config) {}, nil},
		{"index 0 of 1", func(c *Config) { c.Shards, c.ShardIndex, c.ShardIndexSet = 1, 0, true }, nil},
		{"last index", func(c *Config) { c.Shards, c.ShardIndex, c.ShardIndexSet = 4, 3, true }, nil},
		{"index equal to shards", func(c *Config) { c.Shards, c.ShardIndex, c.ShardIndexSet = 4, 4, true }, []string{"--shard-index (BLOCKHAUL_SHARD_INDEX)", "want 0 to 3", "got 4"}},
		{"negative index", func(c *Config) { c.Shards, c.ShardIndex, c.ShardIndexSet = 4, -1, true }, []string{"--shard-index", "got -1"}},
		{"negative shards", func(c *Config) { c.Shards, c.ShardIndexSet = -2, true }, []string{"--shards (BLOCKHAUL_SHARDS)", "at least 1"}},
		{"index without shards", func(c *Config) { c.ShardIndex, c.ShardIndexSet = 2, true }, []string{"--shard-index", "without --shards"}},
		{"shards without index", func(c *Config) { c.Shards = 3 }, []string{"--shard-index", "JOB_COMPLETION_INDEX"}},
		{"shards without --to", func(c *Config) { c.Shards, c.ShardIndexSet, c.ToSet = 3, true, false }, []string{"--to", "needs --to"}},
		{"shards on run", func(c *Config) {
			c.Command, c.PG, c.Shards, c.ShardIndexSet = CmdRun, "postgres://127.0.0.1/db", 3, true
		}, []string{"--shards", "only fetch is sharded"}},
		{"chunk 0", func(c *Config) { c.ShardChunk = 0 }, []string{"--shard-chunk", "at least 1"}},
		{"restore waits for every shard", func(c *Config) {
			c.Command, c.Args, c.Shards, c.Wait = CmdRestore, []string{"file:///tmp/snapshots"}, 3, time.Hour
		}, nil},
		{"snapshot as shard 1", func(c *Config) {
			c.Command, c.Args, c.Shards, c.ShardIndex, c.ShardIndexSet = CmdSnapshot, []string{"file:///tmp/snapshots"}, 3, 1, true
		}, nil},
		{"snapshot as a shard without its index", func(c *Config) {
			c.Command, c.Args, c.Shards = CmdSnapshot, []string{"file:///tmp/snapshots"}, 3
		}, []string{"--shard-index", "JOB_COMPLETION_INDEX"}},
		{"restore --wait without --shards", func(c *Config) {
			c.Command, c.Args, c.Wait = CmdRestore, []string{"file:///tmp/snapshots"}, time.Hour
		}, []string{"--wait", "without --shards"}},
		{"negative wait", func(c *Config) {
			c.Command, c.Args, c.Shards, c.Wait = CmdRestore, []string{"file:///tmp/snapshots"}, 3, -time.Second
		}, []string{"--wait", "must not be negative"}},
		{"wait on fetch", func(c *Config) { c.Shards, c.ShardIndexSet, c.Wait = 3, true, time.Hour }, []string{"--wait", "is for restore --shards"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mutate(&cfg)
			cfg.EnsureDefaults()
			err := cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if ExitCode(err) != ExitConfig {
				t.Errorf("exit %d, want %d", ExitCode(err), ExitConfig)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %q", err, w)
				}
			}
		})
	}
}

// TestShardedFetchStagesItsSliceOnly: the shards of a synthetic range each
// stage exactly their slice in their own store, a shard with no chunk
// succeeds at once without creating its store, and merging the stores gives
// the whole range.
func TestShardedFetchStagesItsSliceOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const from, to, chunk, shards = 1, 450, 100, 6 // 5 chunks: 1-99 (partial), 100-199, ..., 400-450 (partial)
	want := []staging.Range{{From: 1, To: 99}, {From: 100, To: 199}, {From: 200, To: 299}, {From: 300, To: 399}, {From: 400, To: 450}}
	merged := filepath.Join(dir, "merged")
	for i := 0; i < shards; i++ {
		cfg := DefaultConfig()
		cfg.Command, cfg.From, cfg.To, cfg.ToSet = CmdFetch, from, to, true
		cfg.Shards, cfg.ShardIndex, cfg.ShardIndexSet, cfg.ShardChunk = shards, i, true, chunk
		cfg.Staging, cfg.Progress = filepath.Join(dir, fmt.Sprint("shard-", i)), 0
		var out strings.Builder
		sum, err := Run(ctx, cfg, &out, quiet)
		if err != nil || !sum.Complete {
			t.Fatalf("shard %d: complete %v, err %v", i, sum.Complete, err)
		}
		if i >= len(want) {
			if !strings.Contains(out.String(), "nothing to do") {
				t.Errorf("empty shard %d printed %q", i, out.String())
			}
			if _, err := os.Stat(cfg.Staging); !os.IsNotExist(err) {
				t.Errorf("empty shard %d touched its staging directory: %v", i, err)
			}
			continue
		}
		st := stagingtest.Open(t, cfg.Staging, staging.Options{ReadOnly: true})
		got, err := st.Staged(0, 1000)
		st.Close()
		if err != nil || !reflect.DeepEqual(got, want[i:i+1]) {
			t.Fatalf("shard %d staged %v (err %v), want %v", i, got, err, want[i])
		}
		m := DefaultConfig()
		m.Command, m.Staging, m.MergeFrom = CmdMerge, merged, cfg.Staging
		if _, err := Run(ctx, m, io.Discard, quiet); err != nil {
			t.Fatalf("merge shard %d: %v", i, err)
		}
	}
	st := stagingtest.Open(t, merged, staging.Options{ReadOnly: true})
	defer st.Close()
	if got, err := st.Staged(0, 1000); err != nil || !reflect.DeepEqual(got, []staging.Range{{From: from, To: to}}) {
		t.Fatalf("merged store holds %v (err %v), want %d-%d", got, err, from, to)
	}
}
