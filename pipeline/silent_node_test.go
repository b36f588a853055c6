package pipeline

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/rpctest"
	"github.com/blockhaul/blockhaul/internal/syncbuf"
)

// A fetch from a node that accepts connections and never answers ends
// (exit 1) once the node has answered nothing for the client's bound,
// naming the endpoint and what was asked; meanwhile the job names its first
// failing request and says what it waits on. It once exited after 183 s,
// silent for the first 90. (The bound is a minute and the reports every
// 10 s outside tests.)
func TestFetchFromSilentNodeEnds(t *testing.T) {
	url := rpctest.Silent(t)
	cfg := testConfig(CmdFetch, "", filepath.Join(t.TempDir(), "s"), nil, 1, 100)
	cfg.RPC = []string{url}
	cfg.RPCTimeout = 300 * time.Millisecond
	cfg.rpcSilentAfter, cfg.rpcWaitReport = 1500*time.Millisecond, 50*time.Millisecond
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	_, err := Run(context.Background(), cfg, io.Discard, log)
	if err == nil || ExitCode(err) != ExitFailed {
		t.Fatalf("fetch from a silent node: %v (exit %d), want exit 1", err, ExitCode(err))
	}
	if msg := err.Error(); !strings.Contains(msg, url) || !strings.Contains(msg, "answered nothing") || !strings.Contains(msg, "asked: ") {
		t.Errorf("error %q does not name the endpoint and what was asked", msg)
	}
	out := logs.String()
	for _, want := range []string{"request failed; retrying", "waiting for the node's first answer"} {
		if i := strings.Index(out, want); i < 0 || !strings.Contains(out[i:], "endpoint="+url) {
			t.Errorf("the log does not say %q naming the endpoint:\n%s", want, out)
		}
	}
}
