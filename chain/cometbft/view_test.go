package cometbft

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
)

// jsonRecord is a raw record as encoding/json reads it: the yardstick the
// View's spans and values are checked against.
type jsonRecord struct {
	Block struct {
		BlockID struct {
			Hash string `json:"hash"`
		} `json:"block_id"`
		Block struct {
			Header     json.RawMessage `json:"header"`
			LastCommit json.RawMessage `json:"last_commit"`
		} `json:"block"`
	} `json:"block"`
	Results struct {
		TxResults  json.RawMessage `json:"txs_results"`
		ValUpdates json.RawMessage `json:"validator_updates"`
		Params     json.RawMessage `json:"consensus_param_updates"`
	} `json:"block_results"`
}

type jsonCommit struct {
	Height  string `json:"height"`
	Round   int32  `json:"round"`
	BlockID struct {
		Hash  string `json:"hash"`
		Parts struct {
			Total uint32 `json:"total"`
			Hash  string `json:"hash"`
		} `json:"parts"`
	} `json:"block_id"`
	Signatures []struct {
		Flag      int32   `json:"block_id_flag"`
		Address   string  `json:"validator_address"`
		Timestamp string  `json:"timestamp"`
		Signature *string `json:"signature"`
	} `json:"signatures"`
}

// The View's spans are the record's own members and its values what
// encoding/json reads there, on synthetic records (with commits of nine
// validators) and on what real nodes answered.
func TestViewAgreesWithEncodingJSON(t *testing.T) {
	type rec struct {
		name    string
		raw     []byte
		chained bool // the block hash is the header's (synthetic records are)
	}
	var recs []rec
	s := NewSynthetic(SyntheticConfig{Seed: 21, Validators: 9})
	for h := uint64(1); h <= 40; h++ {
		recs = append(recs, rec{fmt.Sprintf("synthetic %d", h), s.AppendRecord(nil, h), true})
	}
	for _, r := range recordedNodeRecords(t) {
		recs = append(recs, rec{r.name, r.raw, true})
	}
	sawSigs := false
	for _, r := range recs {
		var want jsonRecord
		if err := json.Unmarshal(r.raw, &want); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		v, err := ReadView(r.raw)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		for _, c := range []struct {
			what      string
			got, want []byte
		}{
			{"header", v.HeaderJSON(), want.Block.Block.Header},
			{"last_commit", v.LastCommitJSON(), want.Block.Block.LastCommit},
			{"txs_results", v.TxResultsJSON(), want.Results.TxResults},
			{"validator_updates", v.ValidatorUpdatesJSON(), want.Results.ValUpdates},
			{"consensus_param_updates", v.ConsensusParamUpdatesJSON(), nullIsNil(want.Results.Params)},
		} {
			if !bytes.Equal(c.got, c.want) {
				t.Errorf("%s: %s span %.80q, encoding/json %.80q", r.name, c.what, c.got, c.want)
			}
		}
		hash, err := v.Hash()
		if err != nil || hex.EncodeToString(hash) != lower(want.Block.BlockID.Hash) {
			t.Errorf("%s: hash %X (%v), want %s", r.name, hash, err, want.Block.BlockID.Hash)
		}
		f, err := v.Header()
		if err != nil {
			t.Fatalf("%s: header: %v", r.name, err)
		}
		if sum := f.Hash(); r.chained && !bytes.Equal(sum[:], hash) {
			t.Errorf("%s: header hashes to %X, block_id.hash is %X", r.name, sum, hash)
		}
		if f.Height != v.Height() || f.Height <= 0 {
			t.Errorf("%s: header height %d, view height %d", r.name, f.Height, v.Height())
		}
		c, err := v.LastCommit()
		if err != nil {
			t.Fatalf("%s: last commit: %v", r.name, err)
		}
		var wc jsonCommit
		if err := json.Unmarshal(want.Block.Block.LastCommit, &wc); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		checkCommit(t, r.name, c, wc)
		sawSigs = sawSigs || len(c.Signatures) > 0
	}
	if !sawSigs {
		t.Fatal("no record had commit signatures: the commit was not checked")
	}
}

func checkCommit(t *testing.T, name string, c Commit, w jsonCommit) {
	t.Helper()
	if strconv.FormatInt(c.Height, 10) != w.Height || c.Round != w.Round {
		t.Errorf("%s: commit height/round %d/%d, want %s/%d", name, c.Height, c.Round, w.Height, w.Round)
	}
	if hex.EncodeToString(c.BlockID.Hash) != lower(w.BlockID.Hash) || c.BlockID.PartsTotal != w.BlockID.Parts.Total ||
		hex.EncodeToString(c.BlockID.PartsHash) != lower(w.BlockID.Parts.Hash) {
		t.Errorf("%s: commit block ID %+v, want %+v", name, c.BlockID, w.BlockID)
	}
	if len(c.Signatures) != len(w.Signatures) {
		t.Fatalf("%s: %d signatures, want %d", name, len(c.Signatures), len(w.Signatures))
	}
	for i, sg := range c.Signatures {
		ws := w.Signatures[i]
		wantSig := []byte(nil)
		if ws.Signature != nil {
			wantSig, _ = base64.StdEncoding.DecodeString(*ws.Signature)
		}
		if sg.Flag != ws.Flag || hex.EncodeToString(sg.ValidatorAddress) != lower(ws.Address) || !bytes.Equal(sg.Signature, wantSig) {
			t.Errorf("%s: signature %d: %+v, want %+v", name, i, sg, ws)
		}
		if ts := sg.Timestamp; ws.Flag != BlockIDFlagAbsent && (ts.IsZero() || ts.UTC().Format("2006-01-02T15:04:05.999999999Z") != ws.Timestamp) {
			t.Errorf("%s: signature %d: timestamp %v, want %s", name, i, ts, ws.Timestamp)
		}
	}
}

func nullIsNil(b json.RawMessage) []byte {
	if string(b) == "null" {
		return nil
	}
	return b
}

func lower(s string) string { return string(bytes.ToLower([]byte(s))) }

// Every View error is a malformed record that names what is wrong, and the
// readers prefix their operation.
func TestViewErrors(t *testing.T) {
	good := NewSynthetic(SyntheticConfig{Seed: 3, Validators: 4}).AppendRecord(nil, 5)
	for _, c := range []struct {
		name, raw, want string
	}{
		{"null", `null`, "record is null"},
		{"not an object", `[1]`, "expected object"},
		{"no block", `{"block_results":{}}`, "no block in record"},
		{"bad hash", string(bytes.Replace(good, []byte(`"block_id":{"hash":"`), []byte(`"block_id":{"hash":"zz`), 1)), "block_id.hash"},
		{"truncated", string(good[:len(good)/2]), "malformed record"},
	} {
		_, err := ReadView([]byte(c.raw))
		if c.name == "bad hash" && err == nil {
			// The span is read; the hex is decoded by whoever asks.
			v, _ := ReadView([]byte(c.raw))
			_, err = v.Hash()
		}
		if !errors.Is(err, ErrMalformedRecord) || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
			t.Errorf("%s: %v, want a malformed record naming %q", c.name, err, c.want)
		}
		// VerifyBlock reads the block half only: a record cut in its
		// results still verifies (Decode refuses it).
		if _, verr := VerifyBlock([]byte(c.raw)); verr == nil && c.name != "truncated" {
			t.Errorf("%s: VerifyBlock accepted it", c.name)
		}
	}
}
