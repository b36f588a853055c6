package evm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/jsonscan"
)

// TestBlockIdentityRefusesTruncatedRecords cuts a real geth record at every
// length short of whole: the block's number, hash and parent hash come
// first in it, so a lazy reader would accept most of these prefixes.
func TestBlockIdentityRefusesTruncatedRecords(t *testing.T) {
	raw := fixtureRecord(t, 18)
	if _, _, h, err := BlockIdentity(raw); err != nil || h != 18 {
		t.Fatalf("whole record: height %d, %v", h, err)
	}
	whole := len(bytes.TrimRight(raw, " \t\r\n"))
	for k := 0; k < whole; k++ {
		if _, _, h, err := BlockIdentity(raw[:k]); err == nil {
			t.Fatalf("record cut to %d of %d bytes accepted (height %d)", k, whole, h)
		}
	}
	// The crasher make faults kept: a record cut right after the fields.
	cut := []byte(`{"block":{"hash":"0x` + zeros(64) + `","number":"0x0","parentHash":"0x` + zeros(64) + `"`)
	if _, _, _, err := BlockIdentity(cut); !errors.Is(err, jsonscan.ErrEnd) {
		t.Fatalf("truncated record: err = %v, want %v", err, jsonscan.ErrEnd)
	}
	if _, _, _, err := BlockIdentity(append(bytes.Clone(raw), `{}`...)); err == nil {
		t.Fatal("a record followed by more JSON accepted")
	}
	dup := append([]byte(`{"block":`), rpcResult(t, "block_18.json")...)
	dup = append(dup, `,"block":null,"receipts":[]}`...)
	if _, _, _, err := BlockIdentity(dup); err == nil {
		t.Fatal("a record with two blocks accepted")
	}
}

// TestHexRefusesUpperCaseX: "0X" is not the JSON-RPC prefix. The identity
// reader, the hash verification and the decoder all refuse it, naming the
// field.
func TestHexRefusesUpperCaseX(t *testing.T) {
	for _, field := range []string{"number", "hash", "parentHash"} {
		t.Run(field, func(t *testing.T) {
			raw := fixtureRecord(t, 2)
			key := []byte(`"` + field + `":"0x`)
			i := bytes.Index(raw, key)
			if i < 0 {
				t.Fatalf("%s not in fixture", field)
			}
			raw[i+len(key)-1] = 'X'
			_, _, _, err := BlockIdentity(raw)
			if !errors.Is(err, errPrefix) || !bytes.Contains([]byte(err.Error()), []byte(field)) {
				t.Errorf("BlockIdentity: err = %v, want %v naming %s", err, errPrefix, field)
			}
			if _, err := VerifyBlock(raw); !errors.Is(err, errPrefix) {
				t.Errorf("VerifyBlock: err = %v, want %v", err, errPrefix)
			}
			var de *DecodeError
			if err := NewDecoder().Decode(2, raw, chain.NewRows(Tables())); !errors.As(err, &de) || !errors.Is(err, errPrefix) || de.Field != "block."+field {
				t.Errorf("Decode: err = %v, want %v in block.%s", err, errPrefix, field)
			}
		})
	}
}

func zeros(n int) string { return string(bytes.Repeat([]byte("0"), n)) }
