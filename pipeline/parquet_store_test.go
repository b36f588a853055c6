//go:build !blockhaul_nocloud

package pipeline

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/export/parquet"
	"github.com/blockhaul/blockhaul/internal/testserver"
)

// Parquet segments written to a real S3 server (SeaweedFS, every request
// signed and checked) and to Azure Blob Storage (Azurite): run --parquet
// writes them, a second run finds them all, verify --parquet checks them
// against staging, and a byte flipped through the server's own API is
// named by verify with exit status 4.
func TestParquetToObjectStorage(t *testing.T) {
	t.Run("SeaweedFS", func(t *testing.T) {
		weed := testserver.Weed(t)
		endpoint := testserver.SeaweedFS(t, weed, "lake")
		url := "s3://lake?endpoint=" + endpoint + "&use_path_style=true&disable_https=true&region=us-east-1"
		parquetThroughBucket(t, url+"&prefix=cometbft/", url, "cometbft/")
	})
	t.Run("Azurite", func(t *testing.T) {
		host := testserver.StartAzurite(t, testserver.Azurite(t))
		base := testserver.AzuriteContainer(t, host, "lake")
		parquetThroughBucket(t, base+"&prefix=cometbft/", base, "cometbft/")
	})
}

func parquetThroughBucket(t *testing.T, url, rawURL, prefix string) {
	ctx := context.Background()
	tmp := t.TempDir()
	st := filepath.Join(tmp, "staging")
	var out bytes.Buffer
	sum, err := Run(ctx, parquetConfig(t, CmdRun, st, url, 1, 250), &out, quiet)
	if err != nil || !sum.Complete || sum.Parquet.Segments != 3 {
		t.Fatalf("run --parquet %s: %+v, %v\n%s", url, sum.Parquet, err, out.String())
	}
	// The same bytes as in a directory.
	local := filepath.Join(tmp, "local")
	if _, err := Run(ctx, parquetConfig(t, CmdExport, st, local, 1, 250), io.Discard, quiet); err != nil {
		t.Fatal(err)
	}
	raw, err := archive.OpenBucket(ctx, rawURL, false)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	files := dirFiles(t, local)
	for name, want := range files {
		got, err := raw.ReadAll(ctx, prefix+name)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s in the bucket: %d bytes, %v; the directory's %d bytes differ", name, len(got), err, len(want))
		}
	}
	if sum, err := Run(ctx, parquetConfig(t, CmdExport, st, url, 1, 250), io.Discard, quiet); err != nil || sum.Parquet.Skipped != 3 || sum.Parquet.Segments != 0 {
		t.Fatalf("export --parquet again: %+v, %v", sum.Parquet, err)
	}
	vcfg := parquetConfig(t, CmdVerify, st, url, 0, 0)
	vcfg.ToSet = false
	out.Reset()
	if _, err := Run(ctx, vcfg, &out, quiet); err != nil || !strings.Contains(out.String(), "3 segments made again and equal") {
		t.Fatalf("verify --parquet: %v\n%s", err, out.String())
	}
	victim := parquet.FileName("transactions", 100, 199)
	b := bytes.Clone(files[victim])
	b[len(b)/2] ^= 0x40
	if err := raw.WriteAll(ctx, prefix+victim, b, nil); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	_, err = Run(ctx, vcfg, &out, quiet)
	if ExitCode(err) != ExitData || !strings.Contains(out.String(), victim) {
		t.Fatalf("verify of a flipped object: exit %d, %v\n%s", ExitCode(err), err, out.String())
	}
}
