// Package nodefixture reads the node-home fixtures that
// scripts/nodehome-fixture.sh records (chain/cometbft/nodehome/testdata):
// a packed node home and the raw records the RPC source staged from the
// same node. For tests only.
package nodefixture

import (
	"archive/tar"
	"bufio"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// Fixture is one recorded node: Records[i] is the record of height i+1.
type Fixture struct {
	Dir     string
	Records [][]byte
}

// Dir returns the directory of the fixture name, wherever the calling test
// runs from.
func Dir(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "chain", "cometbft", "nodehome", "testdata", name)
}

// Load reads the records of the fixture name. A fixture of fewer than a
// thousand heights fails the test: the tests claim a chain of thousands.
func Load(t testing.TB, name string) Fixture {
	t.Helper()
	dir := Dir(name)
	f, err := os.Open(filepath.Join(dir, "records.ndjson.zst"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	fx := Fixture{Dir: dir}
	for sc.Scan() {
		fx.Records = append(fx.Records, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(fx.Records) < 1000 {
		t.Fatalf("%s holds %d records, want a chain of thousands", dir, len(fx.Records))
	}
	return fx
}

// Tip is the highest recorded height.
func (fx Fixture) Tip() uint64 { return uint64(len(fx.Records)) }

// Unpack extracts the fixture's node home into a new temporary directory
// and returns it.
func (fx Fixture) Unpack(t testing.TB) string {
	t.Helper()
	home := t.TempDir()
	f, err := os.Open(filepath.Join(fx.Dir, "home.tar.zst"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(home, filepath.FromSlash(hd.Name))
		switch hd.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return home
}
