package bench

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// archive/rates.json, which estimate embeds, is the rates of
// bench/results/latest.json: the newest whole run, not an older one or a
// hand-edited figure.
func TestRatesFileIsTheLatestResults(t *testing.T) {
	latest, err := os.ReadFile("results/latest.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Rates(latest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../" + RatesFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the rates of results/latest.json (regenerate it: a whole bench run writes both):\n%s\nwant:\n%s", RatesFile, got, want)
	}
	if !strings.Contains(string(got), `"blocks_per_s"`) {
		t.Fatalf("%s holds no rate:\n%s", RatesFile, got)
	}
}

// WriteRates writes what Rates keeps of a result.
func TestWriteRates(t *testing.T) {
	p := t.TempDir() + "/rates.json"
	r := Result{Date: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}
	r.Machine.Host, r.Machine.CPUs = "h", 3
	if err := WriteRates(p, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"host": "h"`) || !strings.Contains(string(b), `"cpus": 3`) || !strings.Contains(string(b), `"date": "2026-12-07T00:00:00Z"`) {
		t.Fatalf("rates file:\n%s", b)
	}
}
