package cometbft

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft/protodec"
	"github.com/blockhaul/blockhaul/chain/jsonscan"
)

func TestDecodeCountsMatchSynthetic(t *testing.T) {
	d := NewDecoder()
	for _, cfg := range []SyntheticConfig{{Seed: 1}, {Seed: 99, TxPerBlock: 20, Validators: 30}} {
		s := NewSynthetic(cfg)
		rows := chain.NewRows(d.Tables())
		for h := uint64(1); h <= 1500; h++ {
			before := rows.Lens()
			if err := d.Decode(h, s.AppendRecord(nil, h), rows); err != nil {
				t.Fatalf("seed %d height %d: %v", cfg.Seed, h, err)
			}
			wantTxs, wantEvents := s.ExpectedCounts(h)
			after := rows.Lens()
			if after[tableBlocks]-before[tableBlocks] != 1 || after[tableTransactions]-before[tableTransactions] != wantTxs || after[tableEvents]-before[tableEvents] != wantEvents {
				t.Fatalf("seed %d height %d: rows %v -> %v, want 1 block, %d txs, %d events", cfg.Seed, h, before, after, wantTxs, wantEvents)
			}
			b := rows.Table(tableBlocks)[after[tableBlocks]-1]
			if b[bHeight] != int64(h) || !bytes.Equal(b[bHash].([]byte), s.BlockHash(h)) ||
				b[bNumTxs] != int32(wantTxs) || b[bNumEvents] != int32(wantEvents) {
				t.Fatalf("seed %d height %d: block row %v", cfg.Seed, h, b[:bNumEvents+1])
			}
			if h == 1 && b[bParentHash] != nil || h > 1 && !bytes.Equal(b[bParentHash].([]byte), s.BlockHash(h-1)) {
				t.Fatalf("seed %d height %d: parent_hash %v", cfg.Seed, h, b[bParentHash])
			}
			if h%500 == 0 {
				rows.Reset()
			}
		}
	}
}

func TestDecodeMatchesReferenceDecoder(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 21, Validators: 9})
	for h := uint64(1); h <= 250; h++ {
		checkAgainstReference(t, fmt.Sprintf("synthetic %d", h), h, s.AppendRecord(nil, h))
	}
	for _, h := range []uint64{1 << 32, DefaultTip} { // the far end of the chain too (its content; the hashes below are not produced)
		checkAgainstReference(t, fmt.Sprintf("synthetic %d", h), h, s.AppendUnchained(nil, h, [32]byte{1}))
	}
	for _, v := range []string{"v034", "v037", "v038"} {
		raw, err := os.ReadFile("testdata/versions/block_" + v + ".json")
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstReference(t, v, fixtureHeight, raw)
	}
	for _, r := range recordedNodeRecords(t) {
		checkAgainstReference(t, r.name, r.expect.Height, r.raw)
	}
}

// TestDecodeRecordedNode decodes what real CometBFT 0.38 nodes answered and
// checks it against the expectations recorded with the answers.
func TestDecodeRecordedNode(t *testing.T) {
	d := NewDecoder()
	for _, r := range recordedNodeRecords(t) {
		rows := chain.NewRows(d.Tables())
		if err := d.Decode(r.expect.Height, r.raw, rows); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		b := rows.Table(tableBlocks)[0]
		wantParent := any(nil)
		if r.expect.ParentHash != "" {
			wantParent = mustDecodeHex(t, r.expect.ParentHash)
		}
		wantTime, _ := time.Parse(time.RFC3339Nano, r.expect.Time)
		if !bytes.Equal(b[bHash].([]byte), mustDecodeHex(t, r.expect.Hash)) || !reflect.DeepEqual(b[bParentHash], wantParent) ||
			!b[bTime].(time.Time).Equal(wantTime) || b[bNumTxs] != int32(r.expect.NumTxs) {
			t.Errorf("%s: block row %v, expected %+v", r.name, b, r.expect)
		}
		var txEvents, finalize int
		for _, e := range rows.Table(tableEvents) {
			switch e[eSource] {
			case SourceTx:
				txEvents++
			case SourceFinalizeBlock:
				finalize++
			default:
				t.Errorf("%s: event source %v in a 0.38 block", r.name, e[eSource])
			}
		}
		if rows.Len(tableTransactions) != r.expect.NumTxs || txEvents != r.expect.TxEvents || finalize != r.expect.FinalizeBlockEvents {
			t.Errorf("%s: %d txs, %d tx events, %d finalize events; expected %+v", r.name, rows.Len(tableTransactions), txEvents, finalize, r.expect)
		}
		hash, parent, height, err := BlockIdentity(r.raw)
		if err != nil || height != r.expect.Height || !bytes.Equal(hash, b[bHash].([]byte)) || !reflect.DeepEqual(any(parent), anyBytes(b[bParentHash])) {
			t.Errorf("%s: BlockIdentity = %X, %X, %d, %v", r.name, hash, parent, height, err)
		}
	}
}

func anyBytes(v any) any {
	if v == nil {
		return []byte(nil)
	}
	return v
}

func mustDecodeHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hexDecode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hexDecode(s string) ([]byte, error) {
	var st decodeState
	st.sc.Reset([]byte(`"` + s + `"`))
	_, v, err := st.appendHex(nil, jsonscan.Span{Start: 1, End: 1 + len(s)}, "test")
	return v, err
}

// fixtureHeight is the height of the hand-made records in testdata/versions.
const fixtureHeight = 9000123

type normalEvent struct {
	Source  string
	TxIndex any
	Type    string
	Attrs   []kvAttr
}

func decodeFixture(t *testing.T, version string) ([][]any, [][]any, []normalEvent) {
	t.Helper()
	raw, err := os.ReadFile("testdata/versions/block_" + version + ".json")
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder()
	rows := chain.NewRows(d.Tables())
	if err := d.Decode(fixtureHeight, raw, rows); err != nil {
		t.Fatalf("%s: %v", version, err)
	}
	var evs []normalEvent
	for _, e := range rows.Table(tableEvents) {
		ev := normalEvent{Source: e[eSource].(string), TxIndex: e[eTxIndex], Type: e[eType].(string)}
		var err error
		if ev.Attrs, err = parseAttributes(e[eAttributes].([]byte)); err != nil {
			t.Fatalf("%s: attributes %s: %v", version, e[eAttributes], err)
		}
		evs = append(evs, ev)
	}
	return rows.Table(tableBlocks), rows.Table(tableTransactions), evs
}

// TestDecodeVersionsNormalise decodes the same block as CometBFT 0.34
// (base64 attributes, begin/end block events), 0.37 (plain attributes) and
// 0.38 (finalize_block_events) print it, and checks that all three give the
// same rows.
func TestDecodeVersionsNormalise(t *testing.T) {
	b34, tx34, ev34 := decodeFixture(t, "v034")
	b37, tx37, ev37 := decodeFixture(t, "v037")
	b38, tx38, ev38 := decodeFixture(t, "v038")
	bSei, txSei, evSei := decodeFixture(t, "sei")

	// Sei: 0.38's shape with base64 attributes reads as 0.38 does.
	if !reflect.DeepEqual(evSei, ev38) {
		t.Errorf("Sei and 0.38 events differ:\n%v\n%v", evSei, ev38)
	}
	if got := findAttr(evSei, "tx", "fee"); got != "5000uatom" {
		t.Errorf("Sei fee %q: base64 not decoded", got)
	}
	// Block hashes differ: each fixture carries its own header's real hash
	// (staging verifies it), and the headers differ in what each line
	// prints (0.34 has no app version).
	hashCol := slices.IndexFunc(tables[tableBlocks].Columns, func(c chain.Column) bool { return c.Name == "hash" })
	for i := range bSei[0] {
		if i != hashCol && !sameCell(tables[tableBlocks].Columns[i].Type, bSei[0][i], b38[0][i]) {
			t.Errorf("blocks.%s: Sei %v, 0.38 %v", tables[tableBlocks].Columns[i].Name, bSei[0][i], b38[0][i])
		}
	}
	if !reflect.DeepEqual(txSei, tx38) {
		t.Errorf("Sei and 0.38 txs differ")
	}

	// The plain-text values the fixtures were written from.
	memo := findAttr(ev37, "ibc_transfer", "memo")
	if want := "say \"hi\" é—🚀 tab\there nul\uFFFDend"; memo != want {
		t.Errorf("0.37 memo %q, want %q (NUL replaced)", memo, want)
	}
	if got := findAttr(ev34, "ibc_transfer", "memo"); got != memo {
		t.Errorf("0.34 memo %q, want %q", got, memo)
	}
	if got := findAttr(ev34, "tx", "fee_payer"); got != "cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu" {
		t.Errorf("0.34 fee_payer %q: base64 not decoded", got)
	}

	if !reflect.DeepEqual(ev34, ev37) {
		t.Errorf("0.34 and 0.37 events differ:\n%v\n%v", ev34, ev37)
	}
	// 0.38: tx events equal; finalize_block_events are 0.37's begin and end
	// events, each with the SDK's trailing mode attribute.
	split := func(evs []normalEvent) (tx, block []normalEvent) {
		for _, e := range evs {
			if e.Source == SourceTx {
				tx = append(tx, e)
			} else {
				block = append(block, e)
			}
		}
		return tx, block
	}
	tx37ev, block37 := split(ev37)
	tx38ev, block38 := split(ev38)
	if !reflect.DeepEqual(tx37ev, tx38ev) {
		t.Errorf("0.37 and 0.38 tx events differ:\n%v\n%v", tx37ev, tx38ev)
	}
	if len(block37) != len(block38) {
		t.Fatalf("0.37 has %d block events, 0.38 %d", len(block37), len(block38))
	}
	for i := range block38 {
		e38, e37 := block38[i], block37[i]
		last := e38.Attrs[len(e38.Attrs)-1]
		wantMode := kvAttr{"mode", "BeginBlock", false}
		if e37.Source == SourceEndBlock {
			wantMode.Value = "EndBlock"
		}
		if e38.Source != SourceFinalizeBlock || !reflect.DeepEqual(last, wantMode) ||
			e38.Type != e37.Type || !reflect.DeepEqual(e38.Attrs[:len(e38.Attrs)-1], e37.Attrs) {
			t.Errorf("block event %d: 0.38 %v, 0.37 %v", i, e38, e37)
		}
	}
	if b37[0][bNumEvents] != int32(len(ev37)) || b38[0][bNumEvents] != int32(len(ev38)) {
		t.Errorf("num_events %v/%v, want %d/%d", b37[0][bNumEvents], b38[0][bNumEvents], len(ev37), len(ev38))
	}
	for i := range b34[0] {
		if i != bNumEvents && i != hashCol && !sameCell(tables[tableBlocks].Columns[i].Type, b34[0][i], b38[0][i]) {
			t.Errorf("blocks.%s: 0.34 %v, 0.38 %v", tables[tableBlocks].Columns[i].Name, b34[0][i], b38[0][i])
		}
	}
	// Txs: equal but for the log, which SDK 0.45 (on 0.34) filled.
	for i := range tx34 {
		for c := range tx34[i] {
			if c == tLog && i == 0 {
				continue
			}
			if !reflect.DeepEqual(tx34[i][c], tx37[i][c]) || !reflect.DeepEqual(tx37[i][c], tx38[i][c]) {
				t.Errorf("transactions[%d].%s: %v / %v / %v", i, tables[tableTransactions].Columns[c].Name, tx34[i][c], tx37[i][c], tx38[i][c])
			}
		}
	}
	if log := tx34[0][tLog].(string); !strings.HasPrefix(log, `[{"msg_index":0,"events":[`) {
		t.Errorf("0.34 log %q: escapes not undone", log)
	}
	if tx38[1][tCode] != int64(5) || tx38[1][tCodespace] != "sdk" || tx38[1][tGasUsed] != int64(61234) || !bytes.Equal(tx38[1][tData].([]byte), []byte{}) {
		t.Errorf("failed tx row %v", tx38[1])
	}
}

func findAttr(evs []normalEvent, typ, key string) string {
	for _, e := range evs {
		if e.Type != typ {
			continue
		}
		for _, a := range e.Attrs {
			if a.Key == key {
				return a.Value
			}
		}
	}
	return "<missing>"
}

func TestDecodeTxHashIsSHA256OfTx(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 4, TxPerBlock: 10})
	d := NewDecoder()
	rows := chain.NewRows(d.Tables())
	for h := uint64(1); h <= 50; h++ {
		if err := d.Decode(h, s.AppendRecord(nil, h), rows); err != nil {
			t.Fatal(err)
		}
	}
	_, tx38, _ := decodeFixture(t, "v038")
	all := append(slices.Clone(rows.Table(tableTransactions)), tx38...)
	if len(all) < 100 {
		t.Fatalf("only %d txs", len(all))
	}
	for _, row := range all {
		sum := sha256.Sum256(row[tTx].([]byte))
		if !bytes.Equal(row[tHash].([]byte), sum[:]) {
			t.Fatalf("height %v tx %v: hash %X, sha256(tx) %X", row[tHeight], row[tIndex], row[tHash], sum)
		}
	}
}

// A minimal valid record, for the error cases to break one thing at a time.
const minimalRecord = `{"block":{"block_id":{"hash":"AB01","parts":{"total":1,"hash":""}},"block":{"header":{"chain_id":"c","height":"123","time":"2024-01-02T03:04:05.5Z","last_block_id":{"hash":"CD02"},"app_hash":"","proposer_address":"EF"},"data":{"txs":["dHgx"]}}},` +
	`"block_results":{"height":"123","txs_results":[{"code":0,"data":null,"log":"","gas_wanted":"5","gas_used":"4","events":[{"type":"t","attributes":[{"key":"k","value":"v","index":true}]}]}],"finalize_block_events":[]}}`

func TestDecodeErrors(t *testing.T) {
	d := NewDecoder()
	if err := d.Decode(123, []byte(minimalRecord), chain.NewRows(d.Tables())); err != nil {
		t.Fatalf("minimal record: %v", err)
	}
	for _, c := range []struct {
		name, old, new string
		height         uint64
		want           string
	}{
		{"truncated", `"finalize_block_events":[]}}`, `"finalize_block_events":[`, 123, "invalid JSON"},
		{"trailing garbage", `"finalize_block_events":[]}}`, `"finalize_block_events":[]}}x`, 123, "trailing data"},
		{"not an object", minimalRecord, `[1,2]`, 123, "expected object"},
		{"null record", minimalRecord, `null`, 123, "record is null"},
		{"empty", minimalRecord, ``, 123, "expected object"},
		{"other height", "", "", 124, "block header height is 123"},
		{"results height", `{"height":"123","txs_results"`, `{"height":"122","txs_results"`, 123, "block_results height is 122"},
		{"no results", `,"block_results":`, `,"other":`, 123, "no block_results"},
		{"no block", `{"block":{"block_id"`, `{"blk":{"block_id"`, 123, "no block in record"},
		{"no hash", `"hash":"AB01"`, `"hash":""`, 123, "block_id.hash is empty"},
		{"bad hash", `"hash":"AB01"`, `"hash":"XYZ0"`, 123, "block_id.hash"},
		{"bad parent", `"hash":"CD02"`, `"hash":"C"`, 123, "last_block_id.hash"},
		{"bad time", `2024-01-02T03:04:05.5Z`, `yesterday`, 123, "header.time"},
		{"bad tx", `"dHgx"`, `"dHgx!"`, 123, "block.data.txs[0]"},
		{"bad data", `"data":null`, `"data":"***"`, 123, "txs_results[0].data"},
		{"tx count", `"txs":["dHgx"]`, `"txs":["dHgx","dHgy"]`, 123, "2 txs but block_results has 1 txs_results"},
		{"bad gas", `"gas_wanted":"5"`, `"gas_wanted":"5x"`, 123, `invalid integer "5x"`},
		{"gas overflow", `"gas_wanted":"5"`, `"gas_wanted":"99999999999999999999"`, 123, "invalid integer"},
		{"bad escape", `"value":"v"`, `"value":"\q"`, 123, "invalid escape"},
		{"bad unicode escape", `"value":"v"`, `"value":"\u12G4"`, 123, `invalid \u escape`},
		{"attributes not array", `"attributes":[{"key":"k","value":"v","index":true}]`, `"attributes":{}`, 123, "expected array"},
		{"index not bool", `"index":true`, `"index":"yes"`, 123, "expected boolean"},
		{"deep nesting", `"finalize_block_events":[]`, `"x":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000), 123, "nesting too deep"},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := strings.Replace(minimalRecord, c.old, c.new, 1)
			if c.old != "" && raw == minimalRecord {
				t.Fatalf("test case does not change the record")
			}
			// Rows already holding a good block must come out unchanged.
			rows := chain.NewRows(d.Tables())
			s := NewSynthetic(SyntheticConfig{Seed: 1})
			if err := d.Decode(7, s.AppendRecord(nil, 7), rows); err != nil {
				t.Fatal(err)
			}
			lens := rows.Lens()
			snapshot := fmt.Sprint(rows.Table(0), rows.Table(1), rows.Table(2))

			err := d.Decode(c.height, []byte(raw), rows)
			var de *DecodeError
			if !errors.As(err, &de) || de.Height != c.height || !errors.Is(err, ErrMalformedRecord) {
				t.Fatalf("Decode = %v, want a *DecodeError for height %d wrapping ErrMalformedRecord", err, c.height)
			}
			if want := "cometbft: decode block " + strconv.FormatUint(c.height, 10) + ": "; !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Decode error %q, want it to start with %q and say %q", err, want, c.want)
			}
			if !reflect.DeepEqual(rows.Lens(), lens) || fmt.Sprint(rows.Table(0), rows.Table(1), rows.Table(2)) != snapshot {
				t.Errorf("rows changed by a failed Decode: %v -> %v", lens, rows.Lens())
			}
		})
	}
}

// TestDecodeAttributeEncoding checks how a block's attributes are read
// (the rule in Decoder's doc), in every section and under each override.
func TestDecodeAttributeEncoding(t *testing.T) {
	b := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	type kv struct{ k, v string }
	for _, c := range []struct {
		name    string
		section string // where the events are
		mode    EventEncoding
		attrs   []kv
		want    []kv   // nil: an error
		wantErr string // what the error says
	}{
		{"0.34", "begin_block_events", 0, []kv{{b("spender"), b("cosmos1x")}, {b("amount"), b("5uatom")}}, []kv{{"spender", "cosmos1x"}, {"amount", "5uatom"}}, ""},
		{"0.34 in end_block", "end_block_events", 0, []kv{{b("key"), b("")}}, []kv{{"key", ""}}, ""},
		{"0.34 binary value", "begin_block_events", 0, []kv{{b("bloom"), base64.StdEncoding.EncodeToString([]byte{0, 'a', 0xff})}}, []kv{{"bloom", "\uFFFDa\uFFFD"}}, ""},
		// A key decoding to text that is not a name, beside a name: still base64.
		{"0.34 odd key", "begin_block_events", 0, []kv{{b("my key"), b("v")}, {b("sender"), b("x")}}, []kv{{"my key", "v"}, {"sender", "x"}}, ""},
		{"0.37", "begin_block_events", 0, []kv{{"spender", "cosmos1x"}, {"amount", "5uatom"}}, []kv{{"spender", "cosmos1x"}, {"amount", "5uatom"}}, ""},
		// "fee" is valid unpadded base64, but not padded: plain.
		{"0.37 fee", "begin_block_events", 0, []kv{{"fee", "0usei"}}, []kv{{"fee", "0usei"}}, ""},
		// "receiver", "proposer" and "mode" are valid base64, of bytes that are not text.
		{"0.37 base64-like keys", "begin_block_events", 0, []kv{{"receiver", "dGVzdA=="}, {"proposer", "abcd"}, {"mode", "ZmVl"}}, []kv{{"receiver", "dGVzdA=="}, {"proposer", "abcd"}, {"mode", "ZmVl"}}, ""},
		// One plain key keeps the whole block plain.
		{"0.37 mixed", "end_block_events", 0, []kv{{b("sender"), b("x")}, {"module", "bank"}}, []kv{{b("sender"), b("x")}, {"module", "bank"}}, ""},
		{"0.37 only empty keys", "begin_block_events", 0, []kv{{"", b("x")}}, []kv{{"", b("x")}}, ""},
		// Non-canonical padding bits: "ZmU=" is "fe", "ZmV=" is no encoder's output.
		{"0.37 non-canonical", "begin_block_events", 0, []kv{{"ZmV=", "v"}}, []kv{{"ZmV=", "v"}}, ""},
		{"0.38 plain", "finalize_block_events", 0, []kv{{"spender", "cosmos1x"}, {"mode", "BeginBlock"}}, []kv{{"spender", "cosmos1x"}, {"mode", "BeginBlock"}}, ""},
		// Sei: 0.38's shape, base64 attributes.
		{"sei", "finalize_block_events", 0, []kv{{b("fee"), b("0usei")}, {b("mode"), b("BeginBlock")}}, []kv{{"fee", "0usei"}, {"mode", "BeginBlock"}}, ""},
		// Undecided: an error naming the height.
		{"value not base64", "begin_block_events", 0, []kv{{b("sender"), "cosmos1 x"}}, nil, `value "cosmos1 x" is not`},
		{"name beside binary", "finalize_block_events", 0, []kv{{b("sender"), b("x")}, {"receiver", b("y")}}, nil, `"c2VuZGVy" is base64 of a key name but "receiver"`},
		{"text but no name", "finalize_block_events", 0, []kv{{b("a b"), b("x")}}, nil, "not a key name"},
		// Overrides.
		{"forced text", "finalize_block_events", EventEncodingText, []kv{{b("fee"), b("0usei")}}, []kv{{b("fee"), b("0usei")}}, ""},
		{"forced text undecided", "begin_block_events", EventEncodingText, []kv{{b("sender"), "cosmos1 x"}}, []kv{{b("sender"), "cosmos1 x"}}, ""},
		{"forced base64", "begin_block_events", EventEncodingBase64, []kv{{b("a b"), b("x")}}, []kv{{"a b", "x"}}, ""},
		{"forced base64 plain", "begin_block_events", EventEncodingBase64, []kv{{"spender", "x"}}, nil, `--event-encoding base64 does not fit this block's attributes: "spender" is not base64`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var attrs []string
			for _, a := range c.attrs {
				attrs = append(attrs, fmt.Sprintf(`{"key":%q,"value":%q,"index":true}`, a.k, a.v))
			}
			other := "end_block_events"
			if c.section == "end_block_events" {
				other = "begin_block_events"
			}
			if c.section == "finalize_block_events" {
				other = "validator_updates"
			}
			raw := strings.Replace(minimalRecord, `"txs":["dHgx"]`, `"txs":[]`, 1)
			raw = strings.Replace(raw, raw[strings.Index(raw, `"txs_results"`):len(raw)-2],
				fmt.Sprintf(`"txs_results":null,%q:[{"type":"e","attributes":[%s]}],%q:null`, c.section, strings.Join(attrs, ","), other), 1)
			d := NewDecoderOptions(DecoderOptions{EventEncoding: c.mode})
			rows := chain.NewRows(d.Tables())
			err := d.Decode(123, []byte(raw), rows)
			if c.want == nil {
				var de *DecodeError
				if !errors.As(err, &de) || de.Height != 123 || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "decode block 123") {
					t.Fatalf("Decode = %v, want a *DecodeError at height 123 saying %q", err, c.wantErr)
				}
				if c.mode == EventEncodingAuto && !errors.Is(err, ErrEncodingUndecided) {
					t.Errorf("%v does not wrap ErrEncodingUndecided", err)
				}
				if rows.Lens()[tableBlocks] != 0 {
					t.Errorf("rows left behind by a failed Decode: %v", rows.Lens())
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			got, err := parseAttributes(rows.Table(tableEvents)[0][eAttributes].([]byte))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i, w := range c.want {
				if got[i] != (kvAttr{w.k, w.v, true}) {
					t.Errorf("attribute %d: %v, want %v", i, got[i], w)
				}
			}
		})
	}
}

// TestParseEventEncoding checks the values --event-encoding takes.
func TestParseEventEncoding(t *testing.T) {
	for s, want := range map[string]EventEncoding{"": EventEncodingAuto, "auto": EventEncodingAuto, "base64": EventEncodingBase64, "text": EventEncodingText} {
		if got, err := ParseEventEncoding(s); err != nil || got != want || (s != "" && got.String() != s) {
			t.Errorf("ParseEventEncoding(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseEventEncoding("hex"); err == nil || !strings.Contains(err.Error(), `"hex"`) {
		t.Errorf("ParseEventEncoding(hex) = %v", err)
	}
}

func TestBlockIdentityErrors(t *testing.T) {
	for _, raw := range []string{``, `null`, `{}`, `{"block":null}`, `{"block":{"block_id":{"hash":"AB"},"block":{"header":{"height":"0"}}}}`,
		`{"block":{"block_id":{"hash":"AB"},"block":{"header":{}}}}`, `{"block":{"block_id":{"hash":"ZZ"},"block":{"header":{"height":"3"}}}}`,
		`{"block":{"block_id":{"hash":"AB"},"block":{"header":{"height":"3","last_block_id":{"hash":"A"}}}}}`, `{"block":{"block_id":{"hash":"AB"}`} {
		if _, _, _, err := BlockIdentity([]byte(raw)); err == nil || !errors.Is(err, ErrMalformedRecord) || !strings.HasPrefix(err.Error(), "cometbft: ") {
			t.Errorf("BlockIdentity(%s) = %v, want a cometbft: error wrapping ErrMalformedRecord", raw, err)
		}
	}
	// Only the block half is needed: a record whose results are cut off
	// still has an identity.
	hash, parent, h, err := BlockIdentity([]byte(`{"block":{"block_id":{"hash":"AB"},"block":{"header":{"height":"3","last_block_id":{"hash":"CD"}}}},"block_results":{`))
	if err != nil || h != 3 || !bytes.Equal(hash, []byte{0xAB}) || !bytes.Equal(parent, []byte{0xCD}) {
		t.Errorf("BlockIdentity = %X, %X, %d, %v", hash, parent, h, err)
	}
}

func TestMarshalRecord(t *testing.T) {
	rec := MarshalRecord(json.RawMessage(`{"a":1}`), json.RawMessage(`{"b":2}`))
	if string(rec) != `{"block":{"a":1},"block_results":{"b":2}}` {
		t.Errorf("MarshalRecord = %s", rec)
	}
}

func TestDecoderInterface(t *testing.T) {
	d := NewDecoder()
	if d.Family() != chain.FamilyCometBFT {
		t.Errorf("Family = %v", d.Family())
	}
	ts := d.Tables()
	var names []string
	for _, tb := range ts {
		names = append(names, tb.Name)
		if tb.HeightColumn != "height" || tb.Columns[0].Name != "height" || len(tb.PrimaryKey) == 0 {
			t.Errorf("table %s: %+v", tb.Name, tb)
		}
	}
	if !reflect.DeepEqual(names, []string{"blocks", "transactions", "events", "commit_signatures", "validator_updates", "consensus_param_updates", "messages"}) {
		t.Errorf("tables %v", names)
	}
	for i, w := range []int{bWidth, tWidth, eWidth, csWidth, vuWidth, cpWidth, mWidth} {
		if len(ts[i].Columns) != w {
			t.Errorf("table %s has %d columns, column constants say %d", ts[i].Name, len(ts[i].Columns), w)
		}
	}
	ts[0].Name = "changed"
	if d.Tables()[0].Name != "blocks" {
		t.Error("Tables returns the decoder's own slice")
	}
}

func TestCleanText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"é—🚀", "é—🚀"},
		{"a\x00b", "a\uFFFDb"},
		{"bad\xff\xfe", "bad\uFFFD\uFFFD"},
		{"cut\xe2\x82", "cut\uFFFD\uFFFD"},
		{"\uFFFD kept", "\uFFFD kept"},
	} {
		if got := string(cleanText(nil, []byte(c.in))); got != c.want {
			t.Errorf("cleanText(%q) = %q, want %q", c.in, got, c.want)
		}
		js := jsonscan.AppendQuoted(nil, []byte(c.in))
		var back string
		if err := json.Unmarshal(js, &back); err != nil || back != c.want {
			t.Errorf("jsonscan.AppendQuoted(%q) = %s, reads back as %q (%v), want %q", c.in, js, back, err, c.want)
		}
		if bytes.Contains(js, []byte(`\u0000`)) {
			t.Errorf("jsonscan.AppendQuoted(%q) = %s: jsonb rejects \\u0000", c.in, js)
		}
	}
	long := strings.Repeat("0123456789abcdef", 8) + "\"\\\n\r\t\x01\x1f" + strings.Repeat("x", 9)
	var back string
	if err := json.Unmarshal(jsonscan.AppendQuoted(nil, []byte(long)), &back); err != nil || back != long {
		t.Errorf("AppendQuoted of control characters reads back as %q, %v", back, err)
	}
}

func TestParseTime(t *testing.T) {
	for _, in := range []string{
		"2023-02-16T06:18:32.774178625Z", "2023-02-16T06:18:32Z", "2023-02-16T06:18:32.1Z", "0001-01-01T00:00:00Z",
		"2024-02-29T23:59:59.999999999Z", "2023-02-16T06:18:32.5+02:00",
	} {
		want, err := time.Parse(time.RFC3339Nano, in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseTime([]byte(in))
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%s) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "2023-02-30T00:00:00Z", "2023-13-01T00:00:00Z", "2023-02-16T24:00:00Z", "2023-02-16T06:18:32.Z", "2023-02-16 06:18:32Z"} {
		if got, err := parseTime([]byte(in)); err == nil {
			t.Errorf("parseTime(%s) = %v, want an error", in, got)
		}
	}
}

func FuzzDecode(f *testing.F) {
	s := NewSynthetic(SyntheticConfig{Seed: 1, Validators: 2, TxPerBlock: 2})
	for _, h := range []uint64{1, 2, 3} {
		f.Add(h, s.AppendRecord(nil, h))
	}
	for _, v := range []string{"v034", "v037", "v038"} {
		raw, err := os.ReadFile("testdata/versions/block_" + v + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint64(fixtureHeight), raw)
	}
	f.Add(uint64(123), []byte(minimalRecord))
	d := NewDecoder()
	f.Fuzz(func(t *testing.T, height uint64, raw []byte) {
		rows := chain.NewRows(d.Tables())
		rows.Row(tableBlocks)[0] = "sentinel"
		before := rows.Lens()
		err := d.Decode(height, raw, rows)
		if err != nil {
			if !reflect.DeepEqual(rows.Lens(), before) || rows.Table(tableBlocks)[0][0] != "sentinel" {
				t.Fatalf("failed Decode changed rows: %v", rows.Lens())
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Height != height {
				t.Fatalf("error %v does not name height %d", err, height)
			}
			return
		}
		b := rows.Table(tableBlocks)[1]
		if b[bNumTxs] != int32(rows.Len(tableTransactions)) || b[bNumEvents] != int32(rows.Len(tableEvents)) {
			t.Fatalf("block row counts %v/%v, rows %v", b[bNumTxs], b[bNumEvents], rows.Lens())
		}
		for _, ev := range rows.Table(tableEvents) {
			if _, err := parseAttributes(ev[eAttributes].([]byte)); err != nil || bytes.Contains(ev[eAttributes].([]byte), []byte(`\u0000`)) {
				t.Fatalf("attributes %s: not valid jsonb", ev[eAttributes])
			}
		}
		for i, tb := range d.Tables() {
			tbl := rows.Table(i)
			if i == tableBlocks {
				tbl = tbl[1:]
			}
			for _, row := range tbl {
				for c, v := range row {
					if str, ok := v.(string); ok && (strings.ContainsRune(str, 0) || !utf8ValidString(str)) {
						t.Fatalf("%s.%s: text %q is not valid for PostgreSQL", tb.Name, tb.Columns[c].Name, str)
					}
					if js, ok := v.([]byte); ok && tb.Columns[c].Type == "jsonb" && (!json.Valid(js) || bytes.Contains(js, []byte(`\u0000`))) {
						t.Fatalf("%s.%s: %q is not valid jsonb", tb.Name, tb.Columns[c].Name, js)
					}
					if v == nil && !tb.Columns[c].Null {
						t.Fatalf("%s.%s: NULL in a NOT NULL column", tb.Name, tb.Columns[c].Name)
					}
				}
			}
		}
		if _, _, h, err := BlockIdentity(raw); err != nil || h != height {
			t.Fatalf("Decode accepted the record but BlockIdentity = %d, %v", h, err)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	s := NewSynthetic(SyntheticConfig{Seed: 1})
	recs := make([][]byte, 1000)
	size := 0
	for i := range recs {
		recs[i] = s.AppendRecord(nil, uint64(i+1))
		size += len(recs[i])
	}
	d := NewDecoder()
	rows := chain.NewRows(d.Tables())
	b.SetBytes(int64(size / len(recs)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i % len(recs)
		if j%200 == 0 {
			rows.Reuse() // as export reuses a committed batch's rows (500 blocks or 100,000 rows)
		}
		if err := d.Decode(uint64(j+1), recs[j], rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
}

func utf8ValidString(s string) bool { return utf8.ValidString(s) }

// TestDecodeConcurrent decodes from several goroutines at once, as export
// may, and checks the rows equal a sequential decode's.
func TestDecodeConcurrent(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 6})
	d := NewDecoder()
	const n = 120
	want := make([]string, n+1)
	for h := uint64(1); h <= n; h++ {
		rows := chain.NewRows(d.Tables())
		if err := d.Decode(h, s.AppendRecord(nil, h), rows); err != nil {
			t.Fatal(err)
		}
		want[h] = fmt.Sprint(rows.Table(0), rows.Table(1), rows.Table(2))
	}
	errs := make(chan error, 4)
	for w := range uint64(4) {
		go func() {
			for h := 1 + w; h <= n; h += 4 {
				rows := chain.NewRows(d.Tables())
				if err := d.Decode(h, s.AppendRecord(nil, h), rows); err != nil {
					errs <- err
					return
				}
				if got := fmt.Sprint(rows.Table(0), rows.Table(1), rows.Table(2)); got != want[h] {
					errs <- fmt.Errorf("height %d: concurrent decode differs from sequential", h)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestDecodeAttributeForms reads attributes written in every way JSON
// allows, compact (CometBFT's own) or not.
func TestDecodeAttributeForms(t *testing.T) {
	for _, c := range []struct {
		json string
		want kvAttr
	}{
		{`{"key":"k","value":"v","index":true}`, kvAttr{"k", "v", true}},
		{`{"key":"k","value":"v","index":false}`, kvAttr{"k", "v", false}},
		{`{"key":"k","value":"v"}`, kvAttr{"k", "v", false}},
		{`{"key":"k","value":null,"index":true}`, kvAttr{"k", "", true}},
		{`{"key":null,"value":"v","index":true}`, kvAttr{"", "v", true}},
		{`{"value":"v","index":true,"key":"k"}`, kvAttr{"k", "v", true}},
		{`{ "key" : "k" , "value" : "v" , "index" : true }`, kvAttr{"k", "v", true}},
		{`{"key":"k\"q","value":"v\\\/","index":true}`, kvAttr{"k\"q", "v\\/", true}},
		{`{"key":"k","value":"v","index":true,"extra":[1,{"a":null}]}`, kvAttr{"k", "v", true}},
		{`{"key":"k","index":true}`, kvAttr{"k", "", true}},
		{`{}`, kvAttr{}},
	} {
		raw := strings.Replace(minimalRecord, `{"key":"k","value":"v","index":true}`, c.json, 1)
		d := NewDecoder()
		rows := chain.NewRows(d.Tables())
		if err := d.Decode(123, []byte(raw), rows); err != nil {
			t.Errorf("%s: %v", c.json, err)
			continue
		}
		got, err := parseAttributes(rows.Table(tableEvents)[0][eAttributes].([]byte))
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: attributes %v, %v; want %v", c.json, got, err, c.want)
		}
	}
	for _, bad := range []string{`{"key":"k","value":"v","index":tru}`, `{"key":"k","value":"v",}`, `{"key":"k","value":"v"`, `{"key":"k\x","value":"v"}`} {
		raw := strings.Replace(minimalRecord, `{"key":"k","value":"v","index":true}`, bad, 1)
		d := NewDecoder()
		if err := d.Decode(123, []byte(raw), chain.NewRows(d.Tables())); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// BenchmarkDecodeMessages decodes 1,000 synthetic blocks with every message
// decoded to protojson (the built-in set) and with none (protodec.None):
// the cost of messages.decoded on the export path, per block and per row.
func BenchmarkDecodeMessages(b *testing.B) {
	s := NewSynthetic(SyntheticConfig{Seed: 1})
	recs := make([][]byte, 1000)
	for i := range recs {
		recs[i] = s.AppendRecord(nil, uint64(i+1))
	}
	for _, c := range []struct {
		name string
		set  *protodec.Set
	}{{"protojson", protodec.MustBuiltin()}, {"raw", protodec.None()}} {
		b.Run(c.name, func(b *testing.B) {
			d := NewDecoderOptions(DecoderOptions{Messages: c.set})
			rows := chain.NewRows(d.Tables())
			var nrows, msgs, decoded int
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				j := i % len(recs)
				if j == 0 {
					for _, m := range rows.Table(tableMessages) {
						if m[mDecoded] != nil {
							decoded++
						}
					}
					nrows += rows.Total()
					msgs += len(rows.Table(tableMessages))
					rows.Reset()
				}
				if err := d.Decode(uint64(j+1), recs[j], rows); err != nil {
					b.Fatal(err)
				}
			}
			nrows += rows.Total()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(nrows), "ns/row")
			if msgs > 0 {
				b.ReportMetric(float64(decoded)/float64(msgs), "decoded/msg")
			}
		})
	}
}

// TestDecodeIntoReusedRows decodes blocks into rows whose memory a batch
// of other blocks filled before (export reuses a batch's rows once it is
// committed, Rows.Reuse), and checks every value against a decode into
// fresh rows: byte columns are carved from the rows' memory, and what an
// earlier batch left there must never show.
func TestDecodeIntoReusedRows(t *testing.T) {
	s := NewSynthetic(SyntheticConfig{Seed: 7})
	d := NewDecoder()
	decode := func(rows *chain.Rows, from, to uint64) string {
		for h := from; h <= to; h++ {
			if err := d.Decode(h, s.AppendRecord(nil, h), rows); err != nil {
				t.Fatal(err)
			}
		}
		var b strings.Builder
		for i := range d.Tables() {
			for _, row := range rows.Table(i) {
				for _, v := range row {
					if ps, ok := v.([]*string); ok { // signers with a NULL: the strings, not their addresses
						strs := make([]string, len(ps))
						for k, p := range ps {
							strs[k] = "NULL"
							if p != nil {
								strs[k] = strconv.Quote(*p)
							}
						}
						v = strs
					}
					fmt.Fprintf(&b, "%T %v|", v, v)
				}
				b.WriteByte('\n')
			}
		}
		return b.String()
	}
	want := decode(chain.NewRows(d.Tables()), 1, 40)
	rows := chain.NewRows(d.Tables())
	decode(rows, 500, 640)
	rows.Reuse()
	if got := decode(rows, 1, 40); got != want {
		t.Fatal("rows decoded into reused memory differ from a fresh decode's")
	}
	if len(want) < 10_000 {
		t.Fatalf("the fresh decode printed %d bytes: too few rows to compare", len(want))
	}
}
