package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/staging"
)

// TestRefusedJobLeavesNoStagingDirectory: a run whose first staging write
// is refused (the free-space reserve) stages nothing, and leaves no
// staging directory of the ones it made; a directory it was given stays,
// and every command reads it: status says it holds nothing (exit 0), a
// reader that needs a store refuses it as bad input (exit 2), and the
// job, run again, fills it.
func TestRefusedJobLeavesNoStagingDirectory(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	root := t.TempDir()
	refuse := func() func() {
		return crashpoint.Set(func(_ context.Context, p crashpoint.Point) error {
			if p == crashpoint.StageCommit {
				return &staging.NoSpaceError{Dir: root, Free: 60 << 20, Need: 136 << 20}
			}
			return nil
		})
	}
	made := filepath.Join(root, "new", "s")
	restore := refuse()
	_, err := Run(context.Background(), testConfig(CmdRun, dsn, made, nil, 1, 200), io.Discard, quiet)
	restore()
	if !errors.As(err, new(*staging.NoSpaceError)) {
		t.Fatalf("run with its first write refused: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a run refused before it staged anything left %s: %v", filepath.Join(root, "new"), err)
	}

	// A directory it was given stays, and every command reads it: a
	// store that holds nothing staged.
	given := filepath.Join(root, "given")
	if err := os.Mkdir(given, 0o755); err != nil {
		t.Fatal(err)
	}
	restore = refuse()
	_, err = Run(context.Background(), testConfig(CmdFetch, "", given, nil, 1, 200), io.Discard, quiet)
	restore()
	if !errors.As(err, new(*staging.NoSpaceError)) {
		t.Fatalf("fetch with its first write refused: %v", err)
	}
	status := func(dir string) string {
		t.Helper()
		cfg := DefaultConfig()
		cfg.Command, cfg.Staging = CmdStatus, dir
		var out bytes.Buffer
		if _, err := Run(context.Background(), cfg, &out, quiet); err != nil {
			t.Fatalf("status of %s: exit %d, %v\n%s", dir, ExitCode(err), err, out.String())
		}
		return out.String()
	}
	if out := status(given); !strings.Contains(out, "staged:   nothing") {
		t.Errorf("status of what a refused fetch left:\n%s", out)
	}
	if _, err := Run(context.Background(), verifyCmd(given, ""), io.Discard, quiet); err != nil {
		t.Errorf("verify of what a refused fetch left: %v", err)
	}

	// An empty directory (what an Open refused by the free-space reserve
	// leaves of a directory it was given) holds no store: status says
	// so, exit 0, and a reader that needs a store refuses it, exit 2.
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if out := status(empty); !strings.Contains(out, "none") {
		t.Errorf("status of an empty directory:\n%s", out)
	}
	for _, cmd := range []string{CmdVerify, CmdSnapshot, CmdPrune} {
		cfg := DefaultConfig()
		cfg.Command, cfg.Staging, cfg.Below, cfg.BelowSet = cmd, empty, 10, true
		if cmd == CmdSnapshot {
			cfg.Args = []string{filepath.Join(root, "snap")}
		}
		_, err := Run(context.Background(), cfg, io.Discard, quiet)
		if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "holds no staging store") {
			t.Errorf("%s of an empty directory: exit %d, %v", cmd, ExitCode(err), err)
		}
	}
	if entries, err := os.ReadDir(empty); err != nil || len(entries) != 0 {
		t.Errorf("the commands wrote into the empty directory: %v, %v", names(entries), err)
	}
	if sum, err := Run(context.Background(), testConfig(CmdFetch, "", given, nil, 1, 200), io.Discard, quiet); err != nil || !sum.Complete {
		t.Fatalf("fetch into it again: %v", err)
	}
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
