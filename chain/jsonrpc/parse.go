package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
)

// parseSingle reads the response to a single call with id and, when the
// node answered, sets the call's Result or Err.
func parseSingle(ep *endpoint, b []byte, call *Call, id uint64) outcome {
	var resp response
	if firstByte(b) != '{' {
		return badResponse(ep, errors.New("not a JSON-RPC response object"))
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return badResponse(ep, err)
	}
	if resp.Error != nil {
		resp.Error.Endpoint = ep.name
		if resp.Error.Retryable() {
			return outcome{kind: kindThrottle, label: OutcomeThrottled, err: resp.Error}
		}
		call.Err, call.answered = resp.Error, true
		return outcome{kind: kindOK, label: OutcomeRPCError}
	}
	if got, ok := parseID(resp.ID); !ok || got != id {
		return badResponse(ep, fmt.Errorf("response id %s does not match request id %d", truncate(resp.ID), id))
	}
	call.answered = true
	if err := decodeResult(resp.Result, call.Result); err != nil {
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
		var one response
		if err := json.Unmarshal(b, &one); err != nil {
			return part, badResponse(ep, err)
		}
		if e := one.Error; e != nil {
			e.Endpoint = ep.name
			switch {
			case e.Retryable():
				return part, outcome{kind: kindThrottle, label: OutcomeThrottled, err: e}
			case isBatchTooLarge(e.Message):
				return part, outcome{kind: kindTooLarge, label: OutcomeTooLarge, err: e}
			}
			return part, outcome{kind: kindRefused, label: OutcomeBatchRefused, err: e}
		}
		return part, outcome{kind: kindRefused, label: OutcomeBatchRefused,
			err: &TransportError{Endpoint: ep.name, Op: "decode response", Err: errors.New("object in response to a batch")}}
	default:
		return part, badResponse(ep, errors.New("not a JSON-RPC response"))
	}
	var resps []response
	if err := json.Unmarshal(b, &resps); err != nil {
		return part, badResponse(ep, err)
	}
	n := uint64(len(part))
	answered := make([]bool, len(part))
	var throttled, tooLarge, refused *RPCError
	for _, r := range resps {
		if e := r.Error; e != nil {
			e.Endpoint = ep.name
			// Errors about the batch as a whole may carry any id, or none.
			switch {
			case isBatchTooLarge(e.Message):
				tooLarge = e
				continue
			case isBatchRefused(e.Message):
				refused = e
				continue
			case e.Retryable():
				throttled = e
				continue
			}
		}
		id, ok := parseID(r.ID)
		if !ok || id < base || id-base >= n || answered[id-base] {
			continue // not ours, or a duplicate: the first answer stands
		}
		i := id - base
		answered[i] = true
		call := part[i].call
		call.answered = true
		if r.Error != nil {
			call.Err = r.Error
		} else if err := decodeResult(r.Result, call.Result); err != nil {
			call.Err = fmt.Errorf("jsonrpc: decode %s result from %s: %w", call.Method, ep.name, err)
		}
	}
	var rest []request
	for i, r := range part {
		if !answered[i] {
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
