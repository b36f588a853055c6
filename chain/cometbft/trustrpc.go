package cometbft

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// What the chain of trust (chain/cometbft/trust) asks of a node besides
// the records: the commit of the last height of a range (its successor is
// not there yet), the genesis it starts from, and, for a trust root at a
// header, the validators and consensus parameters of a height.

// Commit returns the node's /commit answer for height h: its signed
// header (the header and the commit that signed it).
func (s *RPCSource) Commit(ctx context.Context, h uint64) ([]byte, error) {
	var res json.RawMessage
	if err := s.c.Call(ctx, "commit", heightParams(h), &res); err != nil {
		return nil, callError("commit", h, err)
	}
	return res, nil
}

func heightParams(h uint64) json.RawMessage {
	return json.RawMessage(`{"height":"` + strconv.FormatUint(h, 10) + `"}`)
}

// GenesisJSON returns the node's genesis document: /genesis, or, for a
// genesis too large for it, the chunks of /genesis_chunked put together.
func (s *RPCSource) GenesisJSON(ctx context.Context) ([]byte, error) {
	var res struct {
		Genesis json.RawMessage `json:"genesis"`
	}
	err := s.c.Call(ctx, "genesis", noRPCParams, &res)
	if err == nil && len(res.Genesis) > 0 {
		return res.Genesis, nil
	}
	var out []byte
	for chunk, total := 0, 1; chunk < total; chunk++ {
		var c struct {
			Chunk string `json:"chunk"`
			Total string `json:"total"`
			Data  string `json:"data"`
		}
		if cerr := s.c.Call(ctx, "genesis_chunked", json.RawMessage(`{"chunk":"`+strconv.Itoa(chunk)+`"}`), &c); cerr != nil {
			if err != nil {
				return nil, fmt.Errorf("cometbft: genesis: %w (and genesis_chunked: %v)", err, cerr)
			}
			return nil, fmt.Errorf("cometbft: genesis_chunked: %w", cerr)
		}
		n, perr := strconv.Atoi(c.Total)
		if perr != nil || n < 1 || n > 1<<16 {
			return nil, &BadResponseError{Via: s.via, Method: "genesis_chunked", Reason: fmt.Sprintf("total %q", c.Total)}
		}
		total = n
		b, derr := base64.StdEncoding.DecodeString(c.Data)
		if derr != nil {
			return nil, &BadResponseError{Via: s.via, Method: "genesis_chunked", Reason: "data is not base64"}
		}
		out = append(out, b...)
	}
	return out, nil
}

// ValidatorsJSON returns the /validators answers of height h, every page
// of them (CometBFT serves at most 100 a page).
func (s *RPCSource) ValidatorsJSON(ctx context.Context, h uint64) ([][]byte, error) {
	var pages [][]byte
	for page, seen := 1, 0; ; page++ {
		var res json.RawMessage
		p := json.RawMessage(`{"height":"` + strconv.FormatUint(h, 10) + `","page":"` + strconv.Itoa(page) + `","per_page":"100"}`)
		if err := s.c.Call(ctx, "validators", p, &res); err != nil {
			return nil, callError("validators", h, err)
		}
		var v struct {
			Validators []json.RawMessage `json:"validators"`
			Total      string            `json:"total"`
		}
		if err := json.Unmarshal(res, &v); err != nil {
			return nil, &BadResponseError{Via: s.via, Method: "validators", Height: h, Reason: err.Error()}
		}
		pages = append(pages, res)
		seen += len(v.Validators)
		total, err := strconv.Atoi(v.Total)
		if err != nil || len(v.Validators) == 0 || seen >= total || page >= 1000 {
			return pages, nil
		}
	}
}

// ConsensusParamsJSON returns the /consensus_params answer of height h.
func (s *RPCSource) ConsensusParamsJSON(ctx context.Context, h uint64) ([]byte, error) {
	var res json.RawMessage
	if err := s.c.Call(ctx, "consensus_params", heightParams(h), &res); err != nil {
		return nil, callError("consensus_params", h, err)
	}
	return res, nil
}

// Via is the source's redacted endpoints, for a chain of trust's errors.
func (s *RPCSource) Via() string { return s.via }
