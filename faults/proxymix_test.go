package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/bench"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/internal/faultproxy"
)

// mixRate is the share of requests the mixed run faults, spread evenly over
// every transient class.
const mixRate = 0.20

// TestFaultProxyMix runs a long job through a node that fails mixRate of
// its requests across every transient class at once (429, 5xx, hangs, cut
// bodies, resets, a wrong height or hash now and then): the job must end
// complete, with tables identical to a run without the proxy. (A span whose
// attempts ran out used to fail the job: 5,000 blocks died after 62 s.)
// The campaign runs it over 5,000 blocks; the default run over 1,000.
func TestFaultProxyMix(t *testing.T) {
	to := uint64(1000)
	if campaign {
		to = 5000
	}
	ctx := context.Background()
	srv, err := bench.NewRPCServer(ctx, cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 7}), 1, to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ref := newJob(t)
	ref.extra = []string{"--rpc", srv.URL(), "--rpc-timeout", "1s"}
	mustRun(t, "reference run", ref.args("run", 1, to)...)
	want := digest(t, ref.dsn, "cometbft")

	classes := []faultproxy.Class{faultproxy.Throttle, faultproxy.ServerError, faultproxy.Hang, faultproxy.Truncate, faultproxy.Reset, faultproxy.WrongHeight, faultproxy.WrongHash}
	rates := map[faultproxy.Class]float64{}
	for _, c := range classes {
		rates[c] = mixRate / float64(len(classes))
	}
	p, err := faultproxy.New(faultproxy.Config{Target: srv.URL(), Seed: 21, Rates: rates, MaxHang: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	j := newJob(t)
	j.extra = []string{"--rpc", p.URL, "--rpc-timeout", "1s"}
	start := time.Now()
	code, out := blockhaul(t, 15*time.Minute, j.args("run", 1, to)...)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("run through %.0f%% faults (%s): exit %d after %.0fs: %s", mixRate*100, p.Summary(), code, took.Seconds(), errorLine(out))
	}
	if d := diffDigests(digest(t, j.dsn, "cometbft"), want, nil); len(d) > 0 {
		t.Fatalf("run through %.0f%% faults: tables differ: %s", mixRate*100, strings.Join(d, "; "))
	}
	var injected []string
	for _, c := range classes {
		if p.Injected(c) == 0 {
			t.Errorf("no %v fault injected in %d requests", c, p.Requests())
		}
		injected = append(injected, fmt.Sprintf("%v=%d", c, p.Injected(c)))
	}
	report(t, "proxy mix (%d blocks, %.0f%% of %d requests faulted: %s): exit 0 identical in %.0fs",
		to, mixRate*100, p.Requests(), strings.Join(injected, " "), took.Seconds())
}
