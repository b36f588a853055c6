package cometbftsynth

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmted25519 "github.com/cometbft/cometbft/crypto/ed25519"
	cmtjson "github.com/cometbft/cometbft/libs/json"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	"github.com/cometbft/cometbft/types"
)

// The synthetic chain's validators and consensus parameters change as a
// real chain's do, and its commits are signed: a chain of trust
// (chain/cometbft/trust) proves it from its genesis (Genesis).
//
// The set has a fixed number of slots (SyntheticConfig.Validators). Every
// ValidatorUpdatesEvery heights one slot's validator changes power; every
// RotateEvery heights (from RotateAt) one slot's validator leaves (power 0)
// and a new one joins in its place, both in one block's updates. Updates of
// height h take effect at h+2, as CometBFT applies them. The block size
// limit changes every ParamsEvery heights (a consensus-parameter update;
// every block carries one, most the same as the last). Keys are ed25519,
// derived from the seed, slot and generation; events and transactions name
// a slot by its first validator's operator address.
const (
	RotateEvery = 500
	RotateAt    = 250
	ParamsEvery = 1000
	basePower   = 1_000_000
	maxGas      = 75_000_000
)

// slotKey is the key of slot i's gen-th validator.
func (s *Synthetic) slotKey(i int, gen uint64) ed25519.PrivateKey {
	seed := s.derive('k', uint64(i)<<40|gen)
	return ed25519.NewKeyFromSeed(seed[:])
}

// member is one validator of a set, in the set's order.
type member struct {
	slot    int
	key     ed25519.PrivateKey
	addr    []byte
	hexAddr string
}

// valSet is the validator set after the updates of heights ≤ at.
type valSet struct {
	at      uint64
	members []member
	bySlot  []int // slot → index in members
	hash    [32]byte
	hexHash string
}

// lastUpdate is the last height ≤ x whose results change the set (0: none).
func lastUpdate(x uint64) uint64 {
	u := x / ValidatorUpdatesEvery * ValidatorUpdatesEvery
	if x >= RotateAt {
		if r := RotateAt + (x-RotateAt)/RotateEvery*RotateEvery; r > u {
			u = r
		}
	}
	return u
}

// latest returns the largest k ≤ top with k ≡ i (mod n) and k ≥ lo, or
// false.
func latest(top uint64, i, n int, lo uint64) (uint64, bool) {
	if top < uint64(i) {
		return 0, false
	}
	k := top - (top-uint64(i))%uint64(n)
	return k, k >= lo
}

// slotState is slot i's generation and power after the updates of heights
// ≤ at.
func (s *Synthetic) slotState(i int, at uint64) (gen uint64, power int64) {
	n := len(s.vals)
	var rot, pow uint64
	if at >= RotateAt {
		if k, ok := latest((at-RotateAt)/RotateEvery, i, n, 0); ok {
			gen = (k-uint64(i))/uint64(n) + 1
			rot = RotateAt + k*RotateEvery
		}
	}
	if m, ok := latest(at/ValidatorUpdatesEvery, i, n, 1); ok {
		pow = m * ValidatorUpdatesEvery
	}
	switch {
	case pow > rot:
		return gen, basePower + int64(pow%997)
	case rot > 0:
		return gen, basePower + int64(rot%997)
	}
	return gen, basePower
}

// setCache keeps the few sets the heights being generated use.
type setCache struct {
	mu   sync.Mutex
	sets [8]*valSet
	next int
}

// setAfter returns the set after the updates of heights ≤ at (at is a
// lastUpdate value).
func (s *Synthetic) setAfter(at uint64) *valSet {
	c := &s.sets
	c.mu.Lock()
	for _, v := range c.sets {
		if v != nil && v.at == at {
			c.mu.Unlock()
			return v
		}
	}
	c.mu.Unlock()
	n := len(s.vals)
	vals := make([]*types.Validator, n)
	keys := make(map[string]member, n)
	for i := range n {
		gen, power := s.slotState(i, at)
		k := s.slotKey(i, gen)
		pk := cmted25519.PubKey(k.Public().(ed25519.PublicKey))
		vals[i] = types.NewValidator(pk, power)
		keys[string(pk.Address())] = member{slot: i, key: k, addr: pk.Address(), hexAddr: strings.ToUpper(hex.EncodeToString(pk.Address()))}
	}
	set := types.NewValidatorSet(vals)
	v := &valSet{at: at, members: make([]member, n), bySlot: make([]int, n)}
	for j, val := range set.Validators {
		m := keys[string(val.Address)]
		v.members[j] = m
		v.bySlot[m.slot] = j
	}
	v.hash = [32]byte(set.Hash())
	v.hexHash = strings.ToUpper(hex.EncodeToString(v.hash[:]))
	c.mu.Lock()
	c.sets[c.next] = v
	c.next = (c.next + 1) % len(c.sets)
	c.mu.Unlock()
	return v
}

// setOf returns the validator set that signs height h (h ≥ 1).
func (s *Synthetic) setOf(h uint64) *valSet {
	if h < 3 {
		return s.setAfter(0)
	}
	return s.setAfter(lastUpdate(h - 2))
}

// maxBytes is the block size limit block h's consensus-parameter update
// sets (h = 0: genesis's).
func maxBytes(h uint64) int64 { return 200_000 + 1_000*int64(h/ParamsEvery%5) }

// consensusHash is the consensus_hash of block h (h ≥ 1): the hash of the
// parameters the update of h-1 set.
func consensusHash(h uint64) [32]byte {
	p := types.ConsensusParams{Block: types.BlockParams{MaxBytes: maxBytes(h - 1), MaxGas: maxGas}}
	return [32]byte(p.Hash())
}

// Genesis returns the chain's genesis.json: its first validators (power
// 1,000,000 each) and consensus parameters, the trust root its chain of
// trust starts from.
func (s *Synthetic) Genesis() []byte {
	params := types.DefaultConsensusParams()
	params.Block = types.BlockParams{MaxBytes: maxBytes(0), MaxGas: maxGas}
	params.Evidence = types.EvidenceParams{MaxAgeNumBlocks: 1_000_000, MaxAgeDuration: 48 * time.Hour, MaxBytes: 50_000}
	params.Validator.PubKeyTypes = []string{types.ABCIPubKeyTypeEd25519}
	doc := types.GenesisDoc{ChainID: s.chainID, GenesisTime: time.Unix(genesisUnix, 0).UTC(), InitialHeight: 1, ConsensusParams: params}
	for i := range s.vals {
		k := s.slotKey(i, 0)
		pk := cmted25519.PubKey(k.Public().(ed25519.PublicKey))
		doc.Validators = append(doc.Validators, types.GenesisValidator{Address: pk.Address(), PubKey: pk, Power: basePower, Name: s.vals[i].operator})
	}
	b, err := cmtjson.MarshalIndent(&doc, "", "  ")
	if err != nil {
		panic(err) // a GenesisDoc of these types always marshals
	}
	return b
}

// GenesisJSON returns Genesis, as a source serves its genesis to the
// chain of trust (chain/cometbft/trust).
func (s *Synthetic) GenesisJSON(context.Context) ([]byte, error) { return s.Genesis(), nil }

// Commit returns what proves block h (h ≥ 1): block h+1's record, whose
// last_commit is h's commit, generated even above the tip (a chain's tip
// block is signed before the next is made).
func (s *Synthetic) Commit(ctx context.Context, h uint64) ([]byte, error) {
	if h < s.first {
		return nil, fmt.Errorf("cometbft: synthetic commit %d: heights start at %d", h, s.first)
	}
	parent, err := s.hashOf(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("cometbft: synthetic commit %d: %w", h, err)
	}
	g := s.gens.Get().(*generator)
	defer s.gens.Put(g)
	rec := g.record(nil, h+1)
	g.finish(rec, parent)
	return rec, nil
}

// sigPlaceholder stands where a signature's base64 (88 characters) goes
// until finish signs the vote.
const sigPlaceholder = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="

// pendingCommit is a last commit rendered with placeholders for its
// signatures: the votes sign the block ID of the height below, known only
// once that block's hash is.
type pendingCommit struct {
	height int64
	round  int32
	parts  [32]byte
	sigs   []pendingSig
}

type pendingSig struct {
	off int // of the placeholder in the record; -1: absent
	ts  int64
	m   *member
}

func (c *pendingCommit) clone() pendingCommit {
	d := *c
	d.sigs = append([]pendingSig(nil), c.sigs...)
	return d
}

// sign signs c's votes for the block whose hash is blockHash, writes the
// signatures into rec and returns the commit's hash (its header's
// last_commit_hash), each with CometBFT's own code (VoteSignBytes,
// Commit.Hash).
func (s *Synthetic) sign(rec []byte, c *pendingCommit, blockHash [32]byte) [32]byte {
	id := types.BlockID{Hash: blockHash[:], PartSetHeader: types.PartSetHeader{Total: 1, Hash: c.parts[:]}}
	commit := types.Commit{Height: c.height, Round: c.round, BlockID: id, Signatures: make([]types.CommitSig, len(c.sigs))}
	vote := cmtproto.Vote{Type: cmtproto.PrecommitType, Height: c.height, Round: c.round, BlockID: id.ToProto()}
	for j, p := range c.sigs {
		if p.off < 0 {
			commit.Signatures[j] = types.NewCommitSigAbsent()
			continue
		}
		vote.Timestamp = time.Unix(0, p.ts).UTC()
		sig := ed25519.Sign(p.m.key, types.VoteSignBytes(s.chainID, &vote))
		base64.StdEncoding.Encode(rec[p.off:p.off+len(sigPlaceholder)], sig)
		commit.Signatures[j] = types.CommitSig{BlockIDFlag: types.BlockIDFlagCommit, ValidatorAddress: p.m.addr, Timestamp: vote.Timestamp, Signature: sig}
	}
	return [32]byte(commit.Hash())
}

// msgResponseBytes are msgResponses decoded: a successful tx's data.
var msgResponseBytes = func() (out [len(msgTypes)][3][]byte) {
	for k := range msgResponses {
		for m, s := range msgResponses[k] {
			out[k][m], _ = base64.StdEncoding.DecodeString(s)
		}
	}
	return out
}()

// contentResultsHash is the hash CometBFT makes of the results of a block
// of this content (types.NewResults: code, data, gas wanted and used of
// each tx), the next header's last_results_hash.
func contentResultsHash(content []txContent) [32]byte {
	res := make([]*abci.ExecTxResult, len(content))
	for i := range content {
		c := &content[i]
		r := &abci.ExecTxResult{GasWanted: int64(c.gasWanted), GasUsed: int64(c.gasUsed)}
		if c.plan.failed {
			r.Code = c.failCode
		} else {
			r.Data = msgResponseBytes[c.plan.kind][c.plan.msgs-1]
		}
		res[i] = r
	}
	return [32]byte(types.NewResults(res).Hash())
}

// resultsCache keeps the results hashes of the heights last generated:
// block h's header needs h-1's, which a span generating in order has just
// made.
type resultsCache struct {
	mu      sync.Mutex
	heights [1024]uint64
	hashes  [1024][32]byte
}

func (c *resultsCache) put(h uint64, sum [32]byte) {
	c.mu.Lock()
	c.heights[h%1024], c.hashes[h%1024] = h, sum
	c.mu.Unlock()
}

func (c *resultsCache) get(h uint64) ([32]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heights[h%1024] == h {
		return c.hashes[h%1024], true
	}
	return [32]byte{}, false
}

// resultsHash returns the hash of block h's results (h ≥ 1), drawing its
// content again when the cache does not hold it.
func (s *Synthetic) resultsHash(h uint64) [32]byte {
	if sum, ok := s.results.get(h); ok {
		return sum
	}
	g := s.gens.Get().(*generator)
	defer s.gens.Put(g)
	s.plan(h, &g.plan)
	g.r = newRNG(s.seed, h, streamContent)
	g.drawContent()
	sum := contentResultsHash(g.content)
	s.results.put(h, sum)
	return sum
}
