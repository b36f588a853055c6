package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/staging"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ShardPrefix is where, under a location, the snapshot of shard i of a
// sharded fetch lives: snapshot --shards writes it, restore --shards reads
// it.
func ShardPrefix(i int) string { return fmt.Sprintf("shard-%d/", i) }

// ShardBucket is shard i's part of bucket.
func ShardBucket(bucket *blob.Bucket, i int) *blob.Bucket {
	return blob.PrefixedBucket(bucket, ShardPrefix(i))
}

// Shard is one shard restore waits for: its index and, when Ranged, the
// heights its finished snapshot must hold (else any finished snapshot).
type Shard struct {
	Index    int
	Ranged   bool
	From, To uint64
}

// ShardsReport is what RestoreShards did: one restore per shard, in the
// order they were merged.
type ShardsReport struct {
	Source   string           `json:"source"`
	Dir      string           `json:"dir"`
	Shards   []*RestoreReport `json:"shards"`
	Merged   int              `json:"merged_blocks"`
	Waited   time.Duration    `json:"waited_ns"`
	Duration time.Duration    `json:"duration_ns"`
}

// ShardsMissingError is a restore --shards whose wait ended before every
// shard had a finished snapshot: the fetch has not finished (or failed). A
// runtime failure: a retried pod waits again.
type ShardsMissingError struct {
	Source string
	Waited time.Duration
	// Missing says, for each shard without a finished snapshot, what its
	// place held when last looked at.
	Missing map[int]string
}

func (e *ShardsMissingError) Error() string {
	idx := slices.Sorted(func(yield func(int) bool) {
		for i := range e.Missing {
			if !yield(i) {
				return
			}
		}
	})
	var parts []string
	for _, i := range idx {
		parts = append(parts, fmt.Sprintf("%s %s", ShardPrefix(i), e.Missing[i]))
	}
	waited := "without --wait"
	if e.Waited > 0 {
		waited = "after waiting " + e.Waited.Round(time.Second).String()
	}
	return fmt.Sprintf("archive: restore from %s: %s, %s without a finished snapshot: %s",
		e.Source, waited, Quantity(len(idx), "shard"), strings.Join(parts, "; "))
}

// shardReady says whether shard's place in bucket holds a finished
// snapshot (its manifest, written last, holding the shard's heights), and
// what it holds when not.
func shardReady(ctx context.Context, bucket *blob.Bucket, s Shard) (bool, string, error) {
	mb, err := bucket.ReadAll(ctx, ManifestName)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return false, "holds no " + ManifestName + " yet", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("archive: restore: read %s%s: %w", ShardPrefix(s.Index), ManifestName, err)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return false, "", fmt.Errorf("archive: restore: %s%s unreadable: %w", ShardPrefix(s.Index), ManifestName, err)
	}
	if !s.Ranged {
		return true, "", nil
	}
	for _, r := range m.Staged {
		if r.From <= s.From && r.To >= s.To {
			return true, "", nil
		}
	}
	var held []string
	for _, r := range m.Staged {
		held = append(held, fmt.Sprintf("%d-%d", r.From, r.To))
	}
	return false, fmt.Sprintf("holds a snapshot of %s, not of its slice %d-%d (a snapshot of another range: give each range its own location)",
		strings.Join(held, ", "), s.From, s.To), nil
}

// PollInterval is how often RestoreShards looks for the snapshots it waits
// for: a hundredth of the wait, between 1 s and 30 s.
func PollInterval(wait time.Duration) time.Duration {
	return min(max(wait/100, time.Second), 30*time.Second)
}

// RestoreShards restores the snapshots a sharded fetch wrote under bucket
// (each shard's at ShardPrefix) and merges them into the store in dir (new,
// or one an earlier attempt merged some of them into: a merge of blocks it
// holds already adds nothing). Each shard's snapshot is waited for, up to
// wait in all, polling every PollInterval(wait): a snapshot is finished
// once its manifest is there and holds the shard's heights. Shards are
// merged as they finish, in any order; each is restored (every file
// checked, the store verified) into dir.shard-I beside dir, merged, and
// removed. When it fails, a dir it created is removed. A shard still missing when the wait ends is a
// *ShardsMissingError naming each and what its place holds.
func RestoreShards(ctx context.Context, bucket *blob.Bucket, source, dir string, shards []Shard, wait time.Duration, log *slog.Logger) (_ *ShardsReport, err error) {
	start := time.Now()
	if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
		// A restore that fails leaves no store it began: a retried pod
		// starts on a new volume, and a user again from nothing.
		defer func() {
			if err != nil {
				os.RemoveAll(dir)
			}
		}()
	}
	r := &ShardsReport{Source: source, Dir: dir}
	pending := slices.Clone(shards)
	deadline := start.Add(wait)
	for {
		missing := map[int]string{}
		for _, s := range pending {
			ready, why, err := shardReady(ctx, ShardBucket(bucket, s.Index), s)
			if err != nil {
				return r, err
			}
			if !ready {
				missing[s.Index] = why
				continue
			}
			rep, n, err := restoreShard(ctx, bucket, source, dir, s.Index)
			if rep != nil {
				r.Shards = append(r.Shards, rep)
			}
			if err != nil {
				return r, err
			}
			r.Merged += n
			log.Info("shard restored and merged", "shard", s.Index, "blocks", n, "files", rep.Files, "bytes", rep.Bytes)
		}
		pending = slices.DeleteFunc(pending, func(s Shard) bool { _, still := missing[s.Index]; return !still })
		if len(pending) == 0 {
			r.Duration = time.Since(start)
			return r, nil
		}
		if !time.Now().Before(deadline) {
			e := &ShardsMissingError{Source: source, Missing: missing}
			if wait > 0 {
				e.Waited = time.Since(start)
			}
			return r, e
		}
		log.Info("waiting for the fetch's snapshots", "missing", len(pending), "of", len(shards), "waited", time.Since(start).Round(time.Second), "wait", wait)
		w := time.Now()
		t := time.NewTimer(min(PollInterval(wait), time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return r, ctx.Err()
		case <-t.C:
		}
		r.Waited += time.Since(w)
	}
}

// restoreShard restores shard i's snapshot beside dir and merges it into
// the store in dir, returning the blocks the merge added.
func restoreShard(ctx context.Context, bucket *blob.Bucket, source, dir string, i int) (*RestoreReport, int, error) {
	tmp := fmt.Sprintf("%s.shard-%d", filepath.Clean(dir), i)
	if err := os.RemoveAll(tmp); err != nil { // what a killed attempt left
		return nil, 0, fmt.Errorf("archive: restore: %w", err)
	}
	defer os.RemoveAll(tmp)
	rep, err := Restore(ctx, ShardBucket(bucket, i), source+", "+ShardPrefix(i), tmp)
	if err != nil {
		return rep, 0, err
	}
	src, err := staging.Open(tmp, staging.Options{ReadOnly: true})
	if err != nil {
		return rep, 0, err
	}
	defer src.Close()
	dst, err := staging.Open(dir, staging.Options{})
	if err != nil {
		return rep, 0, err
	}
	n, err := dst.MergeFrom(src, 0, ^uint64(0))
	if err == nil {
		err = dst.Flush()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, n, fmt.Errorf("archive: restore: merge shard %d into %s: %w", i, dir, err)
	}
	return rep, n, nil
}
