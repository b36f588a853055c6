package pipeline

import (
	"errors"
	"fmt"
	"testing"

	"github.com/blockhaul/blockhaul/staging"
)

// A full disk is an operator problem (free space, run again): exit 1. A
// damaged store is data wrong: exit 4, also once the store is broken by it.
func TestExitCodeOfStagingFaults(t *testing.T) {
	corrupt := &staging.CorruptStoreError{Dir: "d", File: "000012.sst", Err: errors.New("checksum mismatch")}
	full := &staging.NoSpaceError{Dir: "d", Free: 10, Need: 20}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("fetch: %w", full), ExitFailed},
		{&staging.BrokenStoreError{Dir: "d", Err: full}, ExitFailed},
		{fmt.Errorf("export: %w", corrupt), ExitData},
		{&staging.BrokenStoreError{Dir: "d", Err: corrupt}, ExitData},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
