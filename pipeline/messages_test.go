package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/internal/gomodule"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/rpctest"
)

// TestProtoReplay: the recorded node's CosmWasm MsgExecuteContract (signed
// by CosmJS) is kept raw by the built-in set; export --replay messages
// --proto with wasmd's published proto files fills its decoded JSON from
// staging, which agrees with what CosmJS was given (make_txs.mjs): its
// sender is the tx's signer, its contract the bech32 of sha256("contract"),
// its msg the bytes {"swap"={}}.
func TestProtoReplay(t *testing.T) {
	// CosmWasm's wasmd v0.53.0 (Apache-2.0): its tx.proto and the
	// types.proto it imports, from the Go module proxy.
	wasmd := gomodule.Files(t, "github.com/CosmWasm/wasmd", "v0.53.0", "proto",
		"cosmwasm/wasm/v1/tx.proto", "cosmwasm/wasm/v1/types.proto")
	srv := rpctest.NewServer(rpctest.Config{Handler: newCometReplay(t, "node-0.38-sdk").handle})
	defer srv.Close()
	cfg := rpcRunConfig(t, srv.URL)
	cfg.To = 37
	mustRunCfg(t, cfg)

	ctx := context.Background()
	conn := pgtest.ConnectTo(t, cfg.PG)
	const wasm = `FROM cometbft.messages m JOIN cometbft.transactions x USING (height, tx_index) WHERE m.type_url = '/cosmwasm.wasm.v1.MsgExecuteContract'`
	var null bool
	if err := conn.QueryRow(ctx, "SELECT m.decoded IS NULL "+wasm).Scan(&null); err != nil || !null {
		t.Fatalf("before --proto: decoded IS NULL %v, %v", null, err)
	}
	var decodedBefore int
	conn.QueryRow(ctx, "SELECT count(*) FROM cometbft.messages WHERE decoded IS NOT NULL").Scan(&decodedBefore)
	const unknown = "messages: 1 not decoded, of 1 types: /cosmwasm.wasm.v1.MsgExecuteContract (1)"
	if out := statusOf(t, cfg); !strings.Contains(out, unknown) || strings.Contains(out, "transactions:") {
		t.Errorf("status before --proto lacks %q (or counts a signer as unknown):\n%s", unknown, out)
	}

	rc := cfg
	rc.Command, rc.RPC, rc.Replay = CmdExport, nil, []string{"messages"}
	rc.Proto = []string{wasmd}
	mustRunCfg(t, rc)

	sum := sha256.Sum256([]byte("contract"))
	var sender, contract, msg, funds string
	var senderIsSigner bool
	if err := conn.QueryRow(ctx, `SELECT m.decoded->>'sender', m.decoded->>'sender' = x.signers[1], m.decoded->>'contract',
		convert_from(decode(m.decoded->>'msg', 'base64'), 'UTF8'), (m.decoded->'funds'->0->>'amount') || (m.decoded->'funds'->0->>'denom') `+wasm).
		Scan(&sender, &senderIsSigner, &contract, &msg, &funds); err != nil {
		t.Fatal(err)
	}
	if !senderIsSigner || contract != cometbft.Bech32Encode("cosmos", sum[:]) || msg != `{"swap"={}}` || funds != "1uatom" {
		t.Errorf("decoded: sender %s (the signer: %v), contract %s, msg %s, funds %s", sender, senderIsSigner, contract, msg, funds)
	}
	if out := statusOf(t, cfg); strings.Contains(out, "messages:") {
		t.Errorf("status after --proto still lists messages not decoded:\n%s", out)
	}
	var decodedAfter int
	conn.QueryRow(ctx, "SELECT count(*) FROM cometbft.messages WHERE decoded IS NOT NULL").Scan(&decodedAfter)
	if decodedAfter != decodedBefore+1 {
		t.Errorf("decoded messages %d before, %d after; want one more", decodedBefore, decodedAfter)
	}
}

// statusOf is what status --pg prints of cfg's store and database.
func statusOf(t *testing.T, cfg Config) string {
	t.Helper()
	sc := testConfig(CmdStatus, cfg.PG, cfg.Staging, nil, 0, 0)
	var out bytes.Buffer
	if _, err := Run(context.Background(), sc, &out, quiet); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestProtoFlagsValidated: proto files that do not compile and a prefix
// that cannot be one are named by their flags before anything starts.
func TestProtoFlagsValidated(t *testing.T) {
	cfg := testConfig(CmdExport, "postgres://x@127.0.0.1:1/x", t.TempDir(), nil, 1, 10)
	cfg.Proto = []string{t.TempDir()}
	cfg.ProtoDescriptors = []string{filepath.Join(t.TempDir(), "none.binpb")}
	cfg.Bech32Prefix = "Cosmos!"
	err := cfg.Validate()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	flags := map[string]string{}
	for _, f := range ce.Fields {
		flags[f.Flag] = f.Msg
	}
	if !strings.Contains(flags["proto"], "no .proto files") || !strings.Contains(flags["bech32-prefix"], `"Cosmos!"`) {
		t.Errorf("fields %v", flags)
	}
	cfg.Proto = nil
	cfg.messages = nil
	err = cfg.Validate()
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "none.binpb") {
		t.Errorf("a missing descriptor set: %v", err)
	}
}
