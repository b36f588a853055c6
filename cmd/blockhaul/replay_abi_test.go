package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/syncbuf"
	"github.com/blockhaul/blockhaul/internal/testbin"
)

// abiFiles writes the ERC-20 ABI twice (same bytes, two paths) and a
// changed one (its Approval event left out), returning their paths.
func abiFiles(t *testing.T) (same1, same2, changed string) {
	t.Helper()
	b, err := os.ReadFile("../../chain/evm/events/testdata/erc20.json")
	if err != nil {
		t.Fatal(err)
	}
	var abi []map[string]any
	if err := json.Unmarshal(b, &abi); err != nil {
		t.Fatal(err)
	}
	var kept []map[string]any
	for _, e := range abi {
		if e["name"] != "Approval" {
			kept = append(kept, e)
		}
	}
	cb, err := json.Marshal(kept)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	same1, same2, changed = filepath.Join(dir, "a", "erc20.json"), filepath.Join(dir, "b", "erc20.json"), filepath.Join(dir, "c", "erc20.json")
	for p, data := range map[string][]byte{same1: b, same2: b, changed: cb} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return same1, same2, changed
}

// TestReplayThroughAFollowCarriesABIs: export --replay handed to a running
// follow carries its --abi. An ABI that differs from the follow's (the
// same NAME, another file's contents) is refused by --abi naming both
// (exit 2: the follow decodes as its head stream does, and used to run
// the replay with its own ABI, silently); the same ABI at another path
// agrees and the replay runs through the follow.
func TestReplayThroughAFollowCarriesABIs(t *testing.T) {
	ctx := context.Background()
	abiA, abiB, abiChanged := abiFiles(t)
	dsn := pgtest.NewDatabase(t)
	stg := filepath.Join(t.TempDir(), "staging")
	fout := &syncbuf.Buffer{}
	follow := exec.Command(binary, "follow", "--chain", "evm", "--abi", "erc20="+abiA, "--pg", dsn, "--staging", stg, "--from", "0", "--to", "20000",
		"--synthetic-seed", seed, "--synthetic-tip", "60", "--synthetic-block-time", "100ms", "--poll-interval", "50ms",
		"--batch-blocks", "50", "--progress-interval", "0", "--log-level", "info")
	follow.Env = testbin.CleanEnv()
	follow.Stdout, follow.Stderr = fout, fout
	follow.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- follow.Wait() }()
	t.Cleanup(func() {
		follow.Process.Kill()
		<-exited
	})
	conn := connect(t, dsn)
	eventually(t, 2*time.Minute, "the follow exports height 60", func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the follow exited (%v):\n%s", err, fout.String())
		default:
		}
		var h int64
		err := conn.QueryRow(ctx, `SELECT height FROM evm.blockhaul_checkpoints WHERE stream = 'head'`).Scan(&h)
		return err == nil && h >= 60
	})

	replay := func(abi string) (int, string) {
		cmd := exec.Command(binary, "export", "--chain", "evm", "--abi", "erc20="+abi, "--pg", dsn, "--staging", stg,
			"--replay", "erc20_transfer", "--from", "0", "--to", "50", "--batch-blocks", "50", "--progress-interval", "0", "--log-level", "warn")
		cmd.Env = testbin.CleanEnv()
		out := &syncbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			err := <-done
			done <- err
		})
		return exitWithin(t, done, 2*time.Minute, "replay --abi "+abi, out), out.String()
	}

	code, out := replay(abiChanged)
	if code != 2 || !strings.Contains(out, "--abi") || !strings.Contains(out, abiChanged) || !strings.Contains(out, abiA) {
		t.Fatalf("a replay with another ABI than the follow's: exit %d, want 2 naming --abi, %s and %s:\n%s", code, abiChanged, abiA, out)
	}
	code, out = replay(abiB)
	if code != 0 || !strings.Contains(out, "run by the follow holding") {
		t.Fatalf("a replay with the follow's ABI at another path: exit %d, want 0, run by the follow:\n%s", code, out)
	}
}
