package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain/jsonscan"
)

// split splits a body as parseSingle and parseBatch do, by its first byte.
func split(b []byte) ([]rawResponse, error) {
	switch firstByte(b) {
	case '[':
		return splitBatch(b, nil)
	case '{':
		r, err := splitSingle(b)
		if err != nil {
			return nil, err
		}
		return []rawResponse{r}, nil
	}
	return nil, fmt.Errorf("first byte %q", firstByte(b))
}

// splitWithEncodingJSON is how bodies were split before splitSingle and
// splitBatch: encoding/json into response values. The splitters must agree
// with it on every body.
func splitWithEncodingJSON(b []byte) ([]rawResponse, error) {
	var resps []response
	switch firstByte(b) {
	case '[':
		if err := json.Unmarshal(b, &resps); err != nil {
			return nil, err
		}
	case '{':
		resps = make([]response, 1)
		if err := json.Unmarshal(b, &resps[0]); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("first byte %q", firstByte(b))
	}
	out := make([]rawResponse, len(resps))
	for i, r := range resps {
		out[i] = rawResponse{id: r.ID, result: r.Result, err: r.Error}
	}
	return out, nil
}

// nonEmpty drops responses with nothing in them: encoding/json turns a null
// element of a batch into one, the splitter skips it.
func nonEmpty(rs []rawResponse) []rawResponse {
	var out []rawResponse
	for _, r := range rs {
		if r.id != nil || r.result != nil || r.err != nil {
			out = append(out, r)
		}
	}
	return out
}

// checkSplit splits b both ways and reports any difference.
func checkSplit(t *testing.T, b []byte) (ok bool) {
	t.Helper()
	got, err := split(b)
	want, wantErr := splitWithEncodingJSON(b)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("split(%.200q): err %v, encoding/json: %v", b, err, wantErr)
	}
	if err != nil {
		return false
	}
	got, want = nonEmpty(got), nonEmpty(want)
	if len(got) != len(want) {
		t.Fatalf("split(%.200q): %d responses, encoding/json %d", b, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.id, w.id) || (g.id == nil) != (w.id == nil) {
			t.Fatalf("split(%.200q) response %d: id %q, encoding/json %q", b, i, g.id, w.id)
		}
		if !bytes.Equal(g.result, w.result) || (g.result == nil) != (w.result == nil) {
			t.Fatalf("split(%.200q) response %d: result %.100q, encoding/json %.100q", b, i, g.result, w.result)
		}
		if !reflect.DeepEqual(g.err, w.err) {
			t.Fatalf("split(%.200q) response %d: error %+v, encoding/json %+v", b, i, g.err, w.err)
		}
	}
	return true
}

// checkPrefixes checks that no prefix of a valid body that cuts into it is
// accepted: a body cut short must never pass for a complete one. At most
// limit cut points are tried, spread over the body.
func checkPrefixes(t *testing.T, b []byte, limit int) {
	t.Helper()
	end := len(bytes.TrimRight(b, " \t\r\n"))
	step := max(1, end/limit)
	for n := 0; n < end; n += step {
		if rs, err := split(b[:n]); err == nil {
			t.Fatalf("prefix of %d of %d bytes accepted (%d responses): %.200q", n, len(b), len(rs), b[:n])
		}
	}
}

var splitCases = []string{
	// Well-formed, as nodes send them.
	`{"jsonrpc":"2.0","id":1,"result":{"block":{"height":"5"}}}`,
	`[{"jsonrpc":"2.0","id":1,"result":[1,2]},{"jsonrpc":"2.0","id":2,"result":"x"}]`,
	`[{"jsonrpc":"2.0","id":"3","error":{"code":-32000,"message":"height 3 is not available","data":"pruned"}}]`,
	"[\n  {\n    \"jsonrpc\": \"2.0\",\n    \"id\": 1,\n    \"result\": {\"a\": [ true , false , null ]}\n  }\n]\n",
	` { "id" : 1 , "result" : null } `,
	`{"id":1}`, `{}`, `[]`, `[ ]`, `[{}]`, `[null]`, `[{"id":1},null,{"id":2}]`,
	`{"id":1,"error":null}`,
	`{"id":1,"result":{},"extra":{"deep":[[[{"x":[]}]]]}}`,
	// Strings: escapes, unicode, invalid UTF-8 (let through).
	`{"id":1,"result":"a\"b\\c\/d\b\f\n\r\t\u00e9\uD83D\uDE00"}`,
	`{"id":1,"result":"\ud800 lone surrogate"}`,
	"{\"id\":1,\"result\":\"caf\xc3\xa9 \xff\xfe\"}",
	`{"id":1,"result":"` + strings.Repeat("0123456789abcdef", 40) + `"}`,
	`{"id":1,"result":"` + strings.Repeat(`ab\"`, 50) + `"}`,
	// Numbers.
	`{"id":0,"result":[0,-0,1,-1,10,1.5,-1.5e10,1E+2,1e-2,0.0,123456789012345678901234567890]}`,
	// Keys as encoding/json matched them: case-insensitively, escaped,
	// the last of duplicates.
	`{"ID":1,"Result":[1],"ERROR":null}`,
	`{"\u0069d":7,"r\u0065sult":1}`,
	`{"id":1,"result":1,"result":2,"id":3}`,
	`{"id":1,"error":{"code":1,"message":"a"},"error":{"code":2}}`,
	`{"id":1,"error":{"code":1,"message":"a"},"error":null}`,
	"{\"\u212Ad\":1}", // Kelvin sign, which folds to k: not an id
	"{\"\u017Fesult\":1}",
	// Malformed: every one must be refused.
	``, ` `, `x`, `nul`, `[`, `{`, `[{]`, `{]`, `[}`, `[{}`, `{"id":1`, `{"id":1,}`, `{"id":1,"result":}`,
	`[{"id":1},]`, `[,{"id":1}]`, `[{"id":1}{"id":2}]`, `{"id" 1}`, `{id:1}`, `{'id':1}`,
	`{"id":1} x`, `{"id":1}}`, `[{"id":1}]]`, `{"id":1}{"id":2}`,
	`{"id":01}`, `{"id":-}`, `{"id":1.}`, `{"id":.5}`, `{"id":+1}`, `{"id":1e}`, `{"id":1e+}`, `{"id":0x10}`,
	`{"id":NaN}`, `{"id":tru}`, `{"id":nulll}`, `{"id":True}`,
	`{"id":1,"result":"abc}`, `{"id":1,"result":"a\x"}`, `{"id":1,"result":"\u12"}`, `{"id":1,"result":"\u12G4"}`,
	"{\"id\":1,\"result\":\"tab\there\"}", "{\"id\":1,\"result\":\"nl\nhere\"}",
	`{"id":1,"result":[1,2}`, `{"id":1,"result":{"a":1]}`, `{"id":1,"result":{"a"}}`, `{"id":1,"result":{"a":1,}}`,
	`{"id":1,"result":{1:2}}`, `{"id":1,"result":[1 2]}`,
	// Valid JSON that is no response: refused by both.
	`[1]`, `["x"]`, `[[]]`, `[{"id":1},true]`, `{"id":1,"error":"boom"}`, `{"id":1,"error":{"code":"x"}}`,
	`{"id":1,"error":[1]}`, `{"id":1,"error":{"code":1.5}}`,
	"\xef\xbb\xbf{\"id\":1}",
}

func nested(depth int, open, close string) string {
	return strings.Repeat(open, depth) + strings.Repeat(close, depth)
}

func TestSplitMatchesEncodingJSON(t *testing.T) {
	cases := append([]string(nil), splitCases...)
	// encoding/json's nesting limit, counted from the top of the body.
	for _, d := range []int{jsonscan.MaxDepth - 2, jsonscan.MaxDepth - 1} {
		cases = append(cases,
			`[{"id":1,"result":`+nested(d, "[", "]")+`}]`,
			`[{"id":1,"result":`+nested(d, `{"a":`, "}")[:d*5]+"1"+strings.Repeat("}", d)+`}]`,
			`{"id":1,"result":`+nested(d, "[", "]")+`}`,
			`[{"id":1,"error":{"code":1,"data":`+nested(d-1, "[", "]")+`}}]`,
		)
	}
	cases = append(cases, "["+nested(jsonscan.MaxDepth, "[", "]")+"]")
	for i, c := range cases {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			if checkSplit(t, []byte(c)) {
				checkPrefixes(t, []byte(c), 1000)
			}
		})
	}
}

func TestSplitRefusesDepthBeyondEncodingJSONLimit(t *testing.T) {
	deep := `[{"id":1,"result":` + nested(jsonscan.MaxDepth-1, "[", "]") + `}]`
	if _, err := split([]byte(deep)); err == nil || !strings.Contains(err.Error(), "depth") {
		t.Errorf("body nested %d deep: err %v, want exceeded max depth", jsonscan.MaxDepth+1, err)
	}
}

// genValue appends a random JSON value with random whitespace.
func genValue(r *rand.Rand, dst []byte, depth int) []byte {
	ws := func() {
		if r.IntN(4) == 0 {
			dst = append(dst, " \n\t\r"[r.IntN(4)])
		}
	}
	ws()
	k := r.IntN(10)
	if depth > 6 {
		k = 2 + r.IntN(8)
	}
	switch k {
	case 0:
		dst = append(dst, '{')
		for i := range r.IntN(5) {
			if i > 0 {
				dst = append(dst, ',')
			}
			ws()
			dst = genString(r, dst)
			ws()
			dst = append(dst, ':')
			dst = genValue(r, dst, depth+1)
		}
		ws()
		dst = append(dst, '}')
	case 1:
		dst = append(dst, '[')
		for i := range r.IntN(5) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = genValue(r, dst, depth+1)
		}
		ws()
		dst = append(dst, ']')
	case 2, 3, 4:
		dst = genString(r, dst)
	case 5:
		dst = append(dst, [...]string{"true", "false", "null"}[r.IntN(3)]...)
	default:
		dst = append(dst, [...]string{"0", "-0", "7", "-12", "3.25", "1e9", "-2.5E-3", "18446744073709551616", "0.000001"}[r.IntN(9)]...)
	}
	ws()
	return dst
}

func genString(r *rand.Rand, dst []byte) []byte {
	dst = append(dst, '"')
	for range r.IntN(40) {
		switch r.IntN(12) {
		case 0:
			dst = append(dst, [...]string{`\"`, `\\`, `\/`, `\n`, `\t`, `\u00e9`, `\uD83D\uDE00`}[r.IntN(7)]...)
		case 1:
			dst = append(dst, "é€😀"...)
		default:
			dst = append(dst, "abcdefABCDEF0123456789 +/="[r.IntN(26)])
		}
	}
	return append(dst, '"')
}

// genBody appends a random well-formed batch response body.
func genBody(r *rand.Rand, dst []byte) []byte {
	dst = append(dst, '[')
	for i := range 1 + r.IntN(6) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = fmt.Appendf(dst, `{"jsonrpc":"2.0","id":%d,`, i+1)
		if r.IntN(5) == 0 {
			dst = fmt.Appendf(dst, `"error":{"code":%d,"message":"m %d","data":`, -32000-i, i)
			dst = genValue(r, dst, 3)
			dst = append(dst, `}}`...)
			continue
		}
		dst = append(dst, `"result":`...)
		dst = genValue(r, dst, 2)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func TestSplitRandomBodies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		b := genBody(r, nil)
		if !checkSplit(t, b) {
			t.Fatalf("body %d: generated body refused: %s", i, b)
		}
		checkPrefixes(t, b, 200)
	}
}

func FuzzSplit(f *testing.F) {
	for _, c := range splitCases {
		f.Add([]byte(c))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		f.Add(genBody(r, nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkSplit(t, b) {
			checkPrefixes(t, b, 300)
		}
	})
}

// TestParseBatchResultsOwnTheirBytes checks that raw results survive the
// response buffer going back to the pool, and that appending to one does
// not write into the next (they share one allocation).
func TestParseBatchResultsOwnTheirBytes(t *testing.T) {
	body := []byte(`[{"jsonrpc":"2.0","id":2,"result":{"b":2}},{"jsonrpc":"2.0","id":1,"result":[1]},{"jsonrpc":"2.0","id":3}]`)
	var results [3]json.RawMessage
	var typed struct{ B int }
	calls := []Call{{Method: "a", Result: &results[0]}, {Method: "b", Result: &typed}, {Method: "c", Result: &results[2]}}
	part := make([]request, len(calls))
	for i := range calls {
		part[i] = request{call: &calls[i]}
	}
	rest, oc := parseBatch(&endpoint{name: "test"}, body, part, 1)
	if len(rest) != 0 || oc.kind != kindOK {
		t.Fatalf("rest %d, outcome %+v", len(rest), oc)
	}
	for i := range body {
		body[i] = 'x' // the buffer is reused for the next response
	}
	if string(results[0]) != `[1]` || typed.B != 2 || string(results[2]) != "null" {
		t.Fatalf("results %s %+v %s", results[0], typed, results[2])
	}
	_ = append(results[0], "garbage"...)
	if string(results[2]) != "null" {
		t.Errorf("append to one result changed the next: %s", results[2])
	}
	for i := range calls {
		if !calls[i].answered || calls[i].Err != nil {
			t.Errorf("call %d: answered %v, err %v", i, calls[i].answered, calls[i].Err)
		}
	}
}

// TestParseBatchBadBodyTouchesNoCall checks that a body found bad after
// some good responses leaves every call as it was, to be sent again.
func TestParseBatchBadBodyTouchesNoCall(t *testing.T) {
	body := []byte(`[{"jsonrpc":"2.0","id":1,"result":[1]},{"jsonrpc":"2.0","id":2,"result":[2`)
	var results [2]json.RawMessage
	calls := []Call{{Method: "a", Result: &results[0]}, {Method: "b", Result: &results[1]}}
	part := []request{{call: &calls[0]}, {call: &calls[1]}}
	rest, oc := parseBatch(&endpoint{name: "test"}, body, part, 1)
	if len(rest) != 2 || oc.kind != kindTransient || oc.label != OutcomeBadResponse {
		t.Fatalf("rest %d, outcome %+v: want both calls back and a bad response", len(rest), oc)
	}
	for i := range calls {
		if calls[i].answered || results[i] != nil {
			t.Errorf("call %d touched by a bad body: answered %v, result %s", i, calls[i].answered, results[i])
		}
	}
}
