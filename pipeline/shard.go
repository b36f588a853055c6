package pipeline

import (
	"fmt"

	"github.com/blockhaul/blockhaul/archive"
)

// DefaultShardChunk is --shard-chunk's default: shard slices start and end
// on multiples of 10,000 heights, so that the slices of two runs with other
// ranges or shard counts still line up on the same boundaries.
const DefaultShardChunk = 10_000

// ShardRange is shard index's slice of [from, to] when the range is cut
// into shards disjoint slices for the pods of a Kubernetes Indexed Job.
//
// The range is cut into chunks aligned to absolute heights (chunk k is
// [k*chunk, (k+1)*chunk-1], clipped to the range, so the first and last may
// be partial), and each shard takes a contiguous run of whole chunks: the
// first len%shards shards one chunk more than the rest. The slices are
// disjoint and their union is exactly [from, to]. A shard with no chunk
// (more shards than chunks) gets ok == false: it has nothing to do.
//
// It requires from <= to, chunk >= 1 and index < shards (Validate checks
// the flags); otherwise it returns ok == false.
func ShardRange(from, to, chunk, shards, index uint64) (lo, hi uint64, ok bool) {
	if from > to || chunk == 0 || shards == 0 || index >= shards {
		return 0, 0, false
	}
	first, last := from/chunk, to/chunk
	n := last - first + 1 // chunks touching the range; cannot overflow (chunk >= 1 and first <= last)
	if last-first == ^uint64(0) {
		n = ^uint64(0) // [0, MaxUint64] in chunks of 1: one chunk short, never reached in practice
	}
	q, r := n/shards, n%shards
	count := q
	start := index*q + min(index, r)
	if index < r {
		count++
	}
	if count == 0 {
		return 0, 0, false
	}
	startChunk, endChunk := first+start, first+start+count-1
	lo = max(from, startChunk*chunk)
	hi = to
	if endChunk < last {
		hi = endChunk*chunk + (chunk - 1)
	}
	return lo, hi, true
}

// validateShards checks --shards, --shard-index and --shard-chunk: both of
// the first two or neither, 0 <= index < shards, fetch only, with --to.
func (c *Config) validateShards() []*FieldError {
	var fs []*FieldError
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	if c.ShardChunk == 0 {
		bad("shard-chunk", "must be at least 1 height")
	}
	if c.Shards == 0 && !c.ShardIndexSet {
		if c.Wait != 0 {
			bad("wait", "is given without --shards: restore waits for the snapshots of a sharded fetch")
		}
		return fs
	}
	if c.Wait < 0 {
		bad("wait", "must not be negative, got %v", c.Wait)
	}
	if c.Command == CmdRestore {
		// restore --shards restores every shard's snapshot (an index is
		// not used).
		if c.Shards < 1 {
			bad("shards", "must be at least 1, got %d", c.Shards)
		}
		return fs
	}
	if c.Wait != 0 {
		bad("wait", "is for restore --shards, not %s", c.Command)
	}
	switch {
	case c.Shards == 0 && c.ShardIndexSet:
		bad("shard-index", "is given without --shards (give both, or neither)")
		return fs
	case c.Shards < 1:
		bad("shards", "must be at least 1, got %d", c.Shards)
		return fs
	case !c.ShardIndexSet:
		bad("shard-index", "--shards %d needs the index of this shard: --shard-index, or JOB_COMPLETION_INDEX as a Kubernetes Indexed Job sets it", c.Shards)
	case c.ShardIndex < 0 || c.ShardIndex >= c.Shards:
		bad("shard-index", "want 0 to %d (below --shards %d), got %d", c.Shards-1, c.Shards, c.ShardIndex)
	}
	if c.Command != CmdFetch && c.Command != CmdSnapshot && c.Command != CmdPublish {
		// run would export each slice in its own process: the seam below a
		// slice is checked only if the neighbouring shard happened to commit
		// first, and concurrent writers would drop and build the deferred
		// indexes under each other. Shards fetch; one export reads them all.
		bad("shards", "only fetch is sharded (%s is not): fetch the slices, snapshot each (snapshot --shards), restore them all into one store (restore --shards), and export that once", c.Command)
	}
	if !c.ToSet && c.Command == CmdFetch {
		bad("to", "--shards needs --to: every shard must cut the same range, and a tip read by each pod at its own time is not")
	}
	return fs
}

// restoreShards lists the shards restore --shards waits for, each with its
// slice of --from..--to when --to is given.
func (c *Config) restoreShards() []archive.Shard {
	var out []archive.Shard
	for i := range c.Shards {
		s := archive.Shard{Index: i}
		if c.ToSet {
			s.From, s.To, s.Ranged = ShardRange(c.From, c.To, c.ShardChunk, uint64(c.Shards), uint64(i))
		}
		out = append(out, s)
	}
	return out
}

// shardSlice is j narrowed to its shard's slice. ok is false when the
// shard has nothing to fetch.
func (j *Job) shardSlice() (_ *Job, ok bool) {
	if j.Shards == 0 {
		return j, true
	}
	lo, hi, ok := ShardRange(j.From, j.To, j.ShardChunk, uint64(j.Shards), uint64(j.ShardIndex))
	if !ok {
		return j, false
	}
	return j.withRange(lo, hi), true
}
