package trust

import (
	"bytes"
	"errors"
	"fmt"

	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	"github.com/cometbft/cometbft/types"
)

// Mode is how many commits the chain of trust checks the signatures of.
type Mode int

const (
	// Changes checks the commit of every height whose header names a next
	// validator set other than its own (the last height each set signs
	// alone) and of the last height of every batch; the headers between
	// are authenticated by the hash links from the next checked one (see
	// docs/trust.md for why that is sound). The default.
	Changes Mode = iota
	// Every checks the commit of every height.
	Every
	// Off proves nothing: records are checked against their own header and
	// linked by hash only, as before the chain of trust.
	Off
)

// ParseMode reads a --trust value: changes, every or off.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "changes":
		return Changes, nil
	case "every":
		return Every, nil
	case "off":
		return Off, nil
	}
	return 0, fmt.Errorf("unknown trust mode %q (want changes, every or off)", s)
}

func (m Mode) String() string {
	switch m {
	case Every:
		return "every"
	case Off:
		return "off"
	}
	return "changes"
}

// Chain is a chain of trust over one CometBFT chain's records, taken in
// height order: the tracked state after the last height it proved — the
// validator sets that sign the next two heights, the consensus parameters
// of the next, what the next header's last_results_hash must be, the block
// ID it must name as its parent — and the root it started from.
//
// A Chain is not safe for concurrent use. Prove is all or nothing: a
// failure leaves the Chain as it was.
type Chain struct {
	Mode Mode
	st   State
	// root is the state the chain started from at its root, kept in
	// every checkpoint so that a verify proves the store again from it;
	// proof is what proved the last height (Prove's successor).
	root  State
	proof []byte
	// paramsRaw and params are the last consensus-param update parsed, to
	// reuse for the next that is written the same.
	paramsRaw []byte
	params    *cmtproto.ConsensusParams
	// Signatures counts the commit signatures checked (a commit's check
	// stops at more than 2/3 of the power), Commits the commits.
	Signatures, Commits int64
}

// State is the tracked state of a chain of trust after height Height: what
// a checkpoint keeps (Marshal).
type State struct {
	ChainID string
	Root    Root
	// Height is the last height proven; Root.Height-1 before any.
	Height int64
	// LastBlockID is the block ID of Height (zero before the first height
	// of a genesis root).
	LastBlockID types.BlockID
	// Vals signs Height+1, NextVals Height+2.
	Vals, NextVals *types.ValidatorSet
	// Params are the consensus parameters of Height+1.
	Params types.ConsensusParams
	// LastResultsHash is the last_results_hash Height+1's header must
	// carry; nil when not known (the first height above a height root).
	LastResultsHash []byte
	// valsHash and nextHash are Vals' and NextVals' hashes, once computed:
	// a set is not changed once built (advance makes a new one), and
	// hashing a set of 100 costs more than the rest of a header's checks.
	valsHash, nextHash []byte
}

func (st *State) hashes() (vals, next []byte) {
	if st.valsHash == nil {
		st.valsHash = st.Vals.Hash()
	}
	if st.nextHash == nil {
		st.nextHash = st.NextVals.Hash()
	}
	return st.valsHash, st.nextHash
}

// Root is where a chain of trust starts.
type Root struct {
	// Kind is "genesis" (the chain's genesis validators and parameters) or
	// "header" (a header the user trusts, by height and hash).
	Kind string
	// Height is the root's height: the genesis's initial height, or the
	// trusted header's.
	Height int64
	// Hash is the trusted header's hash (Kind "header").
	Hash []byte
}

func (r Root) String() string {
	if r.Kind == "header" {
		return fmt.Sprintf("the trusted header %d (%X)", r.Height, r.Hash)
	}
	return "genesis"
}

// New starts a chain of trust from st (a root's state, or a checkpoint's).
func New(st State, mode Mode) *Chain {
	return &Chain{Mode: mode, st: st, root: st}
}

// Root is the state the chain started from at its root.
func (c *Chain) Root() State { return c.root }

// Proof is what proved the last height: the next height's record, or a
// node's /commit answer.
func (c *Chain) Proof() []byte { return c.proof }

// State returns the tracked state after the last proven height.
func (c *Chain) State() State { return c.st }

// Next is the height Prove takes next.
func (c *Chain) Next() uint64 { return uint64(c.st.Height + 1) }

// Checkpoint encodes the state after the last proven height, the root
// state and the last height's proof, for staging to keep (OpenCheckpoint
// reads it).
func (c *Chain) Checkpoint() ([]byte, error) { return marshalCheckpoint(c) }

// Proven is the last height proven and the root it was proven from.
func (c *Chain) Proven() (int64, Root) { return c.st.Height, c.st.Root }

// Prove checks raw records of heights Next().. in order, and the commit of
// the last of them, which successor carries: the raw record of the height
// after them (its last_commit), or a node's /commit answer for the last
// height. Each header must name the tracked validator sets, consensus
// parameters and last results hash, and link to the header before it; the
// commits the mode selects must carry more than 2/3 of the signing set's
// power (CometBFT's VerifyCommitLight). On success the chain moves past the
// last record; on failure it is left as it was and the error is a
// *MismatchError naming the height and field, or wraps ErrMalformed or
// ErrKeyType.
func (c *Chain) Prove(records [][]byte, successor []byte) error {
	if len(records) == 0 {
		return nil
	}
	if c.Mode == Off {
		return errors.New("trust: Prove with mode off")
	}
	st := c.st // its sets are not changed in place: advance makes new ones
	var sigs, commits int64
	// prevVals signs the previous record; prevHeader is it; needCommit
	// says its commit must be checked.
	var prevVals *types.ValidatorSet
	var prevHeader *types.Header
	var needCommit bool
	paramsRaw, params := c.paramsRaw, c.params
	for i, raw := range records {
		rec, err := ParseRecord(raw)
		if err != nil {
			return fmt.Errorf("trust: block %d: %w", st.Height+1, err)
		}
		h := &rec.Header
		if err := st.checkHeader(h); err != nil {
			return err
		}
		if i > 0 {
			commit, err := rec.Commit()
			if err != nil {
				return fmt.Errorf("trust: block %d: %w", h.Height, err)
			}
			if err := checkCommitHash(h, commit); err != nil {
				return err
			}
			if needCommit || c.Mode == Every {
				n, err := verifyCommit(st.ChainID, prevVals, prevHeader, h.LastBlockID, commit)
				if err != nil {
					return err
				}
				sigs += n
				commits++
			}
		}
		if err := rec.parseParams(paramsRaw, params); err != nil {
			return fmt.Errorf("trust: block %d: %w", h.Height, err)
		}
		if rec.paramsRaw != nil {
			paramsRaw, params = rec.paramsRaw, rec.ParamUpdates
		}
		prevVals, prevHeader = st.Vals, h
		needCommit = !bytes.Equal(h.ValidatorsHash, h.NextValidatorsHash)
		if err := st.advance(rec); err != nil {
			return err
		}
	}
	// The last record's commit, always checked: it authenticates every
	// header above the last commit checked before it.
	commit, err := successorCommit(successor, prevHeader)
	if err != nil {
		return err
	}
	n, err := verifyCommit(st.ChainID, prevVals, prevHeader, commit.BlockID, commit)
	if err != nil {
		return err
	}
	sigs += n
	commits++
	c.st = st
	c.proof = successor
	c.paramsRaw, c.params = paramsRaw, params
	c.Signatures += sigs
	c.Commits += commits
	return nil
}

// checkHeader checks h against the tracked state: its height, chain, the
// block it names as its parent and the four hashes of the tracked state.
func (st *State) checkHeader(h *types.Header) error {
	want := st.Height + 1
	if h.Height != want {
		return &MismatchError{Height: want, Field: "header.height", Got: fmt.Appendf(nil, "%d", h.Height), Want: fmt.Appendf(nil, "%d", want), text: true}
	}
	if h.ChainID != st.ChainID {
		return &MismatchError{Height: want, Field: "header.chain_id", Got: []byte(h.ChainID), Want: []byte(st.ChainID), text: true}
	}
	if st.Root.Kind == "header" && want == st.Root.Height {
		// The trusted header itself: its hash is the root.
		if got := h.Hash(); !bytes.Equal(got, st.Root.Hash) {
			return &MismatchError{Height: want, Field: "block hash (the trust root)", Got: got, Want: st.Root.Hash}
		}
	} else if st.LastBlockID.Hash != nil {
		if !bytes.Equal(h.LastBlockID.Hash, st.LastBlockID.Hash) {
			return &MismatchError{Height: want, Field: "header.last_block_id.hash", Got: h.LastBlockID.Hash, Want: st.LastBlockID.Hash}
		}
	}
	note := ""
	if st.Root.Kind == "header" && want == st.Root.Height {
		note = "the second value is the hash of the validators the node served for the trust root (/validators)"
	}
	valsHash, nextHash := st.hashes()
	if got, w := h.ValidatorsHash, valsHash; !bytes.Equal(got, w) {
		return &MismatchError{Height: want, Field: "header.validators_hash", Got: got, Want: w, Note: note}
	}
	if got, w := h.NextValidatorsHash, nextHash; !bytes.Equal(got, w) {
		return &MismatchError{Height: want, Field: "header.next_validators_hash", Got: got, Want: w, Note: note}
	}
	if got, w := h.ConsensusHash, st.Params.Hash(); !bytes.Equal(got, w) {
		return &MismatchError{Height: want, Field: "header.consensus_hash", Got: got, Want: w}
	}
	if st.LastResultsHash != nil && !bytes.Equal(h.LastResultsHash, st.LastResultsHash) {
		return &MismatchError{Height: want, Field: "header.last_results_hash", Got: h.LastResultsHash, Want: st.LastResultsHash,
			Note: fmt.Sprintf("the results of block %d hash to the second value", want-1)}
	}
	return nil
}

// advance applies rec (whose header checkHeader passed) to the state, as
// CometBFT's state/execution.go updateState does: the next set becomes the
// current one, the updates apply to the one after, the parameter updates
// to the next height's parameters.
func (st *State) advance(rec *Record) error {
	h := &rec.Header
	if rec.valUpdateErr != nil {
		return fmt.Errorf("trust: block %d: block_results.%w", h.Height, rec.valUpdateErr)
	}
	next, nextHash := st.NextVals, st.nextHash
	if len(rec.ValUpdates) > 0 {
		next = st.NextVals.Copy()
		if err := next.UpdateWithChangeSet(rec.ValUpdates); err != nil {
			return &MismatchError{Height: h.Height, Field: "block_results.validator_updates",
				Note: fmt.Sprintf("the updates do not apply to the tracked validator set: %v", err)}
		}
		nextHash = nil
	}
	if rec.ParamUpdates != nil {
		if err := st.Params.ValidateUpdate(rec.ParamUpdates, h.Height); err != nil {
			return &MismatchError{Height: h.Height, Field: "block_results.consensus_param_updates",
				Note: fmt.Sprintf("the update is not one CometBFT accepts: %v", err)}
		}
		st.Params = st.Params.Update(rec.ParamUpdates)
	}
	st.Vals, st.NextVals = st.NextVals, next
	st.valsHash, st.nextHash = st.nextHash, nextHash
	st.LastResultsHash = types.NewResults(rec.TxResults).Hash()
	st.LastBlockID = types.BlockID{Hash: h.Hash()}
	st.Height = h.Height
	return nil
}

// checkCommitHash checks that the commit a record carries is the one its
// header commits to (last_commit_hash) and names the block its header
// names as its parent.
func checkCommitHash(h *types.Header, commit *types.Commit) error {
	if got := commit.Hash(); !bytes.Equal(got, h.LastCommitHash) {
		return &MismatchError{Height: h.Height, Field: "header.last_commit_hash", Got: h.LastCommitHash, Want: got,
			Note: "the second value is the hash of the block's last_commit"}
	}
	if !commit.BlockID.Equals(h.LastBlockID) {
		return &MismatchError{Height: h.Height, Field: "block.last_commit.block_id", Got: commit.BlockID.Hash, Want: h.LastBlockID.Hash,
			Note: "the commit is not of the block the header names as its parent"}
	}
	return nil
}

// verifyCommit checks that more than 2/3 of vals' power signed header's
// block, whose full ID (with its part set header, which only a child or
// commit names) is id.
func verifyCommit(chainID string, vals *types.ValidatorSet, header *types.Header, id types.BlockID, commit *types.Commit) (int64, error) {
	hash := header.Hash()
	if !bytes.Equal(id.Hash, hash) {
		return 0, &MismatchError{Height: header.Height, Field: "commit block_id.hash", Got: id.Hash, Want: hash,
			Note: "the commit is not of this block"}
	}
	if err := vals.VerifyCommitLight(chainID, id, header.Height, commit); err != nil {
		return 0, &MismatchError{Height: header.Height, Field: "commit signatures", Note: fmt.Sprintf(
			"not signed by more than 2/3 of the power of validator set %X: %v", vals.Hash(), err)}
	}
	// VerifyCommitLight stops once more than 2/3 of the power signed:
	// count what it checked as it does.
	need, got, n := vals.TotalVotingPower()*2/3, int64(0), int64(0)
	for i, s := range commit.Signatures {
		if s.BlockIDFlag != types.BlockIDFlagCommit {
			continue
		}
		n++
		got += vals.Validators[i].VotingPower
		if got > need {
			break
		}
	}
	return n, nil
}

// successorCommit reads the commit of header from successor: a raw
// record of the next height (its last_commit) or a /commit answer of
// header's height.
func successorCommit(successor []byte, header *types.Header) (*types.Commit, error) {
	if successor == nil {
		return nil, &MissingCommitError{Height: header.Height}
	}
	if bytes.Contains(successor[:min(len(successor), 64)], []byte(`"signed_header"`)) {
		h, commit, err := ParseSignedHeader(successor)
		if err != nil {
			return nil, fmt.Errorf("trust: block %d: %w", header.Height, err)
		}
		if h.Height != header.Height || !bytes.Equal(h.Hash(), header.Hash()) {
			return nil, &MismatchError{Height: header.Height, Field: "/commit signed_header.header hash", Got: h.Hash(), Want: header.Hash()}
		}
		return commit, nil
	}
	rec, err := ParseRecord(successor)
	if err != nil {
		return nil, fmt.Errorf("trust: block %d: %w", header.Height+1, err)
	}
	commit, err := rec.Commit()
	if err != nil {
		return nil, fmt.Errorf("trust: block %d: %w", header.Height+1, err)
	}
	if err := checkCommitHash(&rec.Header, commit); err != nil {
		return nil, err
	}
	return commit, nil
}
