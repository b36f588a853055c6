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
)

// Build builds cmd/blockhaul into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "blockhaul")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/blockhaul/blockhaul/cmd/blockhaul").CombinedOutput()
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
