package scripts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/testbin"
)

// TestDemoFollow runs make demo-follow's script on a short chain: follow
// catches up, follows the growing, reorganising chain to its --to, and the
// head checkpoint ends there.
func TestDemoFollow(t *testing.T) {
	dir := t.TempDir()
	bin, err := testbin.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	base := pgtest.BaseURL()
	db := fmt.Sprintf("bh_demo_follow_test_%d", time.Now().UnixNano())
	conn := pgtest.ConnectTo(t, base)
	t.Cleanup(func() { // after the test, on the connection closed only then
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", db, err)
		}
	})

	script, err := filepath.Abs("demo-follow.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, base)
	cmd.Dir = dir // its demo-data/ goes there
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BLOCKHAUL_") && !strings.HasPrefix(kv, "DEMO_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DEMO_BIN="+bin, "DEMO_DB="+db, "DEMO_FOLLOW_START=100", "DEMO_FOLLOW_TO=160",
		"DEMO_BLOCK_TIME=20ms", "DEMO_REORG_EVERY=20", "DEMO_REORG_DEPTH=3")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo-follow: %v\n%s", err, out)
	}
	// Whether follow sees a reorg here depends on the wall clock (the
	// chain grows in real time); that it repairs them is
	// pipeline.TestFollowSyntheticBlockTimeAndReorgs's, on the chain's tick.
	if !strings.Contains(string(out), "blockhaul follow: heights 1-160, complete") {
		t.Errorf("follow did not complete 1-160:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^ head +\| +160$`).Match(out) {
		t.Errorf("the head checkpoint is not at 160:\n%s", out)
	}
}
