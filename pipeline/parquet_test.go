package pipeline

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/export/parquet"
)

func parquetConfig(t *testing.T, cmd, stagingDir, dest string, from, to uint64) Config {
	cfg := DefaultConfig()
	cfg.Command, cfg.Staging, cfg.Progress = cmd, stagingDir, 0
	cfg.From, cfg.To, cfg.ToSet = from, to, true
	cfg.Parquet, cfg.SegmentBlocks, cfg.SegmentBlocksSet = dest, 100, true
	cfg.Version = "test"
	return cfg
}

// dirFiles reads every file under dir (relative path → bytes).
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	return out
}

// run --parquet fetches and writes files without PostgreSQL; export
// --parquet of the same staging writes the same bytes; verify --parquet
// passes, and names a flipped file with exit status 4.
func TestParquetRunExportVerify(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	st, a, b := filepath.Join(tmp, "staging"), filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	var out bytes.Buffer
	sum, err := Run(ctx, parquetConfig(t, CmdRun, st, a, 1, 250), &out, quiet)
	if err != nil || !sum.Complete {
		t.Fatalf("run --parquet: complete %v, %v\n%s", sum.Complete, err, out.String())
	}
	if sum.Parquet == nil || sum.Parquet.Segments != 3 || sum.Parquet.Blocks != 250 {
		t.Fatalf("run --parquet summary %+v", sum.Parquet)
	}
	if !strings.Contains(out.String(), "parquet: "+a+": 3 segments written (250 blocks") {
		t.Fatalf("summary does not say what was written:\n%s", out.String())
	}
	if sum, err := Run(ctx, parquetConfig(t, CmdExport, st, b, 1, 250), io.Discard, quiet); err != nil || !sum.Complete {
		t.Fatalf("export --parquet: %v", err)
	}
	fa := dirFiles(t, a)
	if len(fa) == 0 || !reflect.DeepEqual(fa, dirFiles(t, b)) {
		t.Fatalf("run and export wrote different files (%d)", len(fa))
	}
	// Again: nothing to write.
	sum, err = Run(ctx, parquetConfig(t, CmdExport, st, b, 1, 250), io.Discard, quiet)
	if err != nil || sum.Parquet.Segments != 0 || sum.Parquet.Skipped != 3 {
		t.Fatalf("export --parquet again: %+v, %v", sum.Parquet, err)
	}

	vcfg := parquetConfig(t, CmdVerify, st, a, 0, 0)
	vcfg.ToSet = false
	out.Reset()
	if _, err := Run(ctx, vcfg, &out, quiet); err != nil {
		t.Fatalf("verify --parquet: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "3 segments made again and equal") {
		t.Fatalf("verify did not compare with staging:\n%s", out.String())
	}
	flip := filepath.Join(a, "events", "00000000000000000100-00000000000000000199.parquet")
	data := fa["events/00000000000000000100-00000000000000000199.parquet"]
	data = bytes.Clone(data)
	data[100] ^= 1
	if err := os.WriteFile(flip, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	_, err = Run(ctx, vcfg, &out, quiet)
	if ExitCode(err) != ExitData || !strings.Contains(out.String(), "events/00000000000000000100-00000000000000000199.parquet") {
		t.Fatalf("verify of a flipped file: exit %d, %v\n%s", ExitCode(err), err, out.String())
	}
}

// Bad input is refused before anything is written, with exit status 2.
func TestParquetRefusals(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	st := filepath.Join(tmp, "staging")
	if _, err := Run(ctx, parquetConfig(t, CmdRun, st, filepath.Join(tmp, "ok"), 1, 20), io.Discard, quiet); err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(tmp, "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"pg and parquet", func(c *Config) { c.PG = "postgres://x@127.0.0.1/db" }, "--pg or --parquet, not both"},
		{"segment size 0", func(c *Config) { c.SegmentBlocks = 0 }, "at least 1 block"},
		{"unknown table", func(c *Config) { c.Tables = "blocks,nosuch" }, "nosuch"},
		{"unwritable", func(c *Config) { c.Parquet = filepath.Join(notADir, "sub") }, notADir},
		{"export streams", func(c *Config) { c.ExportStreams = 2 }, "export-streams"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dest := filepath.Join(tmp, strings.ReplaceAll(c.name, " ", "-"))
			cfg := parquetConfig(t, CmdExport, st, dest, 1, 20)
			c.edit(&cfg)
			_, err := Run(ctx, cfg, io.Discard, quiet)
			if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("exit %d, %v; want 2 naming %q", ExitCode(err), err, c.want)
			}
			if n := len(dirFiles(t, dest)); n != 0 {
				t.Fatalf("a refused job wrote %d files", n)
			}
		})
	}
	// Another chain's segments in the destination: refused, left as they are.
	evmSt, evmDest := filepath.Join(tmp, "evm-staging"), filepath.Join(tmp, "evm")
	ecfg := parquetConfig(t, CmdRun, evmSt, evmDest, 1, 20)
	ecfg.Chain, ecfg.Schema = "evm", "evm"
	if _, err := Run(ctx, ecfg, io.Discard, quiet); err != nil {
		t.Fatal(err)
	}
	before := dirFiles(t, evmDest)
	_, err := Run(ctx, parquetConfig(t, CmdExport, st, evmDest, 1, 20), io.Discard, quiet)
	if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "evm chain") {
		t.Fatalf("another chain's destination: exit %d, %v", ExitCode(err), err)
	}
	if !reflect.DeepEqual(dirFiles(t, evmDest), before) {
		t.Fatal("a refused job changed the destination")
	}
}

// follow --parquet writes each segment once its last height is final,
// and the part-segment up to --to once --to is.
func TestParquetFollow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	dest := filepath.Join(tmp, "out")
	cfg := parquetConfig(t, CmdFollow, filepath.Join(tmp, "staging"), dest, 1, 230)
	cfg.Confirmations, cfg.PollInterval = 5, 10*time.Millisecond
	cfg.SyntheticTip = 235
	sum, err := Run(ctx, cfg, io.Discard, quiet)
	if err != nil || !sum.Complete {
		t.Fatalf("follow --parquet: complete %v, %v", sum.Complete, err)
	}
	b, err := parquet.OpenDir(dest, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, ok, err := parquet.ReadManifest(ctx, b)
	if err != nil || !ok {
		t.Fatalf("manifest: %v %v", ok, err)
	}
	var got [][2]uint64
	for _, s := range m.Segments {
		got = append(got, [2]uint64{s.From, s.To})
	}
	if want := [][2]uint64{{1, 99}, {100, 199}, {200, 230}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
}
