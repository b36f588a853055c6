package cometbft

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft/protodec"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// sdkFixture is one tx of testdata/sdk/txs.json: built and signed by
// CosmJS, with what CosmJS reads back from its bytes (make_txs.mjs).
type sdkFixture struct {
	Name   string `json:"name"`
	Tx     []byte `json:"tx"`
	Expect struct {
		Memo     string `json:"memo"`
		Fee      []any  `json:"fee"`
		GasLimit string `json:"gas_limit"`
		Payer    string `json:"payer"`
		Granter  string `json:"granter"`
		// The address of each signer's public key; null where CosmJS
		// derives none (a multisig key).
		SignerPubkeyAddresses []*string           `json:"signer_pubkey_addresses"`
		Messages              []sdkFixtureMessage `json:"messages"`
	} `json:"expect"`
}

// sdkFixtureMessage is one message of a fixture tx, as CosmJS reads it.
type sdkFixtureMessage struct {
	TypeURL string          `json:"type_url"`
	Value   []byte          `json:"value"`
	Decoded json.RawMessage `json:"decoded"`
}

func sdkFixtures(t testing.TB) []sdkFixture {
	t.Helper()
	var f struct {
		Txs []sdkFixture `json:"txs"`
	}
	readJSON(t, "testdata/sdk/txs.json", &f)
	if len(f.Txs) < 10 {
		t.Fatalf("%d fixture txs", len(f.Txs))
	}
	return f.Txs
}

// decodeTxRows decodes tx as the only tx of a block through the decoder's
// own tx path and returns its transactions row and messages rows.
func decodeTxRows(t *testing.T, tx []byte) ([]any, [][]any) {
	t.Helper()
	return decodeTxRowsAt(3, tx, 10)
}

// decodeTxRowsAt is decodeTxRows with the tx at index i of a block of
// height h.
func decodeTxRowsAt(i int, tx []byte, h int64) ([]any, [][]any) {
	d := NewDecoder()
	rows := chain.NewRows(d.Tables())
	st := statePool.Get().(*decodeState)
	defer st.release()
	row := rows.Row(tableTransactions)
	st.emitSDK(rows, row, i, tx, h, nil, nil)
	return row, rows.Table(tableMessages)
}

// BenchmarkSDKTx decodes the CosmJS fixture txs through the decoder's tx
// path: the protobuf wire reading of the tx, its messages and their JSON.
func BenchmarkSDKTx(b *testing.B) {
	fx := sdkFixtures(b)
	d := NewDecoder()
	rows := chain.NewRows(d.Tables())
	st := statePool.Get().(*decodeState)
	defer st.release()
	size := 0
	for _, f := range fx {
		size += len(f.Tx)
	}
	b.SetBytes(int64(size / len(fx)))
	b.ReportAllocs()
	var msgJS []byte
	for i := 0; b.Loop(); i++ {
		j := i % len(fx)
		if j == 0 {
			rows.Reset()
			msgJS = msgJS[:0]
		}
		row := rows.Row(tableTransactions)
		msgJS = st.emitSDK(rows, row, j, fx[j].Tx, int64(10), nil, msgJS)
		if row[tMemo] == nil && fx[j].Expect.Memo != "" {
			b.Fatalf("%s: not read as an SDK tx", fx[j].Name)
		}
	}
}

// TestDecodeSDKTxs reads txs CosmJS built and signed and checks every SDK
// column and message row against what CosmJS reads from the same bytes.
func TestDecodeSDKTxs(t *testing.T) {
	for _, f := range sdkFixtures(t) {
		row, msgs := decodeTxRows(t, f.Tx)
		checkSDKRows(t, f, row, msgs, int64(10), int32(3))
	}
}

// checkSDKRows checks the SDK columns of a transactions row and its
// messages rows against what CosmJS read from the same tx.
func checkSDKRows(t *testing.T, f sdkFixture, row []any, msgs [][]any, height int64, txIndex int32) {
	t.Helper()
	{
		e := f.Expect
		if row[tMemo] != e.Memo {
			t.Errorf("%s: memo %q, want %q", f.Name, row[tMemo], e.Memo)
		}
		var fee []any
		if err := json.Unmarshal(row[tFee].([]byte), &fee); err != nil || !reflect.DeepEqual(fee, e.Fee) && !(len(fee) == 0 && len(e.Fee) == 0) {
			t.Errorf("%s: fee %s, want %v", f.Name, row[tFee], e.Fee)
		}
		if gl, _ := strconv.ParseInt(e.GasLimit, 10, 64); row[tGasLimit] != gl {
			t.Errorf("%s: gas_limit %v, want %s", f.Name, row[tGasLimit], e.GasLimit)
		}
		// Signers: the public key's address; where it has none, the signer
		// field of the message at the same position.
		var want []string
		for i, a := range e.SignerPubkeyAddresses {
			if a != nil {
				want = append(want, *a)
				continue
			}
			var m map[string]any
			json.Unmarshal(e.Messages[i].Decoded, &m)
			want = append(want, m["from_address"].(string))
		}
		if got, ok := row[tSigners].([]string); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: signers %#v, want %v", f.Name, row[tSigners], want)
		}
		wantPayer := e.Payer
		if wantPayer == "" {
			wantPayer = want[0]
		}
		if row[tFeePayer] != wantPayer {
			t.Errorf("%s: fee_payer %v, want %s", f.Name, row[tFeePayer], wantPayer)
		}
		if wantGranter := any(e.Granter); e.Granter == "" && row[tFeeGranter] != nil || e.Granter != "" && row[tFeeGranter] != wantGranter {
			t.Errorf("%s: fee_granter %v, want %q", f.Name, row[tFeeGranter], e.Granter)
		}

		if len(msgs) != len(e.Messages) {
			t.Errorf("%s: %d messages, want %d", f.Name, len(msgs), len(e.Messages))
			return
		}
		for i, m := range msgs {
			w := e.Messages[i]
			if m[mHeight] != height || m[mTxIndex] != txIndex || m[mIndex] != int32(i) || m[mTypeURL] != w.TypeURL || !bytes.Equal(m[mValue].([]byte), w.Value) {
				t.Errorf("%s: message %d = %v, want %s %x", f.Name, i, m[:mValue], w.TypeURL, w.Value)
			}
			if string(w.Decoded) == "null" {
				if m[mDecoded] != nil {
					t.Errorf("%s: message %d of a type not decoded has JSON %s", f.Name, i, m[mDecoded])
				}
				continue
			}
			got, _ := m[mDecoded].([]byte)
			var g, wv any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Errorf("%s: message %d: JSON %s: %v", f.Name, i, got, err)
				continue
			}
			json.Unmarshal(w.Decoded, &wv)
			if !reflect.DeepEqual(g, wv) {
				t.Errorf("%s: message %d:\n got %s\nwant %s", f.Name, i, got, w.Decoded)
			}
		}
	}
}

// TestDecodeNotSDKTxs: txs that are not Cosmos SDK txs have no messages and
// NULL SDK columns, and never fail.
func TestDecodeNotSDKTxs(t *testing.T) {
	good := sdkFixtures(t)[0].Tx
	for _, tx := range [][]byte{
		[]byte("key=value"),
		[]byte("val=ed25519!AAAA!1"),
		{},
		{0x0a, 0x00},                        // an empty body: no message
		good[:len(good)-1],                  // truncated
		append([]byte{0x20, 0x01}, good...), // an unknown TxRaw field
		{0xf8, 0x6c, 0x80, 0x85},            // an RLP Ethereum tx
	} {
		row, msgs := decodeTxRows(t, tx)
		for c := tMemo; c < tWidth; c++ {
			if row[c] != nil {
				t.Errorf("tx %q: column %s = %v, want NULL", tx, tables[tableTransactions].Columns[c].Name, row[c])
			}
		}
		if len(msgs) != 0 {
			t.Errorf("tx %q: %d messages", tx, len(msgs))
		}
	}
}

// TestDecodeMalformedMessage: a known type whose bytes do not read as it
// keeps its raw bytes and has no JSON.
func TestDecodeMalformedMessage(t *testing.T) {
	value := []byte{0x08, 0x01} // MsgSend with a varint where from_address is a string
	anyMsg := pbBytes(pbString(nil, 1, "/cosmos.bank.v1beta1.MsgSend"), 2, value)
	tx := pbBytes(nil, 1, pbBytes(nil, 1, anyMsg))
	row, msgs := decodeTxRows(t, tx)
	if len(msgs) != 1 || msgs[0][mDecoded] != nil || !bytes.Equal(msgs[0][mValue].([]byte), value) {
		t.Fatalf("messages %v", msgs)
	}
	if s, ok := row[tSigners].([]string); !ok || len(s) != 0 || row[tFeePayer] != nil || string(row[tFee].([]byte)) != "[]" {
		t.Errorf("tx row %v", row[tMemo:])
	}
}

// FuzzSDKTx: no input makes the tx reader panic, and what it decodes to
// JSON is valid JSON.
func FuzzSDKTx(f *testing.F) {
	for _, tx := range []string{"key=value", "\x0a\x00", ""} {
		f.Add([]byte(tx))
	}
	var fx struct {
		Txs []sdkFixture `json:"txs"`
	}
	if raw, err := os.ReadFile("testdata/sdk/txs.json"); err == nil && json.Unmarshal(raw, &fx) == nil {
		for _, t := range fx.Txs {
			f.Add(t.Tx)
			for _, m := range t.Expect.Messages {
				f.Add(pbBytes(nil, 1, pbBytes(nil, 1, pbBytes(pbString(nil, 1, m.TypeURL), 2, m.Value))))
			}
		}
	}
	f.Fuzz(func(t *testing.T, tx []byte) {
		row, msgs := decodeTxRowsAt(0, tx, 1)
		if fee, ok := row[tFee].([]byte); ok && !json.Valid(fee) {
			t.Fatalf("fee %q", fee)
		}
		for _, m := range msgs {
			if js, ok := m[mDecoded].([]byte); ok && !json.Valid(js) {
				t.Fatalf("decoded %q", js)
			}
		}
		// Every described type against the same bytes, too.
		set := protodec.MustBuiltin()
		for u := range typeURLBoxed {
			if js, _, err := set.AppendJSON(nil, u, tx); err == nil && !json.Valid(js) {
				t.Fatalf("decoded %q", js)
			}
		}
	})
}

func TestBech32Prefix(t *testing.T) {
	for in, want := range map[string]string{
		"cosmos14372pfzd2vav80pef0epezknkd4r90pf6zha6p":        "cosmos",
		"cosmosvaloper1qdxnjmhzndcc63yejwgk5mhf6y7npds9a7zpa0": "cosmos",
		"cosmos14372pfzd2vav80pef0epezknkd4r90pf6zha6q":        "", // checksum
		"Cosmos14372pfzd2vav80pef0epezknkd4r90pf6zha6p":        "",
		"transfer": "",
		"":         "",
	} {
		if got := bech32Prefix([]byte(in)); got != want {
			t.Errorf("bech32Prefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDecodeRecordedSDKNode decodes the blocks of a real CometBFT 0.38 node
// (kvstore app) that hold the CosmJS-signed txs beside plain kvstore txs,
// and a validator that joined with power 1, never signed, and left.
func TestDecodeRecordedSDKNode(t *testing.T) {
	const dir = "testdata/node-0.38-sdk"
	fixtures := map[string]sdkFixture{}
	for _, f := range sdkFixtures(t) {
		fixtures[string(f.Tx)] = f
	}
	d := NewDecoder()
	rows := chain.NewRows(d.Tables())
	found, plain := 0, 0
	for _, r := range recordedNodeRecords(t) {
		if !strings.HasPrefix(r.name, dir+"/") {
			continue
		}
		before := rows.Lens()
		if err := d.Decode(r.expect.Height, r.raw, rows); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		msgs := rows.Table(tableMessages)[before[tableMessages]:]
		for _, tx := range rows.Table(tableTransactions)[before[tableTransactions]:] {
			f, ok := fixtures[string(tx[tTx].([]byte))]
			if !ok {
				plain++
				if tx[tMemo] != nil || tx[tSigners] != nil || tx[tFee] != nil {
					t.Errorf("%s: kvstore tx %q has SDK columns %v", r.name, tx[tTx], tx[tMemo:])
				}
				continue
			}
			found++
			var own [][]any
			for _, m := range msgs {
				if m[mTxIndex] == tx[tIndex] {
					own = append(own, m)
				}
			}
			checkSDKRows(t, f, tx, own, int64(r.expect.Height), tx[tIndex].(int32))
		}
	}
	if found != len(fixtures) || plain != 3 {
		t.Errorf("found %d of %d SDK txs and %d kvstore txs (want 3) in the recorded blocks", found, len(fixtures), plain)
	}

	// The validator that joined and left, and its absent votes.
	var got []string
	for _, u := range rows.Table(tableValidatorUpdates) {
		got = append(got, fmt.Sprintf("%d %s %x %d", u[vuHeight], u[vuKeyType], u[vuAddress], u[vuPower]))
	}
	key := sha256.Sum256([]byte("blockhaul fixture validator"))
	addr := sha256.Sum256(key[:])
	want := []string{fmt.Sprintf("27 ed25519 %x 1", addr[:20]), fmt.Sprintf("33 ed25519 %x 0", addr[:20])}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("validator updates %v, want %v", got, want)
	}
	var absent []int64
	for _, s := range rows.Table(tableCommitSignatures) {
		if s[csFlag] == int32(BlockIDFlagAbsent) {
			if s[csIndex] != int32(1) || s[csAddress] != nil {
				t.Errorf("absent signature %v", s)
			}
			absent = append(absent, s[csSignedHeight].(int64))
		}
	}
	// Joined at 27: in the validator set from 29 (height + 2), whose
	// commit is in block 30; left at 33: last in the set of 34.
	if !reflect.DeepEqual(absent, []int64{29, 30, 31, 32, 33, 34}) {
		t.Errorf("absent at signed heights %v", absent)
	}
}

// TestSignersFallback: a signer whose key gives no address takes the
// message's signer at its position, else NULL; PostgreSQL holds the NULL
// element.
func TestSignersFallback(t *testing.T) {
	send := sdkFixtures(t)[0] // alice's MsgSend
	alice := *send.Expect.SignerPubkeyAddresses[0]
	msg := pbBytes(pbString(nil, 1, send.Expect.Messages[0].TypeURL), 2, send.Expect.Messages[0].Value)
	unknownKey := pbBytes(nil, 1, pbBytes(pbString(nil, 1, "/cosmos.crypto.multisig.LegacyAminoPubKey"), 2, []byte{8, 1}))
	auth := pbBytes(pbBytes(nil, 1, unknownKey), 1, unknownKey)
	tx := pbBytes(pbBytes(nil, 1, pbBytes(nil, 1, msg)), 2, auth)
	row, _ := decodeTxRows(t, tx)
	got, ok := row[tSigners].([]*string)
	if !ok || len(got) != 2 || got[0] == nil || *got[0] != alice || got[1] != nil || row[tFeePayer] != alice {
		t.Fatalf("signers %#v, fee_payer %v", row[tSigners], row[tFeePayer])
	}

	ctx := context.Background()
	conn := pgtest.Connect(t)
	if _, err := conn.Exec(ctx, "CREATE TABLE s (signers text[])"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"s"}, []string{"signers"}, pgx.CopyFromRows([][]any{{row[tSigners]}})); err != nil {
		t.Fatal(err)
	}
	var first string
	var second *string
	if err := conn.QueryRow(ctx, "SELECT signers[1], signers[2] FROM s").Scan(&first, &second); err != nil || first != alice || second != nil {
		t.Errorf("from PostgreSQL: %q, %v, %v", first, second, err)
	}
}

// BenchmarkSDKWire reads the CosmJS fixture txs' protobuf alone: the tx, its
// messages' JSON and signers, none of the row building around them.
func BenchmarkSDKWire(b *testing.B) {
	fx := sdkFixtures(b)
	var t sdkTx
	var js []byte
	set := protodec.MustBuiltin()
	for i := 0; b.Loop(); i++ {
		f := fx[i%len(fx)]
		if !readSDKTx(f.Tx, &t) {
			b.Fatalf("%s: not read as an SDK tx", f.Name)
		}
		for _, m := range t.msgs {
			js, _, _ = set.AppendJSON(js[:0], string(m.typeURL), m.value)
		}
	}
}

// TestSignerPrefixFromEvents: a tx whose only message is of a type no
// descriptor knows still gets its signer's address: the prefix is that of
// the chain's own account address of the same bytes in the tx's events
// (tx.acc_seq, tx.fee_payer, plain or base64 as 0.34 writes them), else of
// any account address in the block's bank events, else of a message.sender
// of the same bytes, or --bech32-prefix; with none the signer is NULL, and
// so is fee_payer.
func TestSignerPrefixFromEvents(t *testing.T) {
	send := sdkFixtures(t)[0] // signed by alice
	alice := *send.Expect.SignerPubkeyAddresses[0]
	var auth []byte
	r := pbReader{b: send.Tx}
	for f, ok := r.next(); ok; f, ok = r.next() {
		if f.num == 2 {
			auth = f.bytes
		}
	}
	msg := pbBytes(pbString(nil, 1, "/example.chain.v1.MsgUnknown"), 2, pbString(nil, 1, "x"))
	tx := pbBytes(pbBytes(nil, 1, pbBytes(nil, 1, msg)), 2, auth)
	// record is minimalRecord with tx and one event of type typ, key and value.
	record := func(typ, key, value string) []byte {
		rec := strings.Replace(minimalRecord, `"dHgx"`, `"`+base64.StdEncoding.EncodeToString(tx)+`"`, 1)
		return []byte(strings.Replace(rec, `{"type":"t","attributes":[{"key":"k","value":"v","index":true}]}`,
			`{"type":"`+typ+`","attributes":[{"key":"`+key+`","value":"`+value+`","index":true}]}`, 1))
	}
	// events is minimalRecord with tx and the events evs (JSON).
	events := func(evs string) []byte {
		rec := strings.Replace(minimalRecord, `"dHgx"`, `"`+base64.StdEncoding.EncodeToString(tx)+`"`, 1)
		return []byte(strings.Replace(rec, `{"type":"t","attributes":[{"key":"k","value":"v","index":true}]}`, evs, 1))
	}
	ev := func(typ, key, value string) string {
		return `{"type":"` + typ + `","attributes":[{"key":"` + key + `","value":"` + value + `","index":true}]}`
	}
	b64 := base64.StdEncoding.EncodeToString
	_, aliceBytes, _ := bech32DecodeForTest(alice)
	badChecksum := alice[:len(alice)-1] + "q"
	if badChecksum == alice {
		badChecksum = alice[:len(alice)-1] + "p"
	}
	for _, c := range []struct {
		name   string
		opts   DecoderOptions
		raw    []byte
		signer *string
	}{
		{"acc_seq", DecoderOptions{}, record("tx", "acc_seq", alice+"/7"), &alice},
		{"base64 acc_seq", DecoderOptions{EventEncoding: EventEncodingBase64}, record("tx", b64([]byte("acc_seq")), b64([]byte(alice+"/7"))), &alice},
		{"fee_payer", DecoderOptions{}, record("tx", "fee_payer", alice), &alice},
		{"another address", DecoderOptions{}, record("t", "sender", *send.Expect.Messages[0].toAddress(t)), nil},
		{"alice's address in an event that is not an account's", DecoderOptions{}, record("t", "acc_seq", alice+"/7"), nil},
		{"no address", DecoderOptions{}, record("t", "k", "v"), nil},
		{"alice's bytes under another prefix", DecoderOptions{}, record("tx", "acc_seq", Bech32Encode("osmo", aliceBytes)+"/7"), ptr(Bech32Encode("osmo", aliceBytes))},
		{"alice's data characters, another checksum", DecoderOptions{}, record("tx", "acc_seq", badChecksum), nil},
		{"--bech32-prefix", DecoderOptions{Bech32Prefix: "osmo"}, record("t", "k", "v"), ptr(Bech32Encode("osmo", aliceBytes))},
		{"--bech32-prefix over the events", DecoderOptions{Bech32Prefix: "osmo"}, record("tx", "acc_seq", alice+"/7"), ptr(Bech32Encode("osmo", aliceBytes))},
		// crypto.org's operator prefix is not <account>valoper: an operator
		// address of the signer's bytes before the account's in the events
		// (create_validator.validator, then message.sender) is not taken.
		{"operator before message.sender", DecoderOptions{}, events(ev("create_validator", "validator", Bech32Encode("tcrocncl", aliceBytes)) + "," +
			ev("message", "sender", Bech32Encode("tcro", aliceBytes))), ptr(Bech32Encode("tcro", aliceBytes))},
		// A message.sender that is an operator's (the SDK's staking module
		// wrote MsgEditValidator's so) loses to the account prefix of
		// another address in the block's bank events.
		{"operator message.sender, an account in a transfer", DecoderOptions{}, events(ev("message", "sender", Bech32Encode("tcrocncl", aliceBytes)) + "," +
			ev("transfer", "recipient", Bech32Encode("tcro", make([]byte, 20)))), ptr(Bech32Encode("tcro", aliceBytes))},
		{"cosmosvaloper message.sender alone", DecoderOptions{}, record("message", "sender", Bech32Encode("cosmosvaloper", aliceBytes)), &alice},
	} {
		d := NewDecoderOptions(c.opts)
		rows := chain.NewRows(d.Tables())
		if err := d.Decode(123, c.raw, rows); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		row := rows.Table(tableTransactions)[0]
		if m := rows.Table(tableMessages); len(m) != 1 || m[0][mDecoded] != nil {
			t.Fatalf("%s: messages %v", c.name, m)
		}
		switch {
		case c.signer != nil:
			if s, ok := row[tSigners].([]string); !ok || len(s) != 1 || s[0] != *c.signer || row[tFeePayer] != *c.signer {
				t.Errorf("%s: signers %#v, fee_payer %v; want %s", c.name, row[tSigners], row[tFeePayer], *c.signer)
			}
		default:
			if s, ok := row[tSigners].([]*string); !ok || len(s) != 1 || s[0] != nil || row[tFeePayer] != nil {
				t.Errorf("%s: signers %#v, fee_payer %v; want [NULL], NULL", c.name, row[tSigners], row[tFeePayer])
			}
		}
	}
}

func ptr(s string) *string { return &s }

// toAddress is a MsgSend fixture's to_address.
func (m sdkFixtureMessage) toAddress(t *testing.T) *string {
	var v struct {
		To string `json:"to_address"`
	}
	if err := json.Unmarshal(m.Decoded, &v); err != nil || v.To == "" {
		t.Fatalf("to_address of %s: %v", m.Decoded, err)
	}
	return &v.To
}

// bech32DecodeForTest reads a bech32 address's prefix and data bytes.
func bech32DecodeForTest(s string) (string, []byte, bool) {
	const charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	sep := strings.LastIndexByte(s, '1')
	if sep < 1 || len(s)-sep < 7 {
		return "", nil, false
	}
	var acc, bits uint
	var out []byte
	for _, c := range s[sep+1 : len(s)-6] {
		v := strings.IndexRune(charset, c)
		if v < 0 {
			return "", nil, false
		}
		acc = acc<<5 | uint(v)
		bits += 5
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	return s[:sep], out, Bech32Encode(s[:sep], out) == s
}

// TestBech32ValidByDefinition checks bech32Valid against BIP-173's
// definition (the values expanded, then the checksum) over addresses of
// several prefixes and lengths, each with every byte value at every
// position.
func TestBech32ValidByDefinition(t *testing.T) {
	byDefinition := func(s []byte) bool {
		p := bech32Prefix0(s)
		if p < 1 || len(s) > 90 {
			return false
		}
		var values []byte
		for _, c := range s[:p] {
			values = append(values, c>>5)
		}
		values = append(values, 0)
		for _, c := range s[:p] {
			values = append(values, c&31)
		}
		for _, c := range s[p+1:] {
			i := strings.IndexByte(bech32Charset, c)
			if i < 0 {
				return false
			}
			values = append(values, byte(i))
		}
		return bech32Polymod(values) == 1
	}
	valid, checked := 0, 0
	for i, hrp := range []string{"cosmos", "cosmosvaloper", "osmo", "a", "cro"} {
		data := make([]byte, 20+12*(i%2))
		for j := range data {
			data[j] = byte(31*i + 7*j)
		}
		addr := []byte(Bech32Encode(hrp, data))
		if !bech32Valid(addr) {
			t.Errorf("%s: not valid", addr)
		}
		for pos := range addr {
			orig := addr[pos]
			for c := range 256 {
				addr[pos] = byte(c)
				got, want := bech32Valid(addr), byDefinition(addr)
				if got != want {
					t.Errorf("%q: %v, by definition %v", addr, got, want)
				}
				if got {
					valid++
				}
				checked++
			}
			addr[pos] = orig
		}
	}
	if valid == 0 || valid == checked {
		t.Errorf("%d of %d valid: the cases do not tell", valid, checked)
	}
}
