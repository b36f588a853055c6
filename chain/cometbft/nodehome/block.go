package nodehome

import (
	"bytes"
	"errors"
	"fmt"

	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	"github.com/cometbft/cometbft/types"
)

// blockFromProto is CometBFT's types.BlockFromProto (v0.38.26) less one
// check of its Block.ValidateBasic unless checkDataHash is set: that the
// header's data_hash is the Merkle root of the block's txs. The loader
// verifies every record a source gives before it is staged
// (cometbft.VerifyBlock: the block hash recomputed from the header, and
// data_hash from the txs of the record written from this block), so that
// check was made twice a block; not with --verify-blocks links, where the
// loader recomputes nothing and checkDataHash keeps the check here. The
// others — the header's own ValidateBasic, the last commit's ValidateBasic
// and last_commit_hash, each evidence's ValidateBasic and evidence_hash —
// are checked by nothing else and are made here as ValidateBasic makes
// them, with CometBFT's own functions.
func blockFromProto(bp *cmtproto.Block, checkDataHash bool) (*types.Block, error) {
	if bp == nil {
		return nil, errors.New("nil block")
	}
	b := new(types.Block)
	h, err := types.HeaderFromProto(&bp.Header)
	if err != nil {
		return nil, err
	}
	b.Header = h
	data, err := types.DataFromProto(&bp.Data)
	if err != nil {
		return nil, err
	}
	b.Data = data
	if err := b.Evidence.FromProto(&bp.Evidence); err != nil {
		return nil, err
	}
	if bp.LastCommit != nil {
		if b.LastCommit, err = types.CommitFromProto(bp.LastCommit); err != nil {
			return nil, err
		}
	}
	return b, validateBlock(b, checkDataHash)
}

// validateBlock is Block.ValidateBasic, the data_hash check only with
// checkDataHash (see blockFromProto), its errors worded as CometBFT words
// them.
func validateBlock(b *types.Block, checkDataHash bool) error {
	if err := b.Header.ValidateBasic(); err != nil {
		return fmt.Errorf("invalid header: %w", err)
	}
	if b.LastCommit == nil {
		return errors.New("nil LastCommit")
	}
	if err := b.LastCommit.ValidateBasic(); err != nil {
		return fmt.Errorf("wrong LastCommit: %v", err)
	}
	if w := b.LastCommit.Hash(); !bytes.Equal(b.LastCommitHash, w) {
		return fmt.Errorf("wrong Header.LastCommitHash. Expected %v, got %v", w, b.LastCommitHash)
	}
	if checkDataHash {
		if w := b.Data.Hash(); !bytes.Equal(b.DataHash, w) {
			return fmt.Errorf("wrong Header.DataHash. Expected %v, got %v", w, b.DataHash)
		}
	}
	for i, ev := range b.Evidence.Evidence {
		if err := ev.ValidateBasic(); err != nil {
			return fmt.Errorf("invalid evidence (#%d): %v", i, err)
		}
	}
	if w := b.Evidence.Hash(); !bytes.Equal(b.EvidenceHash, w) {
		return fmt.Errorf("wrong Header.EvidenceHash. Expected %v, got %v", b.EvidenceHash, w)
	}
	return nil
}
