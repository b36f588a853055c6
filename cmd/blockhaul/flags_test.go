package main

import (
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/pipeline"
)

func TestDeferIndexesFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want pipeline.IndexMode
		err  string
	}{
		{want: pipeline.IndexesAuto},
		{args: []string{"--defer-indexes"}, want: pipeline.IndexesAlways},
		{args: []string{"--defer-indexes=never"}, want: pipeline.IndexesNever},
		{args: []string{"--defer-indexes=AUTO"}, want: pipeline.IndexesAuto},
		{env: "true", want: pipeline.IndexesAlways},
		{env: "false", want: pipeline.IndexesNever},
		{args: []string{"--defer-indexes=always"}, env: "never", want: pipeline.IndexesAlways},
		{args: []string{"--defer-indexes=sometimes"}, err: `want auto, always or never, got "sometimes"`},
		{env: "sometimes", err: "BLOCKHAUL_DEFER_INDEXES"},
	} {
		t.Run(strings.Join(tc.args, " ")+" env="+tc.env, func(t *testing.T) {
			var env []string
			if tc.env != "" {
				env = []string{"BLOCKHAUL_DEFER_INDEXES=" + tc.env}
			}
			fs, cfg := newFlags("run")
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
			if err != nil {
				t.Fatal(err)
			}
			if cfg.DeferIndexes != tc.want {
				t.Fatalf("--defer-indexes is %q, want %q", cfg.DeferIndexes, tc.want)
			}
		})
	}
}

func TestEventEncodingFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want cometbft.EventEncoding
		err  string
	}{
		{want: cometbft.EventEncodingAuto},
		{args: []string{"--event-encoding=base64"}, want: cometbft.EventEncodingBase64},
		{env: "text", want: cometbft.EventEncodingText},
		{args: []string{"--event-encoding=hex"}, err: `unknown event encoding "hex"`},
		{env: "hex", err: "BLOCKHAUL_EVENT_ENCODING"},
	} {
		t.Run(strings.Join(tc.args, " ")+" env="+tc.env, func(t *testing.T) {
			var env []string
			if tc.env != "" {
				env = []string{"BLOCKHAUL_EVENT_ENCODING=" + tc.env}
			}
			fs, cfg := newFlags("export")
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
			if err != nil || cfg.EventEncoding != tc.want {
				t.Fatalf("--event-encoding is %v (%v), want %v", cfg.EventEncoding, err, tc.want)
			}
		})
	}
}

func TestVerifyBlocksFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want chain.Verification
		err  string
	}{
		{want: chain.VerifyFull},
		{args: []string{"--verify-blocks=header"}, want: chain.VerifyHeader},
		{env: "links", want: chain.VerifyLinks},
		{args: []string{"--verify-blocks=none"}, err: `unknown block verification "none" (want full, header or links)`},
		{env: "off", err: "BLOCKHAUL_VERIFY_BLOCKS"},
	} {
		t.Run(strings.Join(tc.args, " ")+" env="+tc.env, func(t *testing.T) {
			var env []string
			if tc.env != "" {
				env = []string{"BLOCKHAUL_VERIFY_BLOCKS=" + tc.env}
			}
			fs, cfg := newFlags("fetch")
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
			if err != nil || cfg.VerifyBlocks != tc.want {
				t.Fatalf("--verify-blocks is %v (%v), want %v", cfg.VerifyBlocks, err, tc.want)
			}
		})
	}
}
