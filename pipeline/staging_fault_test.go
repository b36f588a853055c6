package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
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

// A store that lost durably staged records (here: a flipped byte in its
// WAL) is reported by status, which exits 4 instead of showing the lost
// heights as plain gaps.
func TestStatusSaysTheStoreIsDamaged(t *testing.T) {
	dir := t.TempDir()
	st := stagingtest.Open(t, dir, staging.Options{})
	if err := st.Bind(chain.FamilyCometBFT, "test-1"); err != nil {
		t.Fatal(err)
	}
	b := st.NewBatch()
	for h := uint64(1); h <= 50; h++ {
		raw := bytes.Repeat([]byte(fmt.Sprintf("block %d ", h)), 200)
		if err := b.Put(chain.Block{Height: h, Hash: []byte{byte(h), 1}, ParentHash: []byte{byte(h - 1), 1}, Raw: raw}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	sort.Strings(logs)
	wal, err := os.ReadFile(logs[len(logs)-1])
	if err != nil {
		t.Fatal(err)
	}
	wal[len(wal)/2] ^= 0x5a
	if err := os.WriteFile(logs[len(logs)-1], wal, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Status(context.Background(), bareJob(Config{Staging: dir}), &out)
	var ce *staging.CorruptStoreError
	if !errors.As(err, &ce) || ExitCode(err) != ExitData || !strings.Contains(out.String(), "damaged:") {
		t.Fatalf("status of a store whose WAL lost records: %v (exit %d)\n%s", err, ExitCode(err), out.String())
	}
	t.Logf("%s", out.String())
}
