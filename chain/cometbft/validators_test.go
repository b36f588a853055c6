package cometbft

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
)

// referenceValidatorRows is a plain encoding/json reading of a record's
// commit signatures, validator updates and consensus parameter updates,
// for the decoder's rows to be held against.
func referenceValidatorRows(raw []byte) (sigs, updates, params [][]any, err error) {
	var rec struct {
		Block struct {
			Block struct {
				Header struct {
					Height string `json:"height"`
					Time   string `json:"time"`
				} `json:"header"`
				LastCommit *struct {
					Height     string `json:"height"`
					Signatures []struct {
						Flag    int    `json:"block_id_flag"`
						Address string `json:"validator_address"`
						Time    string `json:"timestamp"`
					} `json:"signatures"`
				} `json:"last_commit"`
			} `json:"block"`
		} `json:"block"`
		Results struct {
			ValidatorUpdates []map[string]json.RawMessage `json:"validator_updates"`
			Params           json.RawMessage              `json:"consensus_param_updates"`
		} `json:"block_results"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, nil, nil, err
	}
	h, _ := strconv.ParseInt(rec.Block.Block.Header.Height, 10, 64)
	bt, err := time.Parse(time.RFC3339Nano, rec.Block.Block.Header.Time)
	if err != nil {
		return nil, nil, nil, err
	}
	if c := rec.Block.Block.LastCommit; c != nil {
		signed, _ := strconv.ParseInt(c.Height, 10, 64)
		for i, s := range c.Signatures {
			var addr, ts any
			if s.Address != "" {
				b, err := hex.DecodeString(s.Address)
				if err != nil {
					return nil, nil, nil, err
				}
				addr = b
			}
			if t, err := time.Parse(time.RFC3339Nano, s.Time); err == nil && !t.IsZero() {
				ts = t
			}
			sigs = append(sigs, []any{h, bt, signed, int32(i), int32(s.Flag), addr, ts})
		}
	}
	for i, u := range rec.Results.ValidatorUpdates {
		power := "0" // a power of 0 is left out, as protobuf JSON leaves out defaults
		if v, ok := u["power"]; ok {
			if err := json.Unmarshal(v, &power); err != nil {
				return nil, nil, nil, fmt.Errorf("power: %w", err)
			}
		}
		p, _ := strconv.ParseInt(power, 10, 64)
		var typ, key string
		if v, ok := u["pub_key_type"]; ok {
			json.Unmarshal(v, &typ)
			json.Unmarshal(u["pub_key_bytes"], &key)
		} else {
			var pk struct {
				Sum *struct {
					Value map[string]string `json:"value"`
				} `json:"Sum"`
				Type  string `json:"type"`
				Value string `json:"value"`
			}
			if err := json.Unmarshal(u["pub_key"], &pk); err != nil {
				return nil, nil, nil, err
			}
			if pk.Sum != nil {
				for k, v := range pk.Sum.Value {
					typ, key = k, v
				}
			} else {
				typ, key = strings.ToLower(strings.TrimPrefix(pk.Type, "tendermint/PubKey")), pk.Value
			}
		}
		kb, err := base64.StdEncoding.DecodeString(key)
		if err != nil {
			return nil, nil, nil, err
		}
		var addr any
		if typ == "ed25519" {
			sum := sha256.Sum256(kb)
			addr = sum[:20]
		}
		updates = append(updates, []any{h, bt, int32(i), typ, kb, addr, p})
	}
	if len(rec.Results.Params) > 0 && string(rec.Results.Params) != "null" {
		params = append(params, []any{h, bt, []byte(rec.Results.Params)})
	}
	return sigs, updates, params, nil
}

// checkValidatorRowsAgainstReference compares the three tables' rows of
// one decoded record with referenceValidatorRows.
func checkValidatorRowsAgainstReference(t *testing.T, name string, raw []byte, rows *chain.Rows) {
	t.Helper()
	ws, wu, wp, err := referenceValidatorRows(raw)
	if err != nil {
		t.Fatalf("%s: reference: %v", name, err)
	}
	for _, c := range []struct {
		table int
		want  [][]any
	}{{tableCommitSignatures, ws}, {tableValidatorUpdates, wu}, {tableConsensusParamUpdates, wp}} {
		got := rows.Table(c.table)
		tb := tables[c.table]
		if len(got) != len(c.want) {
			t.Fatalf("%s: table %s: %d rows, reference %d", name, tb.Name, len(got), len(c.want))
		}
		for r := range got {
			for col := range got[r] {
				g, w := got[r][col], c.want[r][col]
				ok := false
				switch tb.Columns[col].Type {
				case "jsonb":
					var gv, wv any
					ok = json.Unmarshal(g.([]byte), &gv) == nil && json.Unmarshal(w.([]byte), &wv) == nil && reflect.DeepEqual(gv, wv)
				case "timestamptz":
					gt, gok := g.(time.Time)
					wt, wok := w.(time.Time)
					ok = gok == wok && (!gok || gt.Equal(wt))
				default:
					ok = reflect.DeepEqual(g, w)
				}
				if !ok {
					t.Fatalf("%s: %s row %d column %s: got %#v, reference %#v", name, tb.Name, r, tb.Columns[col].Name, g, w)
				}
			}
		}
	}
}

// TestDecodeRecordedCommitSignatures checks the commit signatures of the
// recorded node's blocks: one per validator, signing the block before.
func TestDecodeRecordedCommitSignatures(t *testing.T) {
	d := NewDecoder()
	total := 0
	for _, r := range recordedNodeRecords(t) {
		rows := chain.NewRows(d.Tables())
		if err := d.Decode(r.expect.Height, r.raw, rows); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		checkValidatorRowsAgainstReference(t, r.name, r.raw, rows)
		for _, s := range rows.Table(tableCommitSignatures) {
			total++
			if s[csSignedHeight] != int64(r.expect.Height)-1 {
				t.Errorf("%s: signed_height %v", r.name, s[csSignedHeight])
			}
		}
		if r.expect.Height == 1 && rows.Len(tableCommitSignatures) != 0 {
			t.Errorf("%s: height 1 has %d commit signatures", r.name, rows.Len(tableCommitSignatures))
		}
	}
	if total == 0 {
		t.Fatal("no commit signatures in the recorded blocks")
	}
}

func TestDecodeSyntheticCommitSignatures(t *testing.T) {
	d := NewDecoder()
	s := NewSynthetic(SyntheticConfig{Seed: 5, Validators: 7})
	absent := 0
	for h := uint64(1); h <= 300; h++ {
		raw := s.AppendRecord(nil, h)
		rows := chain.NewRows(d.Tables())
		if err := d.Decode(h, raw, rows); err != nil {
			t.Fatal(err)
		}
		checkValidatorRowsAgainstReference(t, fmt.Sprintf("synthetic %d", h), raw, rows)
		if want := min(h-1, 1) * 7; uint64(rows.Len(tableCommitSignatures)) != want {
			t.Fatalf("height %d: %d commit signatures, want %d", h, rows.Len(tableCommitSignatures), want)
		}
		for _, sg := range rows.Table(tableCommitSignatures) {
			if sg[csFlag] == int32(BlockIDFlagAbsent) {
				absent++
				if sg[csAddress] != nil || sg[csTimestamp] != nil {
					t.Fatalf("height %d: absent signature %v has an address or time", h, sg)
				}
			} else if len(sg[csAddress].([]byte)) != 20 {
				t.Fatalf("height %d: signature %v", h, sg)
			}
		}
	}
	if absent == 0 {
		t.Error("no absent validator in 300 synthetic blocks")
	}
}

// TestDecodeValidatorUpdateForms reads validator updates in the three forms
// nodes print them, and consensus parameter updates with text jsonb cannot
// hold.
func TestDecodeValidatorUpdateForms(t *testing.T) {
	raw, err := os.ReadFile("testdata/versions/block_v037.json")
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{0xab}, 32)
	k64 := base64.StdEncoding.EncodeToString(key)
	secp := append([]byte{2}, bytes.Repeat([]byte{7}, 32)...)
	updates := `[{"pub_key":{"Sum":{"type":"tendermint.crypto.PublicKey_Ed25519","value":{"ed25519":"` + k64 + `"}}},"power":"10"},` +
		`{"pub_key":{"type":"tendermint/PubKeyEd25519","value":"` + k64 + `"},"power":"0"},` +
		`{"pub_key_type":"secp256k1","pub_key_bytes":"` + base64.StdEncoding.EncodeToString(secp) + `","power":"3"},` +
		`{"pub_key_type":"sr25519","pub_key_bytes":"AQI=","power":"1"}]`
	params := `{"block":{"max_bytes":"22020096","max_gas":"-1"},"version":{"app":"0"},"note":"nul\u0000here"}`
	rec := bytes.Replace(raw, []byte(`"validator_updates": null`), []byte(`"validator_updates": `+updates), 1)
	rec = bytes.Replace(rec, []byte(`"consensus_param_updates": null`), []byte(`"consensus_param_updates": `+params), 1)
	if bytes.Equal(rec, raw) {
		t.Fatal("fixture has no null validator_updates to replace")
	}
	d := NewDecoder()
	rows := chain.NewRows(d.Tables())
	if err := d.Decode(fixtureHeight, rec, rows); err != nil {
		t.Fatal(err)
	}
	edAddr := sha256.Sum256(key)
	want := [][]any{
		{int32(0), "ed25519", key, edAddr[:20], int64(10)},
		{int32(1), "ed25519", key, edAddr[:20], int64(0)},
		{int32(2), "secp256k1", secp, mustDecodeHex(t, secpAddrHex(secp)), int64(3)},
		{int32(3), "sr25519", []byte{1, 2}, nil, int64(1)},
	}
	got := rows.Table(tableValidatorUpdates)
	if len(got) != len(want) {
		t.Fatalf("%d validator updates, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := []any{got[i][vuIndex], got[i][vuKeyType], got[i][vuKey], got[i][vuAddress], got[i][vuPower]}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("validator update %d = %v, want %v", i, g, w)
		}
	}
	if rows.Len(tableConsensusParamUpdates) != 1 {
		t.Fatalf("%d consensus param rows", rows.Len(tableConsensusParamUpdates))
	}
	p := rows.Table(tableConsensusParamUpdates)[0][cpParams].([]byte)
	if bytes.Contains(p, []byte(`\u0000`)) || !json.Valid(p) || !bytes.Contains(p, []byte(`"max_gas":"-1"`)) {
		t.Errorf("params %s", p)
	}
}

// secpAddrHex is the RIPEMD-160 of SHA-256 of a secp256k1 key, computed
// here by the x/crypto package the decoder uses too; the vector below pins it.
func secpAddrHex(key []byte) string { return hex.EncodeToString(ValidatorAddress("secp256k1", key)) }

func TestValidatorAddressVectors(t *testing.T) {
	// Cosmos SDK's secp256k1 test vector (crypto/keys/secp256k1):
	// pubkey 02950e1cdfcb133d6024109fd489f734eeb4502418e538c28481f22bce276f248c
	// has the address 7c2bb42a8be69791ec763e51f5a49bcd41e82237.
	key := mustDecodeHex(t, "02950e1cdfcb133d6024109fd489f734eeb4502418e538c28481f22bce276f248c")
	if got := hex.EncodeToString(ValidatorAddress("secp256k1", key)); got != "7c2bb42a8be69791ec763e51f5a49bcd41e82237" {
		t.Errorf("secp256k1 address %s", got)
	}
	if ValidatorAddress("sr25519", key) != nil {
		t.Error("address of an unknown key type")
	}
}

func TestSyntheticValidatorUpdates(t *testing.T) {
	d := NewDecoder()
	s := NewSynthetic(SyntheticConfig{Seed: 3})
	for _, h := range []uint64{validatorUpdatesEvery - 1, validatorUpdatesEvery, 20 * validatorUpdatesEvery} {
		raw := s.AppendUnchained(nil, h, [32]byte{1})
		rows := chain.NewRows(d.Tables())
		if err := d.Decode(h, raw, rows); err != nil {
			t.Fatal(err)
		}
		checkValidatorRowsAgainstReference(t, fmt.Sprintf("synthetic %d", h), raw, rows)
		if want := int(h / validatorUpdatesEvery * validatorUpdatesEvery / h); rows.Len(tableValidatorUpdates) != want {
			t.Fatalf("height %d: %d validator updates, want %d", h, rows.Len(tableValidatorUpdates), want)
		}
		for _, u := range rows.Table(tableValidatorUpdates) {
			// The validator's address is the one it signs commits with.
			v := s.UpdatedValidator(h)
			if !bytes.Equal(u[vuAddress].([]byte), v[:]) || u[vuPower] != int64(1_000_000+h%997) {
				t.Errorf("height %d: update %v", h, u)
			}
		}
	}
}
