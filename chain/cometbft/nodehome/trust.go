package nodehome

import (
	"context"
	"fmt"
	"os"

	cmtjson "github.com/cometbft/cometbft/libs/json"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"

	"github.com/blockhaul/blockhaul/chain"
)

// GenesisJSON returns the node's genesis document, the chain of trust's
// root (chain/cometbft/trust).
func (s *Source) GenesisJSON(context.Context) ([]byte, error) {
	b, err := os.ReadFile(s.genesis)
	if err != nil {
		return nil, fmt.Errorf("nodehome: genesis: %w", err)
	}
	return b, nil
}

// Commit returns the signed header of height h as the node's /commit
// answers it: the commit stored with block h+1, or, for the latest height,
// the commit the node saw.
func (s *Source) Commit(_ context.Context, h uint64) (_ []byte, err error) {
	defer s.recoverCorrupt(s.blockPath, h, &err)
	meta := s.blocks.LoadBlockMeta(int64(h))
	if meta == nil {
		return nil, fmt.Errorf("nodehome: %s has no block %d: %w", s.home, h, chain.ErrSourceRefused)
	}
	commit := s.blocks.LoadBlockCommit(int64(h))
	canonical := commit != nil
	if commit == nil {
		commit = s.blocks.LoadSeenCommit(int64(h))
	}
	if commit == nil {
		return nil, fmt.Errorf("nodehome: %s has no commit of block %d: %w", s.home, h, chain.ErrSourceRefused)
	}
	return cmtjson.Marshal(ctypes.NewResultCommit(&meta.Header, commit, canonical))
}
