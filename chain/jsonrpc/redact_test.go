package jsonrpc

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:8545", "http://127.0.0.1:8545"},
		{"https://rpc.cosmos.network:443/", "https://rpc.cosmos.network:443/"},
		{"https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef", "https://mainnet.infura.io/v3/***"},
		{"https://eth-mainnet.g.alchemy.com/v2/aB3dEfGhIjKlMnOpQrStUvWxYz012345", "https://eth-mainnet.g.alchemy.com/v2/***"},
		{"https://user:hunter2hunter2@node.example.com/rpc", "https://node.example.com/rpc"},
		{"https://node.example.com/?apikey=SECRETVALUE&chain=eth", "https://node.example.com/?apikey=***&chain=***"},
		{"https://x.quiknode.pro/4f0c2a9e8d7b6a5f4e3d2c1b0a9f8e7d6c5b4a39/", "https://x.quiknode.pro/***/"},
		{"https://rpc.ankr.com/eth/8c1d4b8f3e2a7d6c5b4a3928f1e0d9c8b7a6f5e4d3c2b1a09f8e7d6c5b4a3f2e", "https://rpc.ankr.com/eth/***"},
		{"https://go.getblock.io/3b0c7e1f-4d2a-4a8e-9f6b-2c1d0e9f8a7b", "https://go.getblock.io/***"},
		{"https://node.example.com/ethereum-mainnet/rpc", "https://node.example.com/ethereum-mainnet/rpc"},
		{"http://127.0.0.1:26657/rpc/s3cr3tk3y", "http://127.0.0.1:26657/rpc/***"},
		{"https://rpc.example.com/cosmoshub-4/v1", "https://rpc.example.com/cosmoshub-4/v1"},
		{"https://node.example.com/rpc#frag-secret", "https://node.example.com/rpc"},
		{"https://node.example.com/?0123456789abcdef0123", "https://node.example.com/?***"},
		{"localhost:8545", "localhost:8545"},
		{"https://user:p@ss/word@host/x", "https://***"},
		{"https://user:12#pw@host/x", "https://***"},
		{"http://[::1]:namedport/x", "http://***"},
		{"0123456789abcdef0123456789abcdef", "***"},
		{"::not a url::/key", "***"},
		{"", ""},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLooksLikeKey(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"v3", false},
		{"ethereum-mainnet", false},      // words
		{"cosmoshub-4", false},           // short
		{"ext_bc_C_rpc", false},          // short
		{"0123456789abcdef", true},       // 16 hex
		{"abcdefghijklmnopQRSTUV", true}, // mixed case
		{"abcdefghijklmnopqrstuvwxyzabcdef", true},
		{"with/slash0123456789", false},
		{"s3cr3tk3y", true},      // a short hand-made token
		{"abc123", true},         // three letters, three digits
		{"cosmoshub-4", false},   // a chain id
		{"osmosis-1", false},     // a chain id
		{"mainnet", false},       // a word
		{"arb1", false},          // too short to tell
		{"bsc-dataseed1", false}, // one digit
		{"polygon-zkevm", false}, // words
		{"ext_bc_C_rpc", false},  // words
	} {
		if got := looksLikeKey(tc.s); got != tc.want {
			t.Errorf("looksLikeKey(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestScrubRemovesSecretsOfURL(t *testing.T) {
	raw := "https://" + secrets[0] + ":" + secrets[1] + "@h.example/v3/" + secrets[2] + "?apikey=" + secrets[3]
	msg := `Post "` + raw + `": dial tcp: connection refused`
	got := scrub(msg, secretsOf(raw))
	assertNoSecrets(t, "scrubbed message", got)
	if !strings.Contains(got, "connection refused") {
		t.Errorf("scrub lost the message: %s", got)
	}
}
