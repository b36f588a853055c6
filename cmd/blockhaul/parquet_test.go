package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/blockhaul/blockhaul/internal/testbin"
)

func parquetArgs(cmd, staging, dest string) []string {
	return []string{cmd, "--staging", staging, "--parquet", dest, "--from", "1", "--to", "450", "--segment-blocks", "100",
		"--synthetic-seed", seed, "--batch-blocks", "60", "--progress-interval", "0", "--log-level", "warn"}
}

// treeOf reads every file under dir (relative path → bytes).
func treeOf(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// run --parquet SIGKILLed at several points — after the first file of a
// segment, after the files of the third segment but before its manifest
// entry, after the last segment's first file — and run again gives the
// bytes of a run never killed, and the files the killed run left
// half-written are gone.
func TestParquetSIGKILLResumesToTheSameBytes(t *testing.T) {
	ref := t.TempDir()
	if code, out := blockhaul(t, parquetArgs("run", filepath.Join(ref, "staging"), filepath.Join(ref, "out"))...); code != 0 {
		t.Fatalf("uninterrupted run exited %d:\n%s", code, out)
	}
	want := treeOf(t, filepath.Join(ref, "out"))
	if len(want) < 10 {
		t.Fatalf("the uninterrupted run wrote %d files", len(want))
	}
	for _, spec := range []string{"parquet-file:1", "parquet-file:9", "parquet-manifest:3", "parquet-file:33"} {
		t.Run(spec, func(t *testing.T) {
			dir := t.TempDir()
			stg, dest := filepath.Join(dir, "staging"), filepath.Join(dir, "out")
			cmd := exec.Command(binary, parquetArgs("run", stg, dest)...)
			cmd.Env = append(testbin.CleanEnv(), "BLOCKHAUL_CRASHPOINT="+spec)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
				t.Fatalf("the run at %s was not killed: %v\n%s", spec, err, out.String())
			}
			if got := treeOf(t, dest); reflect.DeepEqual(got, want) {
				t.Fatalf("the kill at %s came after the run had written everything", spec)
			}
			// What the killed run left is refused by nothing and verifies:
			// every segment its manifest lists is whole.
			if _, err := os.Stat(filepath.Join(dest, "manifest.json")); err == nil {
				if code, out := blockhaul(t, "verify", "--parquet", dest, "--staging", stg, "--log-level", "warn"); code != 0 {
					t.Fatalf("verify after a kill at %s exited %d:\n%s", spec, code, out)
				}
			}
			if code, out := blockhaul(t, parquetArgs("run", stg, dest)...); code != 0 {
				t.Fatalf("the run after a kill at %s exited %d:\n%s", spec, code, out)
			}
			got := treeOf(t, dest)
			for name := range got {
				if strings.HasSuffix(name, ".tmp") {
					t.Errorf("left behind: %s", name)
				}
			}
			if !reflect.DeepEqual(got, want) {
				var differ []string
				for name := range want {
					if !bytes.Equal(got[name], want[name]) {
						differ = append(differ, name)
					}
				}
				t.Fatalf("after a kill at %s and a run: %d files, the uninterrupted run's %d; these differ: %v", spec, len(got), len(want), differ)
			}
		})
	}
}
