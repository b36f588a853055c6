// Package testbin is what the tests that run blockhaul as a process share:
// the build of the binary and an environment without the BLOCKHAUL_
// settings of whoever runs the tests.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Build builds cmd/blockhaul into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "blockhaul")
	// Built from its directory, not by import path: go stamps the commit
	// into a binary only when it builds the main package by directory.
	src, err := exec.Command("go", "list", "-f", "{{.Dir}}", "github.com/blockhaul/blockhaul/cmd/blockhaul").Output()
	if err != nil {
		return "", fmt.Errorf("build blockhaul: find its directory: %w", err)
	}
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, ".")
	build.Dir = strings.TrimSpace(string(src))
	out, err := build.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build blockhaul: %w\n%s", err, out)
	}
	return bin, nil
}

// CleanEnv is this process's environment without any BLOCKHAUL_ variable,
// so that a child's flags are the test's alone.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BLOCKHAUL_") {
			env = append(env, kv)
		}
	}
	return env
}

// Main is a TestMain's whole body for a package whose tests run the
// binary: it builds blockhaul into a temporary directory, sets *bin to its
// path, runs the tests, removes the directory and exits with the tests'
// status (1 without running them when the build fails).
func Main(m *testing.M, bin *string) {
	dir, err := os.MkdirTemp("", "blockhaul-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
