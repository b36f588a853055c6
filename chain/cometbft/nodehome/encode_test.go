package nodehome

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cometbft/cometbft/crypto/ed25519"
	cmtjson "github.com/cometbft/cometbft/libs/json"
	cmtcrypto "github.com/cometbft/cometbft/proto/tendermint/crypto"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	cmtversion "github.com/cometbft/cometbft/proto/tendermint/version"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/cometbft/cometbft/types"

	"github.com/blockhaul/blockhaul/internal/nodefixture"
)

// The hand-written encoders of encode.go are held to libs/json, the
// encoder of the node's RPC, which stays the reference here: over every
// height of the recorded homes (where the hand-written path must be the
// one taken), over generated values, and by FuzzEncoders.

// TestEncodersEqualLibsJSONOnFixtures: for every height of each recorded
// home, the hand-written encoders write what libs/json writes, and write
// it themselves (no fallback).
func TestEncodersEqualLibsJSONOnFixtures(t *testing.T) {
	for _, name := range []string{"home-0.38", "home-0.37", "home-0.37-0.38", "home-0.34"} {
		t.Run(name, func(t *testing.T) {
			fx := nodefixture.Load(t, name)
			src := openHome(t, fx.Unpack(t))
			r, err := src.openReads()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			events := 0
			for h := uint64(1); h <= fx.Tip(); h++ {
				block, err := src.loadBlock(r, h)
				if err != nil {
					t.Fatal(err)
				}
				results, err := src.loadResults(r, h)
				if err != nil {
					t.Fatal(err)
				}
				got, ok := appendBlockResult(nil, block.BlockID, block.Block)
				if !ok {
					t.Fatalf("height %d: the block was left to libs/json", h)
				}
				equalLibsJSON(t, h, got, block)
				switch r := results.(type) {
				case *ctypes.ResultBlockResults:
					got, ok = appendBlockResults(nil, r)
					for _, tx := range r.TxsResults {
						events += len(tx.Events)
					}
				case *resultBlockResults037:
					got, ok = appendLegacyResults(nil, r, src.BytesAttributes())
					for _, tx := range r.TxsResults {
						events += len(tx.Events)
					}
					if src.BytesAttributes() {
						// libs/json writes 0.34's attributes from their base64
						// text (no attribute of the fixture is empty).
						base64Attributes(r)
					}
				default:
					t.Fatalf("height %d: results of type %T", h, results)
				}
				if !ok {
					t.Fatalf("height %d: the results were left to libs/json", h)
				}
				equalLibsJSON(t, h, got, results)
			}
			if events < int(fx.Tip()) {
				t.Fatalf("only %d tx events in %d heights: the fixture does not exercise the encoders", events, fx.Tip())
			}
		})
	}
}

func equalLibsJSON(t *testing.T, h uint64, got []byte, v any) {
	t.Helper()
	want, err := cmtjson.Marshal(v)
	if err != nil {
		t.Fatalf("height %d: libs/json: %v", h, err)
	}
	if !bytes.Equal(got, want) {
		i := firstDiff(got, want)
		t.Fatalf("height %d (%T): differs from libs/json at byte %d:\nhand:      %s\nlibs/json: %s", h, v, i, around(got, i), around(want, i))
	}
}

// TestEncodersEqualLibsJSONGenerated holds the encoders to libs/json on
// generated blocks and results: strings with everything encoding/json
// escapes (quotes, control characters, <>&, U+2028, invalid UTF-8), nil
// and empty lists and bytes, zero and extreme numbers, times with a
// monotonic reading, in other zones, and out of years 0-9999, omitempty
// fields left zero. What they leave to libs/json (evidence, validator and
// consensus parameter updates, unencodable times) must be exactly that.
func TestEncodersEqualLibsJSONGenerated(t *testing.T) {
	g := &gen{r: rand.New(rand.NewPCG(22, 1))}
	written := 0
	for i := range 3000 {
		block, expectFallback := g.block()
		got, ok := appendBlockResult(nil, block.BlockID, block.Block)
		written += checkGenerated(t, i, "block", got, ok, expectFallback, block)

		res, expectFallback := g.results()
		got, ok = appendBlockResults(nil, res)
		written += checkGenerated(t, i, "results", got, ok, expectFallback, res)

		legacy := &resultBlockResults037{Height: res.Height, TxsResults: res.TxsResults,
			BeginBlockEvents: g.events(), EndBlockEvents: res.FinalizeBlockEvents,
			ValidatorUpdates: res.ValidatorUpdates, ConsensusParamUpdates: res.ConsensusParamUpdates}
		got, ok = appendLegacyResults(nil, legacy, false)
		written += checkGenerated(t, i, "legacy results", got, ok, expectFallback, legacy)

		// A 0.34 node's attributes: libs/json writes the base64 text the
		// same (an empty one, which 0.34 writes as null, is left out here).
		if !emptyAttribute(legacy) {
			got, ok = appendLegacyResults(nil, legacy, true)
			base64Attributes(legacy)
			checkGenerated(t, i, "0.34 results", got, ok, expectFallback, legacy)
		}
	}
	// Most values are the encoders' own, not left to libs/json.
	if written < 3*3000/2 {
		t.Fatalf("only %d of %d values written by hand", written, 3*3000)
	}
}

func checkGenerated(t *testing.T, i int, what string, got []byte, ok, expectFallback bool, v any) int {
	t.Helper()
	if ok == expectFallback {
		t.Fatalf("value %d (%s): written by hand %v, want %v", i, what, ok, !expectFallback)
	}
	if !ok {
		return 0
	}
	want, err := cmtjson.Marshal(v)
	if err != nil {
		t.Fatalf("value %d (%s): libs/json failed on a value written by hand: %v", i, what, err)
	}
	if !bytes.Equal(got, want) {
		j := firstDiff(got, want)
		t.Fatalf("value %d (%s): differs from libs/json at byte %d:\nhand:      %s\nlibs/json: %s", i, what, j, around(got, j), around(want, j))
	}
	return 1
}

func emptyAttribute(r *resultBlockResults037) bool {
	empty := func(events []abci.Event) bool {
		for _, ev := range events {
			for _, a := range ev.Attributes {
				if a.Key == "" || a.Value == "" {
					return true
				}
			}
		}
		return false
	}
	for _, tx := range r.TxsResults {
		if tx != nil && empty(tx.Events) {
			return true
		}
	}
	return empty(r.BeginBlockEvents) || empty(r.EndBlockEvents)
}

// TestBytesAttributeEmptyIsNull: a 0.34 node's empty attribute key or
// value (a bytes field proto3 did not store) is written as null.
func TestBytesAttributeEmptyIsNull(t *testing.T) {
	r := &resultBlockResults037{Height: 5, EndBlockEvents: []abci.Event{{Type: "t",
		Attributes: []abci.EventAttribute{{Key: "k", Value: ""}, {Key: "", Value: "v<", Index: true}}}}}
	got, ok := appendLegacyResults(nil, r, true)
	want := `{"height":"5","txs_results":null,"begin_block_events":null,"end_block_events":[{"type":"t","attributes":[` +
		`{"key":"aw==","value":null,"index":false},{"key":null,"value":"djw=","index":true}]}],` +
		`"validator_updates":null,"consensus_param_updates":null}`
	if !ok || string(got) != want {
		t.Fatalf("got %s (%v), want %s", got, ok, want)
	}
}

// FuzzEncoders: a transaction result and events made of the fuzzer's
// strings, bytes and numbers are written as libs/json writes them.
func FuzzEncoders(f *testing.F) {
	f.Add("transfer", "sender", "cosmos1<&>\"\\\x00\u2028é", []byte{0, 1, 2}, int64(-1), uint32(7), true)
	f.Add("", "", "\xff\xfe invalid", []byte(nil), int64(math.MinInt64), uint32(0), false)
	f.Add("a\tb", "k\n", "\u2029\u007f", []byte{}, int64(math.MaxInt64), uint32(math.MaxUint32), true)
	f.Fuzz(func(t *testing.T, typ, key, value string, data []byte, n int64, code uint32, index bool) {
		attrs := []abci.EventAttribute{{Key: key, Value: value, Index: index}, {Key: value, Value: key}}
		events := []abci.Event{{Type: typ, Attributes: attrs}, {Type: value}, {Attributes: attrs[:0]}}
		res := &ctypes.ResultBlockResults{
			Height: n,
			TxsResults: []*abci.ExecTxResult{{Code: code, Data: data, Log: value, Info: key, GasWanted: n,
				GasUsed: -n, Events: events, Codespace: typ}, nil, {}},
			FinalizeBlockEvents: events,
			AppHash:             data,
		}
		got, ok := appendBlockResults(nil, res)
		if !ok {
			t.Fatal("results left to libs/json")
		}
		want, err := cmtjson.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("differs from libs/json:\nhand:      %s\nlibs/json: %s", got, want)
		}
	})
}

// gen makes random values of the types the encoders write.
type gen struct{ r *rand.Rand }

func (g *gen) chance(n int) bool { return g.r.IntN(n) == 0 }

// str is a short string, sometimes with runes encoding/json escapes.
func (g *gen) str() string {
	const plain = "abcXYZ019 _-./:=+"
	pieces := []string{"\"", "\\", "<", ">", "&", "\x00", "\x1f", "\n", "\t", "\u007f", "é", "世界",
		"\u2028", "\u2029", "\xff", "\xc3", "\U0001F600", "\ufffd"}
	var sb strings.Builder
	for range g.r.IntN(12) {
		if g.chance(8) {
			sb.WriteString(pieces[g.r.IntN(len(pieces))])
		} else {
			sb.WriteByte(plain[g.r.IntN(len(plain))])
		}
	}
	return sb.String()
}

// bytes is nil, empty, or random bytes of up to n.
func (g *gen) bytes(n int) []byte {
	switch g.r.IntN(6) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, 1+g.r.IntN(n))
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

func (g *gen) int64() int64 {
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return math.MaxInt64
	case 2:
		return math.MinInt64
	case 3:
		return -g.r.Int64N(1000)
	}
	return g.r.Int64N(1 << uint(1+g.r.IntN(62)))
}

// time is a time, and whether libs/json cannot write it (time.Time's
// MarshalJSON refuses a year outside 0-9999, in UTC).
func (g *gen) time() (t time.Time, unwritable bool) {
	switch g.r.IntN(40) {
	case 0:
		return time.Time{}, false
	case 1:
		return time.Now(), false // with a monotonic reading
	case 2:
		return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), true
	case 3:
		return time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), true
	case 4:
		return time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", -3600)), true // year 10000 in UTC
	case 5:
		return time.Date(1, 1, 1, 0, 30, 0, 0, time.FixedZone("y", 3600)), false // year 0 in UTC
	}
	t = time.Unix(g.r.Int64N(4e9), 0).UTC()
	switch g.r.IntN(4) {
	case 0:
	case 1:
		t = t.Add(time.Duration(g.r.IntN(1000)) * time.Millisecond)
	default:
		t = t.Add(time.Duration(g.r.IntN(1e9)))
	}
	if g.chance(5) {
		t = t.In(time.FixedZone("z", 5*3600+1800))
	}
	return t, false
}

func (g *gen) blockID() types.BlockID {
	return types.BlockID{Hash: g.bytes(32), PartSetHeader: types.PartSetHeader{Total: g.r.Uint32() >> uint(g.r.IntN(32)), Hash: g.bytes(32)}}
}

func (g *gen) block() (r *ctypes.ResultBlock, fallback bool) {
	r = &ctypes.ResultBlock{BlockID: g.blockID()}
	if g.chance(50) {
		return r, false // a nil block
	}
	hdrTime, fallback := g.time()
	b := &types.Block{Header: types.Header{
		Version:            cmtversion.Consensus{Block: uint64(g.r.IntN(3)) * 11, App: uint64(g.r.IntN(3))},
		ChainID:            g.str(),
		Height:             g.int64(),
		Time:               hdrTime,
		LastBlockID:        g.blockID(),
		LastCommitHash:     g.bytes(32),
		DataHash:           g.bytes(32),
		ValidatorsHash:     g.bytes(32),
		NextValidatorsHash: g.bytes(32),
		ConsensusHash:      g.bytes(32),
		AppHash:            g.bytes(40),
		LastResultsHash:    g.bytes(32),
		EvidenceHash:       g.bytes(32),
		ProposerAddress:    g.bytes(20),
	}}
	if !g.chance(8) {
		b.Data.Txs = types.Txs{}
		for range g.r.IntN(5) {
			b.Data.Txs = append(b.Data.Txs, g.bytes(200))
		}
	}
	switch g.r.IntN(10) {
	case 0:
	case 1:
		b.Evidence.Evidence = types.EvidenceList{g.evidence()}
		fallback = true
	default:
		b.Evidence.Evidence = types.EvidenceList{}
	}
	if !g.chance(10) {
		c := &types.Commit{Height: g.int64(), Round: int32(g.r.Uint32()), BlockID: g.blockID()}
		if !g.chance(10) {
			c.Signatures = []types.CommitSig{}
			for range g.r.IntN(4) {
				ts, unwritable := g.time()
				fallback = fallback || unwritable
				c.Signatures = append(c.Signatures, types.CommitSig{
					BlockIDFlag: types.BlockIDFlag(g.r.IntN(4)), ValidatorAddress: g.bytes(20),
					Timestamp: ts, Signature: g.bytes(64)})
			}
		}
		b.LastCommit = c
	}
	r.Block = b
	return r, fallback
}

func (g *gen) evidence() types.Evidence {
	vote := func() *types.Vote {
		return &types.Vote{Type: cmtproto.PrecommitType, Height: 3, BlockID: g.blockID(),
			Timestamp: time.Unix(1, 0).UTC(), ValidatorAddress: ed25519.GenPrivKey().PubKey().Address(), Signature: g.bytes(64)}
	}
	return &types.DuplicateVoteEvidence{VoteA: vote(), VoteB: vote(), TotalVotingPower: 10, ValidatorPower: 5,
		Timestamp: time.Unix(2, 0).UTC()}
}

func (g *gen) attributes() []abci.EventAttribute {
	if g.chance(6) {
		return nil
	}
	attrs := []abci.EventAttribute{}
	for range g.r.IntN(4) {
		attrs = append(attrs, abci.EventAttribute{Key: g.str(), Value: g.str(), Index: g.chance(2)})
	}
	return attrs
}

func (g *gen) events() []abci.Event {
	if g.chance(4) {
		return nil
	}
	events := []abci.Event{}
	for range g.r.IntN(4) {
		ev := abci.Event{Attributes: g.attributes()}
		if !g.chance(5) {
			ev.Type = g.str()
		}
		events = append(events, ev)
	}
	return events
}

func (g *gen) results() (r *ctypes.ResultBlockResults, fallback bool) {
	r = &ctypes.ResultBlockResults{Height: g.int64(), FinalizeBlockEvents: g.events(), AppHash: g.bytes(32)}
	if !g.chance(4) {
		r.TxsResults = []*abci.ExecTxResult{}
		for range g.r.IntN(5) {
			if g.chance(10) {
				r.TxsResults = append(r.TxsResults, nil)
				continue
			}
			r.TxsResults = append(r.TxsResults, &abci.ExecTxResult{
				Code: g.r.Uint32() >> uint(g.r.IntN(32)), Data: g.bytes(40), Log: g.str(), Info: g.str(),
				GasWanted: g.int64(), GasUsed: g.int64(), Events: g.events(), Codespace: g.str()})
		}
	}
	switch g.r.IntN(12) {
	case 0:
		r.ValidatorUpdates = []abci.ValidatorUpdate{{
			PubKey: cmtcrypto.PublicKey{Sum: &cmtcrypto.PublicKey_Ed25519{Ed25519: g.bytes(32)}}, Power: 10}}
		fallback = true
	case 1:
		r.ValidatorUpdates = []abci.ValidatorUpdate{}
	}
	if g.chance(12) {
		r.ConsensusParamUpdates = &cmtproto.ConsensusParams{Block: &cmtproto.BlockParams{MaxBytes: 100, MaxGas: -1}}
		fallback = true
	}
	return r, fallback
}
