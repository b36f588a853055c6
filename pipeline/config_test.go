package pipeline

import (
	"math"
	"strings"
	"testing"
)

// TestValidateRefusesBadInput covers the inputs issue 12 found accepted or
// failing late: each must be refused by Validate, naming its flag.
func TestValidateRefusesBadInput(t *testing.T) {
	base := DefaultConfig()
	base.Command, base.PG = CmdRun, "postgres://u:secretpw@127.0.0.1/db"
	tests := []refusedConfig{
		{"rps NaN", func(c *Config) { c.RPS = math.NaN() }, []string{"--rps (BLOCKHAUL_RPS)", "NaN"}},
		{"rps +Inf", func(c *Config) { c.RPS = math.Inf(1) }, []string{"--rps", "+Inf"}},
		{"synthetic txs NaN", func(c *Config) { c.SyntheticTxs = math.NaN() }, []string{"--synthetic-txs", "NaN"}},
		{"synthetic txs huge", func(c *Config) { c.SyntheticTxs = 1e12 }, []string{"--synthetic-txs", "1e+12"}},
		{"rpc port out of range", func(c *Config) { c.RPC = []string{"http://127.0.0.1:99999/"} }, []string{"--rpc", "port out of range"}},
		{"rpc port zero", func(c *Config) { c.RPC = []string{"http://127.0.0.1:0/"} }, []string{"--rpc", "port out of range"}},
		{"rpc twice", func(c *Config) { c.RPC = []string{"http://127.0.0.1:26657", "HTTP://127.0.0.1:26657/"} }, []string{"--rpc", "endpoint 2", "endpoint 1 again"}},
		{"http not an addr", func(c *Config) { c.HTTPAddr = "not-an-addr" }, []string{"--http (BLOCKHAUL_HTTP)", "not-an-addr"}},
		{"http port", func(c *Config) { c.HTTPAddr = ":70000" }, []string{"--http", "port"}},
		{"fetch span", func(c *Config) { c.FetchSpan = 1 << 30 }, []string{"--fetch-span", "1073741824"}},
		{"batch blocks", func(c *Config) { c.BatchBlocks = 1 << 30 }, []string{"--batch-blocks", "1073741824"}},
		{"fetch workers", func(c *Config) { c.FetchWorkers = 1 << 20 }, []string{"--fetch-workers"}},
		{"cometbft from 0", func(c *Config) { c.From = 0 }, []string{"--from (BLOCKHAUL_FROM_HEIGHT)", "start at 1"}},
		{"to 0", func(c *Config) { c.To, c.ToSet = 0, true }, []string{"--to", "below --from 1"}},
		{"index memory negative", func(c *Config) { c.IndexMemoryMiB = -1 }, []string{"--index-memory", "got -1"}},
		{"index memory above the server's bound", func(c *Config) { c.IndexMemoryMiB = 1 << 22 }, []string{"--index-memory", "2097151 MiB"}},
		{"alias newline", func(c *Config) { c.Alias = "a\nb" }, []string{"--alias", "U+000A"}},
		{"alias long", func(c *Config) { c.Alias = strings.Repeat("x", 3000) }, []string{"--alias", "3000 bytes"}},
		{"alias invalid utf8", func(c *Config) { c.Alias = "a\xffb" }, []string{"--alias", "UTF-8"}},
		{"every problem at once", func(c *Config) {
			c.RPS, c.SyntheticTxs, c.HTTPAddr, c.FetchSpan, c.Alias = math.NaN(), math.Inf(1), "x", 0, "\t"
		}, []string{"--rps", "--synthetic-txs", "--http", "--fetch-span", "--alias"}},
	}
	checkRefused(t, base, tests)
}

// refusedConfig is a change to a valid configuration that Validate must
// refuse, with what the refusal must name.
type refusedConfig struct {
	name   string
	mutate func(*Config)
	want   []string
}

// checkRefused applies each change to base and expects Validate to refuse
// it with exit status ExitConfig, naming every want and never showing the
// password "secretpw" of base's DSN.
func checkRefused(t *testing.T, base Config, tests []refusedConfig) {
	t.Helper()
	for _, tc := range tests {
		cfg := base
		tc.mutate(&cfg)
		cfg.EnsureDefaults()
		err := cfg.Validate()
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if ExitCode(err) != ExitConfig {
			t.Errorf("%s: exit %d, want %d", tc.name, ExitCode(err), ExitConfig)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", tc.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "secretpw") {
			t.Errorf("%s: error shows the password: %s", tc.name, err)
		}
	}
}

// TestValidateAcceptsGoodInput: the bounds refuse mistakes, not choices.
func TestValidateAcceptsGoodInput(t *testing.T) {
	base := DefaultConfig()
	base.Command, base.PG = CmdRun, "postgres://127.0.0.1/db"
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"chain in capitals", func(c *Config) { c.Chain = "EVM" }},
		{"evm from 0", func(c *Config) { c.Chain, c.From, c.To, c.ToSet = "evm", 0, 0, true }},
		{"two endpoints", func(c *Config) { c.RPC = []string{"http://127.0.0.1:26657", "http://127.0.0.1:26658"} }},
		{"http :0", func(c *Config) { c.HTTPAddr = ":0" }},
		{"http host", func(c *Config) { c.HTTPAddr = "127.0.0.1:9464" }},
		{"alias with spaces inside", func(c *Config) { c.Alias = "backfill of june" }},
		{"big but sane", func(c *Config) { c.FetchSpan, c.BatchBlocks, c.RPS, c.SyntheticTxs = 1000, 20000, 5000, 1500 }},
	} {
		cfg := base
		tc.mutate(&cfg)
		cfg.EnsureDefaults()
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: refused: %v", tc.name, err)
		}
	}
	cfg := base
	cfg.Chain = " EVM "
	cfg.EnsureDefaults()
	if cfg.Chain != "evm" || cfg.Schema != "evm" {
		t.Errorf("--chain EVM became chain %q, schema %q; want evm, evm", cfg.Chain, cfg.Schema)
	}
}
