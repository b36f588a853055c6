// Package crashpoint names the moments of a job (an export's batch, a
// fetch's staging commit) at which a crash or a failure is worth testing,
// and lets a test act there: fail the operation, cancel its context, or
// kill the process.
//
// The engines call Hit at each point; with no hook installed it costs one
// atomic load. In-process tests install a hook with Set. Tests of the built
// binary arm a point through the environment:
//
//	BLOCKHAUL_CRASHPOINT=after-commit:3         SIGKILL at the 3rd after-commit
//	BLOCKHAUL_CRASHPOINT=mid-index-build:1:300ms SIGKILL 300ms after the 1st
//	                                             index build started (the
//	                                             server is then building it)
//
// (the count defaults to 1; cmd/blockhaul calls ArmFromEnv). The package is
// internal: it is a test seam of this module, not an API.
package crashpoint

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Point is a named moment of an export.
type Point string

// The points. Each of an export's is hit once per batch (or per index
// build), in this order within a batch; StageCommit once per staging commit.
const (
	// AfterCopy: every table's COPY of the batch has been sent inside its
	// transaction; the checkpoint is not yet saved.
	AfterCopy Point = "after-copy"
	// BeforeCommit: rows and checkpoint are written; COMMIT is not yet sent.
	BeforeCommit Point = "before-commit"
	// AfterCommit: the batch is committed; the staging mirror of the
	// checkpoint is not yet written.
	AfterCommit Point = "after-commit"
	// MidIndexBuild: a deferred index's build transaction holds its locks
	// and the CREATE INDEX is about to be sent. A hook that kills the
	// client a moment later leaves the server building it.
	MidIndexBuild Point = "mid-index-build"
	// StageCommit: fetch's writer is about to commit a staging batch. An
	// error returned here is the commit's error (a full disk, a damaged
	// store), met by the writer exactly where staging would return it.
	StageCommit Point = "stage-commit"
	// ParquetFile: a Parquet segment's file of one table is written whole
	// (hit once per file); the segment's other files and its manifest
	// entry may not be.
	ParquetFile Point = "parquet-file"
	// ParquetManifest: every file of a Parquet segment is written; the
	// manifest that lists the segment is not.
	ParquetManifest Point = "parquet-manifest"
)

// Points lists every point, for tests that walk them all.
var Points = []Point{AfterCopy, BeforeCommit, AfterCommit, MidIndexBuild, StageCommit, ParquetFile, ParquetManifest}

// Hook acts at a point. A non-nil error is returned by the engine as if
// the operation at that point had failed (the transaction, if any, is
// rolled back).
type Hook func(ctx context.Context, p Point) error

var hook atomic.Pointer[Hook]

// Set installs h for every point and returns a function that removes it.
// Tests that use it must not run in parallel with other tests of the
// process that export.
func Set(h Hook) (restore func()) {
	prev := hook.Swap(&h)
	return func() { hook.Store(prev) }
}

// Hit is called by the engines at p.
func Hit(ctx context.Context, p Point) error {
	h := hook.Load()
	if h == nil || *h == nil {
		return nil
	}
	return (*h)(ctx, p)
}

// ArmFromEnv reads spec ("point[:count[:delay]]", the value of
// BLOCKHAUL_CRASHPOINT) and, when it is not empty, installs a hook that
// SIGKILLs this process at the count-th hit of point, after delay. It
// returns an error naming what does not parse.
func ArmFromEnv(spec string) error {
	if spec == "" {
		return nil
	}
	parts := strings.Split(spec, ":")
	p := Point(parts[0])
	known := false
	for _, q := range Points {
		known = known || q == p
	}
	if !known || len(parts) > 3 {
		return fmt.Errorf("BLOCKHAUL_CRASHPOINT %q: want point[:count[:delay]], point one of %v", spec, Points)
	}
	count, delay := int64(1), time.Duration(0)
	if len(parts) > 1 {
		n, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil || n < 1 {
			return fmt.Errorf("BLOCKHAUL_CRASHPOINT %q: count must be a positive integer", spec)
		}
		count = n
	}
	if len(parts) > 2 {
		d, err := time.ParseDuration(parts[2])
		if err != nil || d < 0 {
			return fmt.Errorf("BLOCKHAUL_CRASHPOINT %q: delay must be a duration", spec)
		}
		delay = d
	}
	var hits atomic.Int64
	Set(func(_ context.Context, at Point) error {
		if at != p || hits.Add(1) != count {
			return nil
		}
		kill := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
		if delay == 0 {
			kill()
			select {} // the signal is on its way
		}
		time.AfterFunc(delay, kill)
		return nil
	})
	return nil
}
