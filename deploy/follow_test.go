package deploy_test

import (
	"strconv"
	"testing"
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
	_, flags := argsOf(t, "Deployment blockhaul-follow", d.Spec.Template.Spec.Containers[0])
	if want := strconv.FormatUint(to+1, 10); flags["from"] != want {
		t.Errorf("follow's --from is %q, want %s: one above the backfilled range's end %d", flags["from"], want, to)
	}
}
