package pipeline

import (
	"errors"
	"slices"
	"testing"
)

// A follow runs a replay request only as it would run it itself: another
// chain, schema or event encoding, an unknown table or a batch size out of
// bounds is refused by the flag that says it (exit 2), and a request it
// takes becomes export --replay of the follow's configuration.
func TestReplayRequestReadAgainstTheFollow(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Command, cfg.PG, cfg.Staging = CmdFollow, "postgres://127.0.0.1:1/x", t.TempDir()
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := &replayServer{cfg: &cfg, pid: 1}
	good := replayRequest{PID: 2, Tables: []string{"events"}, BatchBlocks: 100, Chain: cfg.Chain, Schema: cfg.Schema,
		EventEncoding: cfg.EventEncoding.String(), From: 10, To: 20, FromSet: true, ToSet: true}
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
	if rc.Command != CmdExport || !slices.Equal(rc.SelectedTables, []string{"events"}) || rc.From != 10 || rc.To != 20 || !rc.FromSet || !rc.ToSet || rc.BatchBlocks != 100 || rc.PG != cfg.PG {
		t.Errorf("replay configuration %+v", rc)
	}
	if cfg.Command != CmdFollow || cfg.SelectedTables != nil {
		t.Errorf("the follow's own configuration changed: %s, %v", cfg.Command, cfg.SelectedTables)
	}
}
