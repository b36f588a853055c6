package main

import (
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/pipeline"
)

func TestDeferIndexesFlag(t *testing.T) {
	testValueFlag(t, "run", "BLOCKHAUL_DEFER_INDEXES", func(c *pipeline.Config) any { return c.DeferIndexes }, []valueFlagCase{
		{want: pipeline.IndexesAuto},
		{args: []string{"--defer-indexes"}, want: pipeline.IndexesAlways},
		{args: []string{"--defer-indexes=never"}, want: pipeline.IndexesNever},
		{args: []string{"--defer-indexes=AUTO"}, want: pipeline.IndexesAuto},
		{env: "true", want: pipeline.IndexesAlways},
		{env: "false", want: pipeline.IndexesNever},
		{args: []string{"--defer-indexes=always"}, env: "never", want: pipeline.IndexesAlways},
		{args: []string{"--defer-indexes=sometimes"}, err: `want auto, always or never, got "sometimes"`},
		{env: "sometimes", err: "BLOCKHAUL_DEFER_INDEXES"},
	})
}

// valueFlagCase is one way of setting a flag with a fixed set of values:
// by flag, by environment, or not at all; want is the value it gives, err
// part of the error it must give instead.
type valueFlagCase struct {
	args []string
	env  string
	want any
	err  string
}

// testValueFlag parses each case's args and env for cmd and compares the
// value got reads from the config.
func testValueFlag(t *testing.T, cmd, envName string, got func(*pipeline.Config) any, cases []valueFlagCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " ")+" env="+tc.env, func(t *testing.T) {
			var env []string
			if tc.env != "" {
				env = []string{envName + "=" + tc.env}
			}
			fs, cfg := newFlags(cmd)
			err := fs.Parse(tc.args)
			if err == nil {
				if p, _ := applyEnv(fs, env); len(p) > 0 {
					err = &pipeline.ConfigError{Fields: p}
				}
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got(cfg) != tc.want {
				t.Fatalf("%v: the value is %v (%v), want %v", tc.args, got(cfg), err, tc.want)
			}
		})
	}
}

func TestEventEncodingFlag(t *testing.T) {
	testValueFlag(t, "export", "BLOCKHAUL_EVENT_ENCODING", func(c *pipeline.Config) any { return c.EventEncoding }, []valueFlagCase{
		{want: cometbft.EventEncodingAuto},
		{args: []string{"--event-encoding=base64"}, want: cometbft.EventEncodingBase64},
		{env: "text", want: cometbft.EventEncodingText},
		{args: []string{"--event-encoding=hex"}, err: `unknown event encoding "hex"`},
		{env: "hex", err: "BLOCKHAUL_EVENT_ENCODING"},
	})
}

func TestVerifyBlocksFlag(t *testing.T) {
	testValueFlag(t, "fetch", "BLOCKHAUL_VERIFY_BLOCKS", func(c *pipeline.Config) any { return c.VerifyBlocks }, []valueFlagCase{
		{want: chain.VerifyFull},
		{args: []string{"--verify-blocks=header"}, want: chain.VerifyHeader},
		{env: "links", want: chain.VerifyLinks},
		{args: []string{"--verify-blocks=none"}, err: `unknown block verification "none" (want full, header or links)`},
		{env: "off", err: "BLOCKHAUL_VERIFY_BLOCKS"},
	})
}
