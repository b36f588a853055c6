package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// FuzzParseBatch feeds arbitrary bodies to parseBatch as the answer to a
// batch of n calls with ids base..base+n-1. It must never panic; the calls
// it returns as unanswered are exactly those it did not answer; a body that
// is not valid JSON touches no call; and every raw result it hands out is,
// byte for byte, the result of an element of the body as encoding/json reads
// it, answering that call's id.
func FuzzParseBatch(f *testing.F) {
	for _, c := range splitCases {
		f.Add([]byte(c), uint8(2), uint8(1))
	}
	f.Add([]byte(`[{"jsonrpc":"2.0","id":2,"result":{"b":2}},{"jsonrpc":"2.0","id":1,"result":[1]},{"jsonrpc":"2.0","id":3}]`), uint8(3), uint8(1))
	f.Add([]byte(`[{"id":5,"error":{"code":-32005,"message":"rate limited"}},{"id":6,"result":"0x1"}]`), uint8(2), uint8(5))
	f.Add([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}`), uint8(4), uint8(1))
	f.Add([]byte(`[{"id":1,"result":1},{"id":1,"result":2}]`), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, n, base8 uint8) {
		n = n%8 + 1
		base := uint64(base8)
		in := bytes.Clone(body)
		calls := make([]Call, n)
		results := make([]json.RawMessage, n)
		part := make([]request, n)
		for i := range calls {
			calls[i] = Call{Method: "m", Result: &results[i]}
			part[i] = request{call: &calls[i]}
		}
		rest, oc := parseBatch(&endpoint{name: "fuzz"}, body, part, base)
		if !bytes.Equal(in, body) {
			t.Fatal("parseBatch modified the body")
		}
		left := map[*Call]bool{}
		for _, r := range rest {
			if left[r.call] {
				t.Fatal("a call returned twice as unanswered")
			}
			left[r.call] = true
		}
		for i := range calls {
			if calls[i].answered == left[&calls[i]] {
				t.Fatalf("call %d: answered %v, returned as unanswered %v", i, calls[i].answered, left[&calls[i]])
			}
		}
		if oc.kind == kindOK && len(rest) > 0 {
			t.Fatalf("outcome OK with %d calls unanswered", len(rest))
		}
		if !json.Valid(body) {
			for i := range calls {
				if calls[i].answered {
					t.Fatalf("invalid JSON answered call %d: %s", i, results[i])
				}
			}
			return
		}
		// The independent reading: encoding/json's (keys matched as it
		// matches them, the last of duplicates winning).
		var elems []*struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(body, &elems) != nil {
			return // an object or an array of non-objects: no result to compare
		}
		for i := range calls {
			if !calls[i].answered || calls[i].Err != nil {
				continue
			}
			found := false
			for _, e := range elems {
				if e == nil || !sameID(e.ID, base+uint64(i)) {
					continue
				}
				r := e.Result
				if r == nil {
					r = null
				}
				if bytes.Equal(r, results[i]) {
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("call %d (id %d) got result %s, which no element with its id carries", i, base+uint64(i), results[i])
			}
		}
	})
}

// sameID reads an id as encoding/json does, a number or a string holding
// one, and compares it with want.
func sameID(raw json.RawMessage, want uint64) bool {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return false
	}
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = x
	default:
		return false
	}
	id, err := strconv.ParseUint(s, 10, 64)
	return err == nil && id == want
}
