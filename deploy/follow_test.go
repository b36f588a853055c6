package deploy_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/pipeline"
)

// The follow Deployment's head stream starts one above the range the export
// Job backfills (range.yaml's BLOCKHAUL_TO_HEIGHT): without --from it would
// start at the chain's first height while the export Job still waits for
// the fetch, and export the backfill's range again beside it.
func TestFollowStartsAboveTheBackfilledRange(t *testing.T) {
	m := load(t)
	cm, ok := m.configMaps["blockhaul-range"]
	if !ok {
		t.Fatal("deploy/ has no ConfigMap blockhaul-range")
	}
	to, err := strconv.ParseUint(cm.Data["BLOCKHAUL_TO_HEIGHT"], 10, 64)
	if err != nil {
		t.Fatalf("BLOCKHAUL_TO_HEIGHT: %v", err)
	}
	d, ok := m.deployments["blockhaul-follow"]
	if !ok {
		t.Fatal("no Deployment blockhaul-follow")
	}
	_, flags, _ := m.settings(t, "Deployment blockhaul-follow", d.Spec.Template.Spec.Containers[0], -1)
	if want := strconv.FormatUint(to+1, 10); flags["from"] != want {
		t.Errorf("follow's --from is %q, want %s: one above the backfilled range's end %d", flags["from"], want, to)
	}
	// The chain and the node are the range's (before: --chain=cometbft and
	// the RPC written in follow.yaml, so a chain changed in range.yaml left
	// the head on CometBFT).
	for _, f := range []string{"chain", "rpc"} {
		if want := cm.Data[pipeline.EnvName(f)]; flags[f] != want || want == "" {
			t.Errorf("follow's --%s is %q, want range.yaml's %q", f, flags[f], want)
		}
	}
	_, literal := argsOf(t, "Deployment blockhaul-follow", d.Spec.Template.Spec.Containers[0])
	for _, f := range []string{"chain", "rpc", "from"} {
		if v, ok := literal[f]; ok && !strings.HasPrefix(v, "$(") {
			t.Errorf("follow.yaml writes --%s=%s itself; it is range.yaml's", f, v)
		}
	}
}
