package jsonrpc

import (
	"strings"
	"testing"
	"time"
)

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := Config{
		Endpoints: []string{
			"ftp://" + secrets[0] + ":" + secrets[1] + "@host.example/",
			"http://node.example:8545",
			"http://node.example:8545",
			"node.example/v3/" + secrets[2],
			"https://host.example:port/v3/" + secrets[2] + "?k=" + secrets[3],
			"https:///nohost",
			"https://host.example:99999/v3/" + secrets[2],
		},
		RPS:         -1,
		Concurrency: -2,
		MaxBatch:    -3,
		Timeout:     -time.Second,
		BaseBackoff: 2 * time.Second,
		MaxBackoff:  time.Second,
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted a broken config")
	}
	msg := err.Error()
	for _, want := range []string{
		"endpoints[0] (ftp://host.example/): scheme must be http or https",
		"endpoints[2] (http://node.example:8545): duplicate of endpoints[1]",
		"endpoints[3] (***): missing scheme",
		"endpoints[4] (https://***): not a valid URL",
		"endpoints[5] (https://***): missing host",
		"endpoints[6] (https://host.example:99999/v3/***): port out of range",
		"rps -1",
		"concurrency -2",
		"max batch -3",
		"timeout -1s",
		"base backoff 2s: exceeds max backoff 1s",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "endpoints[1]:") || strings.Contains(msg, "endpoints[1] (") {
		t.Errorf("valid endpoint reported: %s", msg)
	}
	assertNoSecrets(t, "validation error", msg)
	if _, err := New(cfg); err == nil {
		t.Error("New accepted a config Validate rejects")
	}
}

func TestValidateAcceptsDefaults(t *testing.T) {
	if err := (Config{Endpoints: []string{"http://127.0.0.1:8545"}}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "no endpoints") {
		t.Errorf("empty config: %v", err)
	}
	// A base backoff above the default max raises the max with it.
	if err := (Config{Endpoints: []string{"http://h"}, BaseBackoff: time.Minute}).Validate(); err != nil {
		t.Errorf("base backoff beyond the default max: %v", err)
	}
}

func TestEnsureDefaults(t *testing.T) {
	d := Config{}.EnsureDefaults()
	if d.Concurrency != defaultConcurrency || d.MaxBatch != defaultMaxBatch || d.Timeout != defaultTimeout ||
		d.MaxRetries != defaultMaxRetries || d.Burst != 1 || d.Logger == nil || d.RPS != 0 {
		t.Errorf("defaults: %+v", d)
	}
	kept := Config{Concurrency: 3, MaxRetries: -1}.EnsureDefaults()
	if kept.Concurrency != 3 || kept.MaxRetries != -1 {
		t.Errorf("set fields overwritten: %+v", kept)
	}
}

func TestNewDisambiguatesRedactedNames(t *testing.T) {
	c, err := New(Config{Endpoints: []string{
		"https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef",
		"https://mainnet.infura.io/v3/fedcba9876543210fedcba9876543210",
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Endpoints()
	if got[0] != "https://mainnet.infura.io/v3/***" || got[1] != "https://mainnet.infura.io/v3/*** [1]" {
		t.Errorf("endpoints %q", got)
	}
}
