package protodec

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/blockhaul/blockhaul/internal/gomodule"
)

// realTx is one entry of testdata/chainindexing/txs.json: a transaction's
// bytes as a node's /block gave them, and the node's own JSON of it
// (GET /cosmos/tx/v1beta1/txs/HASH), from crypto-com/chain-indexing's
// parser fixtures (testdata/chainindexing/README.md).
type realTx struct {
	Source  string
	ChainID string `json:"chain_id"`
	Height  string
	TxHash  string
	TxBytes string `json:"tx_bytes"`
	Tx      struct {
		Body struct {
			Messages []map[string]any
		}
	}
}

// anyField is a TxBody.messages entry read from the wire.
type anyField struct {
	typeURL string
	value   []byte
}

// bodyMessages reads TxRaw.body_bytes (1) → TxBody.messages (1) → Any
// {type_url 1, value 2} with protowire alone, apart from the code under test.
func bodyMessages(t *testing.T, tx []byte) []anyField {
	t.Helper()
	fields := func(b []byte, want protowire.Number) [][]byte {
		var out [][]byte
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				t.Fatalf("tag: %v", protowire.ParseError(n))
			}
			b = b[n:]
			if typ == protowire.BytesType {
				v, m := protowire.ConsumeBytes(b)
				if m < 0 {
					t.Fatalf("field %d: %v", num, protowire.ParseError(m))
				}
				if num == want {
					out = append(out, v)
				}
				b = b[m:]
				continue
			}
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				t.Fatalf("field %d: %v", num, protowire.ParseError(m))
			}
			b = b[m:]
		}
		return out
	}
	var msgs []anyField
	for _, body := range fields(tx, 1) {
		for _, a := range fields(body, 1) {
			url, value := fields(a, 1), fields(a, 2)
			f := anyField{typeURL: string(url[0])}
			if len(value) > 0 {
				f.value = value[0]
			}
			msgs = append(msgs, f)
		}
	}
	return msgs
}

// zeroTime is how gogoproto's jsonpb prints a non-nullable Timestamp that
// is not on the wire (an absent commit signature's); protojson omits it.
const zeroTime = "0001-01-01T00:00:00Z"

// sameJSON compares decoded JSON with the node's, ignoring the "@type" of
// the top level (the messages column holds it in type_url). Strings are
// compared case-insensitively where the node's fixture holds a bech32
// address upper-cased (tx AAE71A09…: its bytes hold the address in lower
// case; bech32 is case-insensitive).
func sameJSON(got, want any, path string, diffs *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*diffs = append(*diffs, path+": not an object")
			return
		}
		for k, wv := range w {
			if k == "@type" && path == "" {
				continue
			}
			gv, ok := g[k]
			if !ok && wv != nil && wv != zeroTime {
				*diffs = append(*diffs, path+"."+k+": missing, node "+jsonText(wv))
			}
			if !ok {
				continue // a sub-message not on the wire: null, or gogoproto's zero time
			}
			sameJSON(gv, wv, path+"."+k, diffs)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				*diffs = append(*diffs, path+"."+k+": not in the node's JSON")
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			*diffs = append(*diffs, path+": another array")
			return
		}
		for i := range w {
			sameJSON(g[i], w[i], path+"["+strconv.Itoa(i)+"]", diffs)
		}
	case string:
		if g, ok := got.(string); !ok || (g != w && !(strings.EqualFold(g, w) && strings.HasPrefix(strings.ToLower(w), "cro1"))) {
			*diffs = append(*diffs, path+": "+jsonText(got)+", node "+jsonText(want))
		}
	case nil:
		if got != nil && got != "" { // empty bytes: protojson "", gogoproto's jsonpb null
			*diffs = append(*diffs, path+": "+jsonText(got)+", node null")
		}
	default:
		if !reflect.DeepEqual(got, want) {
			*diffs = append(*diffs, path+": "+jsonText(got)+", node "+jsonText(want))
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}

// Fields that today's descriptors (Cosmos SDK v0.53, ibc-go v8, chain-main's
// current nft/v1/tx.proto, Osmosis v7.0.0's lockup) have and the nodes that
// printed these transactions (2021-2023) did not: absent from the old wire, so printed with
// their defaults, which the test requires.
var newerFields = map[string][]string{
	"/chainmain.nft.v1.MsgIssueDenom":           {"uri"},                           // field 5, added after 2021
	"/cosmos.gov.v1.MsgSubmitProposal":          {"title", "summary", "expedited"}, // fields 5-7, SDK v0.47/v0.50
	"/ibc.applications.transfer.v1.MsgTransfer": {"memo"},                          // field 8, ibc-go v5
	"/osmosis.lockup.MsgBeginUnlocking":         {"coins"},                         // field 3, Osmosis v7 (the block is v6's)
}

// Fields renamed since (same number, same type): ibc-go v7 named
// MsgUpdateClient's header client_message.
var renamedFields = map[string][2]string{"/ibc.core.client.v1.MsgUpdateClient": {"header", "client_message"}}

func isDefault(v any) bool {
	a, isArray := v.([]any)
	return v == "" || v == false || v == "0" || v == nil || (isArray && len(a) == 0)
}

// TestRealTransactions decodes 27 real transactions of crypto.org and
// Cronos nodes — gov v1beta1 and v1 proposals (nested Any content and
// messages), deposits, votes, a weighted vote, bank, distribution, IBC
// client updates with Tendermint headers, timeouts and acknowledgements,
// and crypto.org's own NFT module from its published proto file — and
// checks each message's JSON against the JSON the chain's node printed of
// the same transaction. Each transaction's bytes are tied to the node's
// JSON by sha256(bytes) = txhash. Ethermint's MsgEthereumTx, whose proto
// files are not given, is an unknown type.
func TestRealTransactions(t *testing.T) {
	s, err := Load(context.Background(), Options{ProtoDirs: []string{"testdata/chainmain"}})
	if err != nil {
		t.Fatal(err)
	}
	decoded, unknown := checkRealTxs(t, s, chainIndexingTxs, 27, func(typeURL string) bool { return typeURL != msgEthereumTx })
	if decoded != 22 || unknown != 7 {
		t.Errorf("%d messages decoded, %d MsgEthereumTx unknown; want 22 and 7", decoded, unknown)
	}
}

// TestRealEthermintTransactions decodes the 7 MsgEthereumTx of Cronos
// mainnet height 68821 (a LegacyTx in each: nonce, gas price, recipient,
// calldata, signature) with Ethermint's published proto files, from its Go
// module through the module proxy, against the node's JSON.
func TestRealEthermintTransactions(t *testing.T) {
	dir := gomodule.Files(t, "github.com/evmos/ethermint", "v0.19.3", "proto", "ethermint/evm/v1/tx.proto", "ethermint/evm/v1/evm.proto")
	s, err := Load(context.Background(), Options{ProtoDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	decoded, _ := checkRealTxs(t, s, chainIndexingTxs, 27, func(typeURL string) bool { return typeURL == msgEthereumTx })
	if decoded != 7 {
		t.Errorf("%d MsgEthereumTx decoded, want 7", decoded)
	}
}

const msgEthereumTx = "/ethermint.evm.v1.MsgEthereumTx"

// The files of real transactions, each beside a README naming its source.
const (
	chainIndexingTxs = "testdata/chainindexing/txs.json"
	osmosisTxs       = "testdata/osmosis/txs.json"
)

// TestRealOsmosisTransactions decodes every transaction of Osmosis mainnet
// block 2,836,990 (2022-01-17; 64 transactions: 59 gamm
// MsgSwapExactAmountIn, a lockup MsgBeginUnlocking, 3 IBC MsgTransfer, an
// IBC MsgUpdateClient and MsgRecvPacket) against osmosisd's own JSON of
// them: the IBC messages with the built-in set alone, which knows none of
// Osmosis's; all 65 messages with Osmosis v7.0.0's published gamm and
// lockup proto files added, from its Go module through the module proxy.
func TestRealOsmosisTransactions(t *testing.T) {
	osmosis := func(typeURL string) bool { return strings.HasPrefix(typeURL, "/osmosis.") }
	decoded, unknown := checkRealTxs(t, MustBuiltin(), osmosisTxs, 64, func(typeURL string) bool { return !osmosis(typeURL) })
	if decoded != 5 || unknown != 60 {
		t.Errorf("built-in set: %d messages decoded, %d of Osmosis's unknown; want 5 and 60", decoded, unknown)
	}
	dir := gomodule.Files(t, "github.com/osmosis-labs/osmosis/v7", "v7.0.0", "proto",
		"osmosis/gamm/v1beta1/tx.proto", "osmosis/lockup/tx.proto", "osmosis/lockup/lock.proto")
	s, err := Load(context.Background(), Options{ProtoDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	if decoded, _ := checkRealTxs(t, s, osmosisTxs, 64, osmosis); decoded != 60 {
		t.Errorf("with Osmosis's proto files: %d of its messages decoded, want 60", decoded)
	}
}

// readRealTxs reads a testdata/*/txs.json.
func readRealTxs(t *testing.T, file string) []realTx {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var txs []realTx
	if err := json.Unmarshal(raw, &txs); err != nil {
		t.Fatal(err)
	}
	return txs
}

// checkRealTxs decodes with s the messages of file (n transactions) whose
// type URL want takes, each against the node's JSON; of the others it
// counts those s does not know. Every transaction's bytes must hash to its
// txhash and hold the messages of the node's JSON.
func checkRealTxs(t *testing.T, s *Set, file string, n int, want func(typeURL string) bool) (decoded, unknown int) {
	t.Helper()
	txs := readRealTxs(t, file)
	if len(txs) != n {
		t.Fatalf("%d transactions in %s, want %d", len(txs), file, n)
	}
	for _, tx := range txs {
		b, err := base64.StdEncoding.DecodeString(tx.TxBytes)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); !strings.EqualFold(hex.EncodeToString(sum[:]), tx.TxHash) {
			t.Fatalf("%s: bytes hash to %x, not %s", tx.Source, sum, tx.TxHash)
		}
		msgs := bodyMessages(t, b)
		if len(msgs) != len(tx.Tx.Body.Messages) {
			t.Fatalf("%s: %d messages in the bytes, %d in the node's JSON", tx.TxHash, len(msgs), len(tx.Tx.Body.Messages))
		}
		for i, m := range msgs {
			node := tx.Tx.Body.Messages[i]
			if node["@type"] != m.typeURL {
				t.Fatalf("%s message %d: %s in the bytes, %v in the node's JSON", tx.TxHash, i, m.typeURL, node["@type"])
			}
			js, _, err := s.AppendJSON(nil, m.typeURL, m.value)
			if !want(m.typeURL) {
				if errors.Is(err, ErrUnknownType) {
					unknown++
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %s height %s (%s): %v", tx.ChainID, tx.TxHash, tx.Height, m.typeURL, err)
				continue
			}
			var got any
			if err := json.Unmarshal(js, &got); err != nil {
				t.Fatal(err)
			}
			var diffs []string
			obj := got.(map[string]any)
			for _, k := range newerFields[m.typeURL] {
				if v, ok := obj[k]; !ok || !isDefault(v) {
					diffs = append(diffs, k+": "+jsonText(v)+", want the default of a field the node did not have")
				}
				delete(obj, k)
			}
			if r, ok := renamedFields[m.typeURL]; ok {
				node[r[1]] = node[r[0]]
				delete(node, r[0])
			}
			sameJSON(got, any(node), "", &diffs)
			if len(diffs) > 8 {
				diffs = append(diffs[:8], "…")
			}
			if len(diffs) > 0 {
				t.Errorf("%s %s height %s %s differs from the node's JSON:\n  %s", tx.ChainID, tx.TxHash, tx.Height, m.typeURL, strings.Join(diffs, "\n  "))
			}
			decoded++
		}
	}
	return decoded, unknown
}
