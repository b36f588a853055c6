package cometbft

import "encoding/json"

// MarshalRecord builds the raw record of one height from the "result"
// members of the node's /block and /block_results answers for that height:
//
//	{"block": <result of /block>, "block_results": <result of /block_results>}
//
// Both are embedded byte for byte; they must be valid JSON.
func MarshalRecord(blockResult, blockResultsResult json.RawMessage) []byte {
	out := make([]byte, 0, len(`{"block":,"block_results":}`)+len(blockResult)+len(blockResultsResult))
	out = append(out, `{"block":`...)
	out = append(out, blockResult...)
	out = append(out, `,"block_results":`...)
	out = append(out, blockResultsResult...)
	return append(out, '}')
}
