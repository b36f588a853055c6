package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/bench"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
	"github.com/blockhaul/blockhaul/internal/faultproxy"
	"github.com/blockhaul/blockhaul/loader"
)

// proxyRate is each class's share of requests in the transient runs.
const proxyRate = 0.10

// fastTransient and fastPersistent are the classes the fast variant runs
// (those whose fixes are on main); the campaign runs every class.
var (
	fastTransient  = []faultproxy.Class{faultproxy.Throttle, faultproxy.ServerError, faultproxy.Truncate, faultproxy.Reset, faultproxy.WrongHeight, faultproxy.WrongHash, faultproxy.BatchRefused}
	fastPersistent = []faultproxy.Class{faultproxy.ServerError, faultproxy.Reset, faultproxy.WrongHash}
)

type family struct {
	name   string
	src    loader.Source
	to     uint64
	target uint64 // the height persistent faults hit
	// args are the family's own flags: EVM's 300 blocks at the default
	// span are ≈26 requests, too few for a 10% rate to be sure of a fault
	// (0.9^26 ≈ 6%; the draws are fixed by the requests, so an unlucky set
	// of requests misses every class at once), so it fetches 4 a request.
	args []string
}

func families() []family {
	fams := []family{{name: "cometbft", src: cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 7}), to: 400, target: 208}}
	if campaign {
		fams[0].to = 600
		fams = append(fams, family{name: "evm", src: evmsynth.NewSynthetic(evmsynth.SyntheticConfig{Seed: 7, TxPerBlock: 6, LogsPerBlock: 12}), to: 300, target: 160, args: []string{"--fetch-span", "4"}})
	}
	return fams
}

// TestFaultProxy runs blockhaul through the fault proxy in front of each
// family's RPC server: every transient class at proxyRate must end with
// tables identical to a run without the proxy; every persistent class (the
// fault on every attempt at one height) must end, within a bound, with an
// error naming the height and nothing wrong exported, and a rerun against
// the healthy node must then end identical (so nothing wrong was staged).
// Batches refused for good are not an error: the client falls back to
// single calls and must end identical.
func TestFaultProxy(t *testing.T) {
	for _, fam := range families() {
		t.Run(fam.name, func(t *testing.T) { proxyFamily(t, fam) })
	}
}

func proxyFamily(t *testing.T, fam family) {
	ctx := context.Background()
	srv, err := bench.NewRPCServer(ctx, fam.src, 1, fam.to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	jobFor := func(t *testing.T, url string) job {
		j := newJob(t)
		j.chain = fam.name
		j.extra = append([]string{"--rpc", url, "--rpc-timeout", "1s"}, fam.args...)
		return j
	}
	ref := jobFor(t, srv.URL())
	mustRun(t, "reference run", ref.args("run", 1, fam.to)...)
	want := digest(t, ref.dsn, fam.name)
	tables := []string{}
	for k := range want {
		if dataTables(k) && k != "(indexes)" {
			tables = append(tables, k)
		}
	}

	transient, persistent := fastTransient, fastPersistent
	if campaign {
		transient, persistent = faultproxy.Classes(), faultproxy.Classes()
	}
	var okT, okP []string
	var bad []string
	var worst time.Duration
	for _, c := range transient {
		p, err := faultproxy.New(faultproxy.Config{Target: srv.URL(), Seed: 11, Rates: map[faultproxy.Class]float64{c: proxyRate}, MaxHang: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		j := jobFor(t, p.URL)
		code, out := blockhaul(t, 4*time.Minute, j.args("run", 1, fam.to)...)
		p.Close()
		switch d := diffDigests(digest(t, j.dsn, fam.name), want, nil); {
		case code != 0:
			bad = append(bad, fmt.Sprintf("transient %v (%s): exit %d: %s", c, p.Summary(), code, errorLine(out)))
		case len(d) > 0:
			bad = append(bad, fmt.Sprintf("transient %v (%s): tables differ: %s", c, p.Summary(), strings.Join(d, "; ")))
		case p.Injected(c) == 0:
			bad = append(bad, fmt.Sprintf("transient %v: no fault injected in %d requests", c, p.Requests()))
		default:
			okT = append(okT, fmt.Sprintf("%v=%d/%d", c, p.Injected(c), p.Requests()))
		}
	}
	for _, c := range persistent {
		p, err := faultproxy.New(faultproxy.Config{Target: srv.URL(), Seed: 11, Persistent: map[faultproxy.Class]uint64{c: fam.target}, MaxHang: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		j := jobFor(t, p.URL)
		start := time.Now()
		code, out := blockhaul(t, 3*time.Minute, j.args("run", 1, fam.to)...)
		took := time.Since(start)
		p.Close()
		worst = max(worst, took)
		wrong := wrongRows(t, j.dsn, ref.dsn, fam.name, tables)
		if panicked(out) {
			bad = append(bad, fmt.Sprintf("persistent %v: a panic escaped: %s", c, errorLine(out)))
			continue
		}
		if c == faultproxy.BatchRefused {
			if d := diffDigests(digest(t, j.dsn, fam.name), want, nil); code != 0 || len(d) > 0 {
				bad = append(bad, fmt.Sprintf("persistent %v: exit %d, %d tables differ: %s", c, code, len(d), errorLine(out)))
			} else {
				okP = append(okP, fmt.Sprintf("%v→exit 0 identical", c))
			}
			continue
		}
		named := namesHeight(errorLine(out), fam.target)
		// Heal: the same job against the node itself must end identical.
		j.extra = append([]string{"--rpc", srv.URL(), "--rpc-timeout", "1s"}, fam.args...)
		hcode, hout := blockhaul(t, 3*time.Minute, j.args("run", 1, fam.to)...)
		d := diffDigests(digest(t, j.dsn, fam.name), want, nil)
		switch {
		case code == hung:
			bad = append(bad, fmt.Sprintf("persistent %v at %d: hung (killed after 3m)", c, fam.target))
		case code == 0:
			bad = append(bad, fmt.Sprintf("persistent %v at %d: exit 0 (%d wrong rows)", c, fam.target, wrong))
		case !named:
			bad = append(bad, fmt.Sprintf("persistent %v at %d: exit %d, error does not name the height: %s", c, fam.target, code, errorLine(out)))
		case wrong > 0:
			bad = append(bad, fmt.Sprintf("persistent %v at %d: exit %d but %d wrong rows exported", c, fam.target, code, wrong))
		case hcode != 0 || len(d) > 0:
			bad = append(bad, fmt.Sprintf("persistent %v at %d: the healthy rerun exited %d, %d tables differ (something wrong was staged?): %s", c, fam.target, hcode, len(d), errorLine(hout)))
		default:
			okP = append(okP, fmt.Sprintf("%v→exit %d in %.1fs", c, code, took.Seconds()))
		}
	}
	report(t, "proxy %s (%d blocks, rate %.0f%%): transient %d/%d identical [%s]; persistent at %d %d/%d named, bounded (≤%.0fs), nothing wrong [%s]",
		fam.name, fam.to, proxyRate*100, len(okT), len(transient), strings.Join(okT, " "), fam.target, len(okP), len(persistent), worst.Seconds(), strings.Join(okP, " "))
	for _, b := range bad {
		t.Error(b)
	}
}
