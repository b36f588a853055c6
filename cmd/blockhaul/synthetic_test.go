package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSyntheticParametersAreAnotherChain: a store filled from the synthetic
// chain of one set of parameters refuses blocks of another (status 4, wrong
// chain), for each family and each parameter, rather than adding them or
// calling the range staged; the same parameters again are a no-op.
func TestSyntheticParametersAreAnotherChain(t *testing.T) {
	for _, tc := range []struct {
		chain string
		first []string
		other []string
	}{
		{"evm", nil, []string{"--synthetic-txs", "10"}},
		{"evm", []string{"--synthetic-txs", "10"}, []string{"--synthetic-txs", "11"}},
		{"cometbft", nil, []string{"--synthetic-txs", "10"}},
		{"cometbft", nil, []string{"--synthetic-steady"}},
	} {
		t.Run(tc.chain+strings.Join(tc.other, " "), func(t *testing.T) {
			stg := filepath.Join(t.TempDir(), "staging")
			base := []string{"fetch", "--chain", tc.chain, "--staging", stg, "--from", "1", "--progress-interval", "0", "--log-level", "warn"}
			if code, out := blockhaul(t, append(append(base, "--to", "20"), tc.first...)...); code != 0 {
				t.Fatalf("first fetch exited %d:\n%s", code, out)
			}
			if code, out := blockhaul(t, append(append(base, "--to", "20"), tc.first...)...); code != 0 {
				t.Fatalf("the same fetch again exited %d:\n%s", code, out)
			}
			for _, to := range []string{"20", "30"} {
				code, out := blockhaul(t, append(append(base, "--to", to), tc.other...)...)
				if code != 4 || !strings.Contains(out, "synthetic chain") {
					t.Errorf("fetch 1..%s with %v into a store of %v: exit %d, want 4 naming the synthetic chain:\n%s", to, tc.other, tc.first, code, out)
				}
			}
		})
	}
}
