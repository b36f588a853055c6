package faults

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/blockhaul/blockhaul/staging/stagingtest"
)

// TestExitStatuses asserts every exit status docs/exit-status.md maps, each for its
// causes, on the built binary.
func TestExitStatuses(t *testing.T) {
	type tc struct {
		name string
		code int
		// setup prepares the job and returns the arguments to run.
		setup func(t *testing.T) []string
		// want must match the output (the error names its cause).
		want string
	}
	closedPort := "http://127.0.0.1:1"
	cases := []tc{
		{"0 complete", 0, func(t *testing.T) []string {
			return newJob(t).args("run", 1, 50)
		}, `heights 1-50, complete`},
		{"1 network: no node answers", 1, func(t *testing.T) []string {
			j := newJob(t)
			return append(j.args("fetch", 1, 10), "--rpc", closedPort)
		}, `connection refused`},
		{"1 database unreachable", 1, func(t *testing.T) []string {
			j := newJob(t)
			j.dsn = "postgres://postgres@127.0.0.1:1/none?sslmode=disable"
			return j.args("run", 1, 10)
		}, `PostgreSQL`},
		{"2 export of heights never staged", 2, func(t *testing.T) []string {
			j := newJob(t)
			mustRun(t, "fetch", j.args("fetch", 1, 20)...)
			return j.args("export", 1, 40)
		}, `not staged .*\(21-40\)`},
		{"2 invalid flags, every one named", 2, func(t *testing.T) []string {
			return append(newJob(t).args("run", 1, 10), "--batch-blocks", "0", "--fetch-workers", "-1")
		}, `(?s)--fetch-workers.*--batch-blocks|--batch-blocks.*--fetch-workers`},
		{"2 unknown flag", 2, func(t *testing.T) []string {
			return append(newJob(t).args("run", 1, 10), "--no-such-flag")
		}, `no-such-flag`},
		{"2 no command", 2, func(t *testing.T) []string { return []string{"--from", "1"} }, `(?i)usage|no command`},
		{"2 range reversed", 2, func(t *testing.T) []string { return newJob(t).args("run", 10, 1) }, `--to`},
		{"4 another chain's staging", 4, func(t *testing.T) []string {
			j := newJob(t)
			mustRun(t, "fetch", j.args("fetch", 1, 20)...)
			j.seed = "8"
			return j.args("fetch", 21, 40)
		}, `refusing (the|cometbft) .*chain`},
		{"4 corrupt staged record", 4, func(t *testing.T) []string {
			j := newJob(t)
			mustRun(t, "fetch", j.args("fetch", 1, 40)...)
			stagingtest.FlipRecordBytes(t, j.staging, 0x40, 25)
			return j.args("export", 1, 40)
		}, `corrupt record at height 25`},
		{"4 continuity break", 4, func(t *testing.T) []string {
			j := newJob(t)
			mustRun(t, "fetch", j.args("fetch", 1, 40)...)
			replaceWithOtherChain(t, j.staging, 30)
			return j.args("export", 1, 40)
		}, `continuity break at height 3[01]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.setup(t)
			code, out := blockhaul(t, 2*time.Minute, args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d:\n%s", code, c.code, tail(out, 20))
			}
			if !regexp.MustCompile(c.want).MatchString(out) {
				t.Fatalf("exit %d, but the output does not match %q:\n%s", code, c.want, tail(out, 20))
			}
			if panicked(out) {
				t.Fatalf("a panic escaped:\n%s", tail(out, 40))
			}
		})
	}
	t.Run("3 interrupted by SIGTERM", func(t *testing.T) {
		j := newJob(t)
		p := startProc(t, nil, append(j.args("run", 1, 20000), "--progress-interval", "100ms")...)
		// Signal once a progress line shows exported heights: part way.
		for line := range p.lines {
			if i := strings.Index(line, "export.done="); i >= 0 && !strings.HasPrefix(line[i:], "export.done=0 ") {
				p.cmd.Process.Signal(syscall.SIGTERM)
				break
			}
		}
		if code := p.wait(t, time.Minute); code != 3 {
			t.Fatalf("SIGTERM: exit %d, want 3:\n%s", code, tail(p.out.String(), 20))
		}
	})
}

// replaceWithOtherChain stages, in place of height h, block h of another
// synthetic chain: a well-formed record whose parent hash is not the hash
// of block h-1.
func replaceWithOtherChain(t *testing.T, dir string, h uint64) {
	t.Helper()
	other := cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 8, ChainID: "blockhaul-synthetic-7"})
	blocks, err := other.Fetch(context.Background(), h, h)
	if err != nil || len(blocks) != 1 {
		t.Fatalf("synthetic block %d: %v", h, err)
	}
	st := stagingtest.Open(t, filepath.Clean(dir), staging.Options{})
	defer st.Close()
	if err := st.Delete(h, h); err != nil {
		t.Fatal(err)
	}
	bt := st.NewBatch()
	defer bt.Close()
	if err := bt.Put(blocks[0]); err != nil {
		t.Fatal(err)
	}
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
}
