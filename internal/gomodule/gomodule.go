// Package gomodule gives tests the files of a published Go module, fetched
// through the Go module proxy into the module cache by `go mod download`,
// so that third-party files a test reads (a chain's .proto definitions) are
// not kept in this repository. The proxy is there wherever the module
// builds; when the download fails a plain go test skips, saying why, and
// under CI (CI=true) the test fails.
package gomodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Dir returns the directory of module path@version in the module cache
// (read-only), downloading it first if it is not there.
func Dir(t testing.TB, path, version string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", path+"@"+version)
	// Outside any module: the download neither reads nor touches the
	// go.mod and go.sum of the package under test.
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); err == nil && (jerr != nil || info.Dir == "") {
		err = fmt.Errorf("no directory in its answer (%v): %s", jerr, out)
	}
	if err != nil || info.Error != "" {
		why := info.Error
		if why == "" {
			why = strings.TrimSpace(err.Error() + ": " + stderr.String())
		}
		unavailable(t, fmt.Sprintf("go mod download %s@%s: %s", path, version, why))
	}
	return info.Dir
}

// Files copies the named parts of the module path@version (slash-separated
// paths below its root, each a file or a directory taken whole) into a new
// temporary directory, each at its path below sub, and returns that
// directory: a test takes the files it was written for, no more, even
// where the module holds others beside them.
func Files(t testing.TB, path, version, sub string, parts ...string) string {
	t.Helper()
	root := filepath.Join(Dir(t, path, version), filepath.FromSlash(sub))
	dst := t.TempDir()
	for _, part := range parts {
		from := filepath.Join(root, filepath.FromSlash(part))
		err := filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			b, err := os.ReadFile(p)
			if err == nil {
				err = os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dst, rel), b, 0o644)
			}
			return err
		})
		if err != nil {
			t.Fatalf("%s@%s: %s: %v", path, version, part, err)
		}
	}
	return dst
}

func unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: under CI=true a test whose files cannot be fetched fails", msg)
	}
	t.Skip(msg)
}
