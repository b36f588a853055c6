package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
	err = cfg.Validate()
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "none.binpb") {
		t.Errorf("a missing descriptor set: %v", err)
	}
}

// TestRealBlocksSigners exports real blocks of crypto.org and Cronos nodes
// (CometBFT 0.34 answers; chain/cometbft/protodec/testdata/chainindexing,
// from crypto-com/chain-indexing) through the RPC path into PostgreSQL,
// one height a run (the status answer, chain id and tip, is the test's
// own; /block and /block_results are the node's), and checks what the issue found NULL: each
// transaction's signer and fee payer, with no --bech32-prefix, equal to the
// address the node itself put in the transaction's events (message.sender,
// acc_seq) and in its JSON of the messages (proposer, delegator, from,
// signer). 1634 is signed with an ethsecp256k1 key (the address is Keccak
// of the key), 2036 and 643189 (crypto.org mainnet, three txs, an IBC
// client update and timeout) with secp256k1. Every message decodes with
// the built-in set; one of each block is checked field by field.
func TestRealBlocksSigners(t *testing.T) {
	dir := filepath.Join("..", "chain", "cometbft", "protodec", "testdata", "chainindexing")
	for _, c := range []struct {
		chainID string
		height  uint64
		signers []string // one per transaction, in block order: its signers, comma-separated (the first pays the fee)
		check   string   // on its first message's decoded JSON
		raw     int      // messages the built-in descriptors cannot read
	}{
		{"crypto-org-chain-mainnet-1", 2036, []string{"cro1nk4rq3q46ltgjghxz80hy385p9uj0tf58apkcd"},
			`decoded->'content'->>'title' = 'Test Proposal' AND decoded->'initial_deposit'->0->>'amount' = '20000' AND decoded->>'proposer' = signers[1]`, 0},
		{"cronos_777-1", 1634, []string{"crc12luku6uxehhak02py4rcz65zu0swh7wjsrw0pp"},
			`decoded->'messages'->0->>'@type' = '/cosmos.upgrade.v1beta1.MsgSoftwareUpgrade' AND decoded->'messages'->0->'plan'->>'height' = '1000' AND decoded->>'proposer' = signers[1]`, 0},
		{"crypto-org-chain-mainnet-1", 643189, []string{"cro1wdyk7kys6hcrljrmn2ppjcu559csvlpt8gpddy", "cro1v32h6ccfvs8v6qc0natzhgs566es3mrwu42mw9", "cro1q040rm026jmpfmxdsj6q9phm9tdceepnsau6me"},
			`decoded->>'delegator_address' = signers[1] AND decoded->>'validator_address' = 'crocncl1xe5ralcgy59refsalqxg2khy3jvwxmrq25wamu'`, 0},
		// A MsgCreateValidator (tx 1) whose only event address of its
		// signer's bytes before message.sender is the operator's
		// (create_validator.validator, tcrocncl1…): the signer is the
		// account, as message.sender and the other txs' transfers say. Its
		// pubkey is a bech32 string (field 6 before the SDK made it an Any
		// in v0.40.0): the built-in MsgCreateValidator does not read it.
		{"testnet-croeseid-1", 503978, []string{"tcro1txt930xuxlfkwf8kneh5zyte2ch7wpv7y0dluf", "tcro1fmprm0sjy6lz9llv7rltn0v2azzwcwzvk2lsyn", "tcro1fs8r6zxmr5nc86j8cpcmjmccf8s2cafxh5hy8r"},
			`decoded->>'delegator_address' = signers[1] AND decoded->>'validator_address' = 'tcrocncl1txt930xuxlfkwf8kneh5zyte2ch7wpv73swxy2'`, 1},
		// A MsgMultiSend with two inputs, signed by both, SignerInfos with
		// no public keys (the keys were on chain already): both signers
		// from the tx's two tx.acc_seq events.
		{"chaintest", 324, []string{"cro1rrnm2rkhrkgelj7j9pxeu7sggv8fde3tkymym7,cro1442fdq2t62vqchraj6ujxnhq3gkzq3ra9nt4lc"},
			`decoded->'inputs'->0->>'address' = signers[1] AND decoded->'inputs'->1->>'address' = signers[2]`, 0},
	} {
		t.Run(fmt.Sprint(c.height), func(t *testing.T) {
			read := func(name string) json.RawMessage {
				b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s_%d.json", name, c.height)))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			answers := map[string]json.RawMessage{"block": read("block"), "block_results": read("block_results"),
				"status": json.RawMessage(fmt.Sprintf(`{"node_info":{"network":%q},"sync_info":{"latest_block_height":"%d"}}`, c.chainID, c.height))}
			srv := rpctest.NewServer(rpctest.Config{Handler: func(method string, params json.RawMessage) (any, *rpctest.Error) {
				var p struct{ Height string }
				json.Unmarshal(params, &p)
				if a, ok := answers[method]; ok && (method == "status" || p.Height == fmt.Sprint(c.height)) {
					return a, nil
				}
				return nil, &rpctest.Error{Code: -32603, Message: "Internal error", Data: "not recorded: " + method + " " + p.Height}
			}})
			defer srv.Close()
			cfg := rpcRunConfig(t, srv.URL)
			cfg.From, cfg.To = c.height, c.height
			mustRunCfg(t, cfg)

			ctx := context.Background()
			conn := pgtest.ConnectTo(t, cfg.PG)
			got := pgtest.Strings(t, conn, `SELECT coalesce(array_to_string(signers, ',', 'NULL'), 'NULL') || ' ' || coalesce(fee_payer, 'NULL')
				FROM cometbft.transactions WHERE height = $1 ORDER BY tx_index`, c.height)
			if len(got) != len(c.signers) {
				t.Fatalf("transactions: signers and fee payers %v, want %d", got, len(c.signers))
			}
			for i, want := range c.signers {
				if payer, _, _ := strings.Cut(want, ","); got[i] != want+" "+payer {
					t.Errorf("tx %d: signers and fee_payer %s; the node's events say %s", i, got[i], want)
				}
			}
			var n, decoded int
			var ok bool
			if err := conn.QueryRow(ctx, `SELECT count(*), count(decoded) FROM cometbft.messages WHERE height = $1`, c.height).Scan(&n, &decoded); err != nil || n == 0 || decoded != n-c.raw {
				t.Errorf("%d messages, %d decoded (%v)", n, decoded, err)
			}
			if err := conn.QueryRow(ctx, `SELECT `+c.check+` FROM cometbft.messages JOIN cometbft.transactions USING (height, tx_index)
				WHERE height = $1 ORDER BY tx_index, msg_index LIMIT 1`, c.height).Scan(&ok); err != nil || !ok {
				t.Errorf("first message: %s is %v (%v)", c.check, ok, err)
			}
		})
	}
}
