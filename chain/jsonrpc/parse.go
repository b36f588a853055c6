package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
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
		// A lone object answering an array: an error about the whole batch,
		// or an endpoint that does not read arrays at all.
		one, err := splitSingle(b)
		if err != nil {
			return part, badResponse(ep, err)
		}
		if e := one.err; e != nil {
			redactRPCError(ep, e)
			switch {
			case e.throttled():
				return part, outcome{kind: kindThrottle, label: OutcomeThrottled, err: e}
			case isBatchTooLarge(e.Message), isBatchTooLarge(string(e.Data)):
				// CometBFT puts "batch request exceeds maximum (10)" in data.
				return part, outcome{kind: kindTooLarge, label: OutcomeTooLarge, err: e}
			}
			return part, outcome{kind: kindRefused, label: OutcomeBatchRefused, err: e}
		}
		return part, outcome{kind: kindRefused, label: OutcomeBatchRefused,
			err: &TransportError{Endpoint: ep.name, Op: "decode response", Err: errors.New("object in response to a batch")}}
	default:
		return part, badResponse(ep, errors.New("not a JSON-RPC response"))
	}
	// The whole body is split before any call is touched: a bad body
	// leaves every call as it was, to be sent again.
	resps, err := splitBatch(b, make([]rawResponse, 0, len(part)))
	if err != nil {
		return part, badResponse(ep, err)
	}
	n := uint64(len(part))
	// answer[i] is 1 + the index in resps of the answer to part[i], 0 when
	// it has none.
	answer := make([]int, len(part))
	var throttled, tooLarge, refused *RPCError
	for k, r := range resps {
		if e := r.err; e != nil {
			redactRPCError(ep, e)
			// Errors about the batch as a whole may carry any id, or none.
			switch {
			case isBatchTooLarge(e.Message), isBatchTooLarge(string(e.Data)):
				tooLarge = e
				continue
			case isBatchRefused(e.Message):
				refused = e
				continue
			case e.throttled():
				throttled = e
				continue
			}
		}
		id, ok := parseID(r.id)
		if !ok || id < base || id-base >= n || answer[id-base] != 0 {
			continue // not ours, or a duplicate: the first answer stands
		}
		answer[id-base] = k + 1
	}
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
	var rest []request
	for i, r := range part {
		if answer[i] == 0 {
			rest = append(rest, r)
		}
	}
	switch {
	case len(rest) == 0:
		return nil, outcome{kind: kindOK, label: OutcomeOK}
	case refused != nil && len(rest) == len(part):
		return part, outcome{kind: kindRefused, label: OutcomeBatchRefused, err: refused}
	case tooLarge != nil:
		return rest, outcome{kind: kindTooLarge, label: OutcomeTooLarge, err: tooLarge}
	case throttled != nil:
		return rest, outcome{kind: kindThrottle, label: OutcomeThrottled, err: throttled}
	}
	return rest, badResponse(ep, fmt.Errorf("%d of %d calls unanswered", len(rest), len(part)))
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
