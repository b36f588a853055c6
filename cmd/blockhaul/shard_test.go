package main

import (
	"strings"
	"testing"
)

// TestShardIndexFromJob: --shard-index falls back to JOB_COMPLETION_INDEX,
// which Kubernetes sets in an Indexed Job's pods, only when --shards is
// given; the flag and BLOCKHAUL_SHARD_INDEX win over it.
func TestShardIndexFromJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		index   int
		set     bool
		problem string
	}{
		{name: "from the job", args: []string{"--shards", "4"}, env: []string{"JOB_COMPLETION_INDEX=3"}, index: 3, set: true},
		{name: "flag wins", args: []string{"--shards", "4", "--shard-index", "1"}, env: []string{"JOB_COMPLETION_INDEX=3"}, index: 1, set: true},
		{name: "BLOCKHAUL_SHARD_INDEX wins", args: []string{"--shards", "4"}, env: []string{"JOB_COMPLETION_INDEX=3", "BLOCKHAUL_SHARD_INDEX=2"}, index: 2, set: true},
		{name: "ignored without --shards", env: []string{"JOB_COMPLETION_INDEX=3"}},
		{name: "not a number", args: []string{"--shards", "4"}, env: []string{"JOB_COMPLETION_INDEX=three"}, set: true, problem: `--shard-index (JOB_COMPLETION_INDEX): "three"`},
		{name: "neither", args: []string{"--shards", "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := parseCommandLine(append([]string{"fetch", "--to", "100"}, tc.args...), tc.env)
			var problems []string
			for _, p := range cl.problems {
				problems = append(problems, p.Error())
			}
			all := strings.Join(problems, "\n")
			if tc.problem == "" && all != "" || !strings.Contains(all, tc.problem) {
				t.Fatalf("problems %q, want %q", all, tc.problem)
			}
			if tc.problem == "" && (cl.cfg.ShardIndex != tc.index || cl.cfg.ShardIndexSet != tc.set) {
				t.Errorf("shard index %d (set %v), want %d (set %v)", cl.cfg.ShardIndex, cl.cfg.ShardIndexSet, tc.index, tc.set)
			}
			if cl.cfg.ShardIndexSet != tc.set {
				t.Errorf("ShardIndexSet %v, want %v", cl.cfg.ShardIndexSet, tc.set)
			}
		})
	}
}
