// Package nodefixture reads the node-home fixtures that
// scripts/nodehome-fixture.sh records (chain/cometbft/nodehome/testdata):
// a packed node home and the raw records the RPC source staged from the
// same node. For tests only.
package nodefixture

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/blockhaul/blockhaul/internal/rpctest"
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
	zr, done := openZstd(t, filepath.Join(dir, "records.ndjson.zst"))
	defer done()
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

// openZstd opens the zstd file at path for reading; done closes it.
func openZstd(t testing.TB, path string) (zr *zstd.Decoder, done func()) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err = zstd.NewReader(f)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	return zr, func() { zr.Close(); f.Close() }
}

// Tip is the highest recorded height.
func (fx Fixture) Tip() uint64 { return uint64(len(fx.Records)) }

// Unpack extracts the fixture's node home into a new temporary directory
// and returns it.
func (fx Fixture) Unpack(t testing.TB) string {
	t.Helper()
	home := t.TempDir()
	zr, done := openZstd(t, filepath.Join(fx.Dir, "home.tar.zst"))
	defer done()
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

// Serve serves the fixture's records through JSON-RPC as the node did:
// status, block and block_results, each result the recorded bytes. The
// server stops when the test ends.
func (fx Fixture) Serve(t testing.TB) *rpctest.Server {
	t.Helper()
	type parts struct {
		Block        json.RawMessage `json:"block"`
		BlockResults json.RawMessage `json:"block_results"`
	}
	split := make([]parts, len(fx.Records))
	for i, rec := range fx.Records {
		if err := json.Unmarshal(rec, &split[i]); err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
	}
	var hdr struct {
		Block struct {
			Header struct {
				ChainID string `json:"chain_id"`
			} `json:"header"`
		} `json:"block"`
	}
	if err := json.Unmarshal(split[0].Block, &hdr); err != nil {
		t.Fatal(err)
	}
	status := map[string]any{
		"node_info": map[string]any{"network": hdr.Block.Header.ChainID},
		"sync_info": map[string]any{"latest_block_height": strconv.Itoa(len(split))},
	}
	srv := rpctest.NewServer(rpctest.Config{Handler: func(method string, params json.RawMessage) (any, *rpctest.Error) {
		if method == "status" {
			return status, nil
		}
		var p struct {
			Height string `json:"height"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &rpctest.Error{Code: -32602, Message: err.Error()}
		}
		h, err := strconv.Atoi(p.Height)
		if err != nil || h < 1 || h > len(split) {
			return nil, &rpctest.Error{Code: -32603, Message: "Internal error", Data: "height " + p.Height + " must be less than or equal to the current blockchain height"}
		}
		switch method {
		case "block":
			return split[h-1].Block, nil
		case "block_results":
			return split[h-1].BlockResults, nil
		}
		return nil, &rpctest.Error{Code: -32601, Message: "Method not found"}
	}})
	t.Cleanup(srv.Close)
	return srv
}

// SetConfig replaces the line of home's config/config.toml that sets key
// (it must be there once) with line.
func SetConfig(t *testing.T, home, key, line string) {
	t.Helper()
	path := filepath.Join(home, "config", "config.toml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	n := 0
	for i, l := range lines {
		if strings.HasPrefix(l, key+" =") {
			lines[i] = line
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%s: %d lines set %s", path, n, key)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}
