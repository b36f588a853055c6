package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublishShardsThenMergeParts: two publishes as shards of an Indexed
// Job write their chunks and parts, no manifest; publish --merge-parts
// writes the manifest from the archive alone, with a --staging that does
// not exist (and is not made); --merge-parts with a flag of a publish of
// chunks is refused, exit 2.
func TestPublishShardsThenMergeParts(t *testing.T) {
	stg := archiveFixture(t, "cometbft", 150)
	dest := filepath.Join(t.TempDir(), "archive")
	publish := func(edit func(*Config)) (string, error) {
		cfg := DefaultConfig()
		cfg.Command, cfg.Staging, cfg.Args, cfg.ChunkBlocks = CmdPublish, stg, []string{dest}, 50
		edit(&cfg)
		var out bytes.Buffer
		_, err := Run(context.Background(), cfg, &out, quiet)
		return out.String(), err
	}
	for i, r := range [][2]uint64{{1, 99}, {100, 150}} {
		out, err := publish(func(c *Config) {
			c.Shards, c.ShardIndex, c.ShardIndexSet = 2, i, true
			c.From, c.FromSet, c.To, c.ToSet = r[0], true, r[1], true
		})
		if err != nil || !strings.Contains(out, "manifest part parts/shard-") {
			t.Fatalf("shard %d: %v\n%s", i, err, out)
		}
	}
	if ms, _ := filepath.Glob(filepath.Join(dest, "*", "manifest.json")); len(ms) != 0 {
		t.Fatalf("the shards wrote a manifest: %v", ms)
	}
	nowhere := filepath.Join(t.TempDir(), "no-store")
	if _, err := publish(func(c *Config) { c.MergeParts, c.Staging = true, nowhere }); ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "not with --chunk-blocks") {
		t.Fatalf("--merge-parts with --chunk-blocks: exit %d, %v", ExitCode(err), err)
	}
	out, err := publish(func(c *Config) { c.MergeParts, c.Staging, c.ChunkBlocks = true, nowhere, 0 })
	if err != nil || !strings.Contains(out, "merge of 2 manifest parts") || !strings.Contains(out, "manifest: 3 chunks of 50 blocks") {
		t.Fatalf("publish --merge-parts: %v\n%s", err, out)
	}
	if ms, _ := filepath.Glob(filepath.Join(dest, "*", "manifest.json")); len(ms) != 1 {
		t.Fatalf("publish --merge-parts wrote %d manifests", len(ms))
	}
	if _, err := os.Stat(nowhere); !os.IsNotExist(err) {
		t.Errorf("publish --merge-parts made --staging %s: %v", nowhere, err)
	}
}
