package archive

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"
)

// MeasuredRates is rates.json as it was when the binary was built: the
// rates of the newest whole benchmark run (bench/results/latest.json, as
// MeasuredRun reads it), which bench.WriteRates writes beside this file.
// Embedded, so that estimate reads the rates the benchmark measured
// wherever the binary runs, not only in a checkout.
//
//go:embed rates.json
var MeasuredRates []byte

// MeasuredRatesName names MeasuredRates in an estimate's report.
const MeasuredRatesName = "archive/rates.json, the benchmark's rates embedded in this binary"

// TimeRates are the rates an estimate's times come from, and where those
// come from.
type TimeRates struct {
	FetchBlocksPerSec  float64
	ExportBlocksPerSec float64
	Source             string // for the report: what measured them, or why they are defaults
	// Fetch, when set, is the fetch rate measured from the job's own
	// source (estimate --rpc), which replaces FetchBlocksPerSec.
	Fetch *FetchProbe
	// Deferred, when set, is what a fill into empty tables defers, for
	// the estimate's after-the-fill time.
	Deferred *Deferred
}

// MeasuredRun is the part of a bench result (bench.Result, as written to
// bench/results/*.json) an estimate reads, and all that rates.json keeps of
// the newest (bench.WriteRates writes it).
type MeasuredRun struct {
	Date    string `json:"date"`
	Machine struct {
		Host string `json:"host"`
		CPUs int    `json:"cpus"`
	} `json:"machine"`
	Densities []struct {
		Name   string `json:"name"`
		Ingest struct {
			BlocksPerS float64 `json:"blocks_per_s"`
		} `json:"ingest"`
		Export struct {
			BlocksPerS float64 `json:"blocks_per_s"`
		} `json:"export"`
	} `json:"densities"`
	Fetch *struct {
		Chain     string `json:"chain"`
		Blockhaul struct {
			BlocksPerS float64 `json:"blocks_per_s"`
		} `json:"blockhaul"`
	} `json:"fetch"`
}

// BenchTimeRates reads the fetch and export rates of the family named fam
// from result, the bench result (bench.Result as JSON) named where, when it
// was measured on this machine (same host name and CPU count): export from
// the family's export run, fetch from the fetch run against a local server
// where it was of this family, else from the staging ingest. Otherwise it
// returns the defaults' times with a Source that says why they are
// defaults.
func BenchTimeRates(result []byte, where, fam string, defaults Rates) TimeRates {
	def := func(why string) TimeRates {
		return TimeRates{FetchBlocksPerSec: defaults.FetchBlocksPerSec, ExportBlocksPerSec: defaults.ExportBlocksPerSec, Source: "default rates (" + why + ")"}
	}
	if len(result) == 0 {
		return def("no benchmark result in " + where)
	}
	var r MeasuredRun
	if err := json.Unmarshal(result, &r); err != nil {
		return def(fmt.Sprintf("the benchmark result %s is unreadable: %v", where, err))
	}
	host, _ := os.Hostname()
	if r.Machine.Host != host || r.Machine.CPUs != runtime.NumCPU() {
		return def(fmt.Sprintf("the benchmark result %s is of host %q with %d CPUs, this is %q with %d", where, r.Machine.Host, r.Machine.CPUs, host, runtime.NumCPU()))
	}
	for _, dn := range r.Densities {
		if dn.Name != fam || dn.Export.BlocksPerS <= 0 {
			continue
		}
		t := TimeRates{ExportBlocksPerSec: dn.Export.BlocksPerS, FetchBlocksPerSec: dn.Ingest.BlocksPerS}
		what := "staging ingest"
		if r.Fetch != nil && r.Fetch.Chain == fam && r.Fetch.Blockhaul.BlocksPerS > 0 {
			t.FetchBlocksPerSec, what = r.Fetch.Blockhaul.BlocksPerS, "local server"
		}
		if t.FetchBlocksPerSec <= 0 {
			t.FetchBlocksPerSec, what = defaults.FetchBlocksPerSec, "default"
		}
		date := r.Date
		if ts, err := time.Parse(time.RFC3339Nano, r.Date); err == nil {
			date = ts.UTC().Format("2006-01-02 15:04 UTC")
		}
		t.Source = fmt.Sprintf("measured on this machine by the benchmark of %s (%s; fetch: %s, export: export run)", date, where, what)
		return t
	}
	return def(fmt.Sprintf("the benchmark result %s has no %s export run", where, fam))
}
