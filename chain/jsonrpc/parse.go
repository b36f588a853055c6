package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/blockhaul/blockhaul/chain/jsonscan"
)

// parseSingle reads the response to a single call with id and, when the
// node answered, sets the call's Result or Err.
func parseSingle(ep *endpoint, b []byte, call *Call, id uint64) outcome {
	if firstByte(b) != '{' {
		return badResponse(ep, errors.New("not a JSON-RPC response object"))
	}
	resp, err := splitSingle(b)
	if err != nil {
		return badResponse(ep, err)
	}
	if resp.err != nil {
		redactRPCError(ep, resp.err)
		if resp.err.throttled() {
			return outcome{kind: kindThrottle, label: OutcomeThrottled, err: resp.err}
		}
		call.Err, call.answered, call.Endpoint = resp.err, true, ep.name
		return outcome{kind: kindOK, label: OutcomeRPCError}
	}
	if got, ok := parseID(resp.id); !ok || got != id {
		return badResponse(ep, fmt.Errorf("response id %s does not match request id %d", truncate(resp.id), id))
	}
	call.answered, call.Endpoint = true, ep.name
	if err := decodeResult(resp.result, call.Result); err != nil {
		call.Err = fmt.Errorf("jsonrpc: decode %s result from %s: %w", call.Method, ep.name, err)
	}
	return outcome{kind: kindOK, label: OutcomeOK}
}

// parseBatch matches the responses of a batch to part by id (base is the
// id of part[0]), sets Result or Err of each answered call and returns the
// calls left unanswered and what their absence means.
func parseBatch(ep *endpoint, b []byte, part []request, base uint64) ([]request, outcome) {
	switch firstByte(b) {
	case '[':
	case '{':
		return part, singleAnswer(ep, b)
	default:
		return part, badResponse(ep, errors.New("not a JSON-RPC response"))
	}
	// The whole body is split before any call is touched: a bad body
	// leaves every call as it was, to be sent again.
	resps, err := splitBatch(b, make([]rawResponse, 0, len(part)))
	if err != nil {
		return part, badResponse(ep, err)
	}
	answer, errs := matchAnswers(ep, resps, len(part), base)
	fillCalls(ep, resps, part, answer)
	var rest []request
	for i, r := range part {
		if answer[i] == 0 {
			rest = append(rest, r)
		}
	}
	switch {
	case len(rest) == 0:
		return nil, outcome{kind: kindOK, label: OutcomeOK}
	case errs.refused != nil && len(rest) == len(part):
		return part, outcome{kind: kindRefused, label: OutcomeBatchRefused, err: errs.refused}
	case errs.tooLarge != nil:
		return rest, outcome{kind: kindTooLarge, label: OutcomeTooLarge, err: errs.tooLarge}
	case errs.throttled != nil:
		return rest, outcome{kind: kindThrottle, label: OutcomeThrottled, err: errs.throttled}
	}
	return rest, badResponse(ep, fmt.Errorf("%d of %d calls unanswered", len(rest), len(part)))
}

// singleAnswer is the outcome of a lone object answering an array: an error
// about the whole batch, or an endpoint that does not read arrays at all.
func singleAnswer(ep *endpoint, b []byte) outcome {
	one, err := splitSingle(b)
	if err != nil {
		return badResponse(ep, err)
	}
	if e := one.err; e != nil {
		redactRPCError(ep, e)
		switch {
		case e.throttled():
			return outcome{kind: kindThrottle, label: OutcomeThrottled, err: e}
		case isBatchTooLarge(e.Message), isBatchTooLarge(string(e.Data)):
			// CometBFT puts "batch request exceeds maximum (10)" in data.
			return outcome{kind: kindTooLarge, label: OutcomeTooLarge, err: e}
		}
		return outcome{kind: kindRefused, label: OutcomeBatchRefused, err: e}
	}
	return outcome{kind: kindRefused, label: OutcomeBatchRefused,
		err: &TransportError{Endpoint: ep.name, Op: "decode response", Err: errors.New("object in response to a batch")}}
}

// batchErrors are the errors in a batch's answers about the batch as a whole.
type batchErrors struct{ throttled, tooLarge, refused *RPCError }

// matchAnswers matches a batch's answers to its n calls by id (ids base to
// base+n-1): answer[i] is 1 + the index in resps of the answer to call i, 0
// when it has none.
func matchAnswers(ep *endpoint, resps []rawResponse, n int, base uint64) ([]int, batchErrors) {
	answer := make([]int, n)
	var errs batchErrors
	for k, r := range resps {
		if e := r.err; e != nil {
			redactRPCError(ep, e)
			// Errors about the batch as a whole may carry any id, or none.
			switch {
			case isBatchTooLarge(e.Message), isBatchTooLarge(string(e.Data)):
				errs.tooLarge = e
				continue
			case isBatchRefused(e.Message):
				errs.refused = e
				continue
			case e.throttled():
				errs.throttled = e
				continue
			}
		}
		id, ok := parseID(r.id)
		if !ok || id < base || id-base >= uint64(n) || answer[id-base] != 0 {
			continue // not ours, or a duplicate: the first answer stands
		}
		answer[id-base] = k + 1
	}
	return answer, errs
}

// fillCalls sets each answered call's result or error.
func fillCalls(ep *endpoint, resps []rawResponse, part []request, answer []int) {
	// Raw results are copied out of the response buffer into one
	// allocation for the whole batch: a batch is a span of blocks, used
	// together, and one allocation of a few hundred KB costs less, in
	// allocation and GC work, than one per result.
	size := 0
	for i, a := range answer {
		if _, raw := part[i].call.Result.(*json.RawMessage); raw && a != 0 && resps[a-1].err == nil {
			size += max(len(resps[a-1].result), len(null))
		}
	}
	arena := make([]byte, 0, size)
	for i, a := range answer {
		if a == 0 {
			continue
		}
		r := resps[a-1]
		call := part[i].call
		call.answered, call.Endpoint = true, ep.name
		if r.err != nil {
			call.Err = r.err
			continue
		}
		if t, raw := call.Result.(*json.RawMessage); raw {
			result := r.result
			if result == nil {
				result = null
			}
			start := len(arena)
			arena = append(arena, result...)
			*t = arena[start:len(arena):len(arena)] // an append to one must not run into the next
			continue
		}
		if err := decodeResult(r.result, call.Result); err != nil {
			call.Err = fmt.Errorf("jsonrpc: decode %s result from %s: %w", call.Method, ep.name, err)
		}
	}
}

func badResponse(ep *endpoint, err error) outcome {
	return outcome{kind: kindTransient, label: OutcomeBadResponse,
		err: &TransportError{Endpoint: ep.name, Op: "decode response", Err: err}}
}

func truncate(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "…"
	}
	return string(b)
}

// Responses are split with the shared scanner (chain/jsonscan) rather
// than by encoding/json. Results are kept as the node sent them, so all
// that is needed of a result is where it ends and that it is well-formed
// JSON; encoding/json would check the whole body byte by byte through its
// state machine, then walk each result a second time to find its end, at a
// few hundred MB/s. jsonscan.SkipValue makes one pass, skims string
// contents eight bytes at a time, and checks the same grammar (a truncated
// or malformed body is refused, as before), leaving only the small error
// objects to encoding/json.

// rawResponse is one JSON-RPC response object, split. id and result alias
// the body; err is decoded (it owns its bytes).
type rawResponse struct {
	id     []byte    // raw id, nil when absent
	result []byte    // raw result, nil when absent
	err    *RPCError // nil when absent or null
}

// splitSingle splits a body that holds one response object.
func splitSingle(b []byte) (rawResponse, error) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return rawResponse{}, jsonscan.ErrorAt(b, i, "looking for a response object")
	}
	r, i, err := splitResponse(b, i, 0)
	if err != nil {
		return rawResponse{}, err
	}
	if i = jsonscan.SkipSpace(b, i); i != len(b) {
		return rawResponse{}, jsonscan.ErrorAt(b, i, "after the response")
	}
	return r, nil
}

// splitBatch splits a body that holds an array of responses, appending
// them to dst. A null element counts as a response with no id, as it did
// with encoding/json; any other element that is not an object makes the
// body bad. Nothing is appended when the body is bad.
func splitBatch(b []byte, dst []rawResponse) ([]rawResponse, error) {
	n0 := len(dst)
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return dst, jsonscan.ErrorAt(b, i, "looking for an array of responses")
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		i++
	} else {
		for {
			var err error
			switch {
			case i >= len(b):
				err = jsonscan.ErrorAt(b, i, "")
			case b[i] == '{':
				var r rawResponse
				r, i, err = splitResponse(b, i, 1)
				dst = append(dst, r)
			case b[i] == 'n':
				i, err = jsonscan.SkipLiteral(b, i, "null")
			default:
				if i, err = jsonscan.SkipValue(b, i, 1); err == nil {
					err = errors.New("batch element is not a response object")
				}
			}
			if err != nil {
				return dst[:n0], err
			}
			if i = jsonscan.SkipSpace(b, i); i < len(b) && b[i] == ',' {
				i = jsonscan.SkipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			return dst[:n0], jsonscan.ErrorAt(b, i, "after an array element")
		}
	}
	if i = jsonscan.SkipSpace(b, i); i != len(b) {
		return dst[:n0], jsonscan.ErrorAt(b, i, "after the responses")
	}
	return dst, nil
}

// splitResponse splits the response object that starts at b[i] ('{'),
// nested depth containers deep, and returns the offset just past it. Keys
// are matched as encoding/json matched them into response: exactly, else
// case-insensitively; the last of duplicate keys wins; others are skipped
// (but validated).
func splitResponse(b []byte, i, depth int) (rawResponse, int, error) {
	var r rawResponse
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return r, i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return r, i, jsonscan.ErrorAt(b, i, "looking for beginning of object key string")
		}
		start := i
		end, escaped, err := jsonscan.SkipString(b, i+1)
		if err != nil {
			return r, end, err
		}
		key := b[start:end]
		if i = jsonscan.SkipSpace(b, end); i >= len(b) || b[i] != ':' {
			return r, i, jsonscan.ErrorAt(b, i, "after object key")
		}
		i = jsonscan.SkipSpace(b, i+1)
		vstart := i
		if i, err = jsonscan.SkipValue(b, i, depth+1); err != nil {
			return r, i, err
		}
		val := b[vstart:i]
		switch keyField(key, escaped) {
		case fieldID:
			r.id = val
		case fieldResult:
			r.result = val
		case fieldError:
			// Decoded into the same pointer, so null clears it and a
			// repeated key merges, as encoding/json did. (Through a copy
			// of the pointer, for r not to escape.)
			e := r.err
			if err := json.Unmarshal(val, &e); err != nil {
				return r, vstart, fmt.Errorf("error object: %w", err)
			}
			r.err = e
		}
		if i = jsonscan.SkipSpace(b, i); i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return r, i + 1, nil
		}
		return r, i, jsonscan.ErrorAt(b, i, "after object key:value pair")
	}
}

type field int

const (
	fieldOther field = iota
	fieldID
	fieldResult
	fieldError
)

// keyField says which field of a response a quoted key names.
func keyField(quoted []byte, escaped bool) field {
	name := quoted[1 : len(quoted)-1]
	if escaped {
		name = jsonscan.AppendUnescaped(nil, name)
	}
	switch string(name) {
	case "id":
		return fieldID
	case "result":
		return fieldResult
	case "error":
		return fieldError
	}
	switch {
	case bytes.EqualFold(name, []byte("id")):
		return fieldID
	case bytes.EqualFold(name, []byte("result")):
		return fieldResult
	case bytes.EqualFold(name, []byte("error")):
		return fieldError
	}
	return fieldOther
}
