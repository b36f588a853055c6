package pipeline

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A follow runs a replay request only as it would run it itself: another
// chain, schema or event encoding, an unknown table or a batch size out of
// bounds is refused by the flag that says it (exit 2), and a request it
// takes becomes export --replay of the follow's configuration.
func TestReplayRequestReadAgainstTheFollow(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Command, cfg.PG, cfg.Staging = CmdFollow, "postgres://127.0.0.1:1/x", t.TempDir()
	j := mustJob(t, cfg)
	s := &replayServer{cfg: j, pid: 1}
	good := replayRequest{PID: 2, Tables: []string{"events"}, BatchBlocks: 100, Chain: j.Chain, Schema: j.Schema,
		EventEncoding: j.EventEncoding.String(), From: 10, To: 20, FromSet: true, ToSet: true}
	for _, tc := range []struct {
		mod  func(*replayRequest)
		flag string
	}{
		{func(r *replayRequest) { r.Chain = "evm" }, "chain"},
		{func(r *replayRequest) { r.Schema = "elsewhere" }, "schema"},
		{func(r *replayRequest) { r.EventEncoding = "base64" }, "event-encoding"},
		{func(r *replayRequest) { r.Tables = []string{"logs"} }, "replay"},
		{func(r *replayRequest) { r.BatchBlocks = 0 }, "batch-blocks"},
	} {
		req := good
		tc.mod(&req)
		_, err := s.replayConfig(req)
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Fields) != 1 || ce.Fields[0].Flag != tc.flag || ExitCode(err) != ExitConfig {
			t.Errorf("request with another %s: %v, want one problem of --%s", tc.flag, err, tc.flag)
		}
	}
	rc, err := s.replayConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Command != CmdExport || !slices.Equal(rc.Decoding.Tables, []string{"events"}) || rc.From != 10 || rc.To != 20 || !rc.FromSet || !rc.ToSet || rc.BatchBlocks != 100 || rc.PG != j.PG {
		t.Errorf("replay configuration %+v", rc)
	}
	if j.Command != CmdFollow || j.Decoding.Tables != nil {
		t.Errorf("the follow's own job changed: %s, %v", j.Command, j.Decoding.Tables)
	}
}

// A replay request carries the requester's --abi, and the follow compares
// what the ABIs are (their files' digests), not their paths: the same ABI
// at another path is taken and runs with the follow's compiled tables; a
// changed file, another ABI or none is refused by --abi naming both sides.
func TestReplayRequestCarriesABIs(t *testing.T) {
	erc20, err := os.ReadFile("../chain/evm/events/testdata/erc20.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	own := write("own.json", erc20)
	moved := write("moved.json", erc20)
	changedABI := strings.Replace(string(erc20), `"name": "Approval"`, `"name": "Approve"`, 1)
	if changedABI == string(erc20) {
		t.Fatal("the changed ABI is the same as the original: the fixture changed")
	}
	changed := write("changed.json", []byte(changedABI))
	job := func(cmd string, abi ...string) *Job {
		cfg := DefaultConfig()
		cfg.Command, cfg.Chain, cfg.PG, cfg.Staging, cfg.ABI = cmd, "evm", "postgres://127.0.0.1:1/x", dir, abi
		if cmd == CmdExport {
			cfg.Replay = []string{"logs"}
			if len(abi) > 0 {
				cfg.Replay = []string{"erc20_transfer"}
			}
		}
		return mustJob(t, cfg)
	}
	follow := job(CmdFollow, "erc20="+own)
	s := &replayServer{cfg: follow, pid: 1}

	rc, err := s.replayConfig(newReplayRequest(job(CmdExport, "erc20="+moved), "db"))
	if err != nil {
		t.Fatalf("the same ABI at another path: %v", err)
	}
	if rc.Decoding.Events != follow.Decoding.Events || !slices.Equal(rc.Decoding.Tables, []string{"erc20_transfer"}) {
		t.Errorf("the replay decodes with %p %v, want the follow's tables %p [erc20_transfer]", rc.Decoding.Events, rc.Decoding.Tables, follow.Decoding.Events)
	}
	for name, req := range map[string]replayRequest{
		"a changed ABI file": newReplayRequest(job(CmdExport, "erc20="+changed), "db"),
		"no --abi":           newReplayRequest(job(CmdExport), "db"),
	} {
		_, err := s.replayConfig(req)
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Fields) != 1 || ce.Fields[0].Flag != "abi" || ExitCode(err) != ExitConfig {
			t.Errorf("%s: %v, want one problem of --abi", name, err)
			continue
		}
		if msg := ce.Fields[0].Msg; !strings.Contains(msg, own) || (len(req.ABI) > 0 && !strings.Contains(msg, req.ABI[0])) {
			t.Errorf("%s: %q names not both sides' ABIs", name, msg)
		}
	}
	// The request says what the requester resolved: every option, the
	// ABIs' values and digests included, survives the wire.
	req := newReplayRequest(job(CmdExport, "erc20="+moved), "db")
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var back replayRequest
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.ABI, []string{"erc20=" + moved}) || len(back.ABIDigests) != 1 || !slices.Equal(back.ABIDigests, follow.Decoding.ABIDigests) {
		t.Errorf("request on the wire: abi %v digests %v, want the follow's digests %v", back.ABI, back.ABIDigests, follow.Decoding.ABIDigests)
	}
}
