package staging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/cockroachdb/pebble/v2"
)

// Identity is which chain a store holds. It is recorded by the first Bind
// and the first committed block, written with sync, and checked on every
// later Bind and at the first block's height.
type Identity struct {
	Family      chain.Family `json:"family"`
	ChainID     string       `json:"chain_id"`
	FirstHeight uint64       `json:"first_height"`
	FirstHash   []byte       `json:"first_hash,omitempty"`
}

// WrongChainError reports a block or source of another chain than the one
// the store holds.
type WrongChainError struct {
	Dir         string
	Have, Given string
}

func (e *WrongChainError) Error() string {
	return fmt.Sprintf("staging: %s holds %s, refusing %s (use another --staging directory)", e.Dir, e.Have, e.Given)
}

// Fault marks the error as data that is wrong (exit 4): another chain's blocks.
func (e *WrongChainError) Fault() fault.Class { return fault.Data }

var identKey = []byte{prefixIdent}

func (s *Store) loadIdentity() (_ Identity, _ bool, err error) {
	defer s.contain("read identity", false, &err)
	v, closer, err := s.db.Get(identKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, fmt.Errorf("staging: read identity: %w", s.corruptErr(err, nil))
	}
	defer closer.Close()
	var id Identity
	if err := json.Unmarshal(v, &id); err != nil {
		return Identity{}, false, fmt.Errorf("staging: identity record is corrupt: %w", err)
	}
	return id, true, nil
}

func (s *Store) saveIdentity(id Identity) (err error) {
	v, err := json.Marshal(id)
	if err != nil {
		return err
	}
	return s.setSync(identKey, v, "write identity")
}

// setSync writes one small, durable key: the free-space reserve (half of
// it) first, Pebble's failures contained.
func (s *Store) setSync(k, v []byte, op string) (err error) {
	if err := s.faults.broken(); err != nil {
		return err
	}
	if err := s.reserve(uint64(len(k)+len(v)), true); err != nil {
		return err
	}
	return s.write(op, func() error {
		if err := s.db.Set(k, v, pebble.Sync); err != nil {
			return fmt.Errorf("staging: %s: %w", op, err)
		}
		return nil
	})
}

// Identity returns the chain the store holds, if it has been bound.
func (s *Store) Identity() (Identity, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ident, s.bound
}

// Bind records that the store holds family's chain chainID, or checks that
// it already does. A store bound to another chain returns *WrongChainError.
func (s *Store) Bind(family chain.Family, chainID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound {
		if s.ident.Family != family || s.ident.ChainID != chainID {
			return &WrongChainError{Dir: s.dir,
				Have:  fmt.Sprintf("%s chain %q", s.ident.Family, s.ident.ChainID),
				Given: fmt.Sprintf("%s chain %q", family, chainID)}
		}
		return nil
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("staging: %s is read-only and holds no chain yet", s.dir)
	}
	id := Identity{Family: family, ChainID: chainID}
	if err := s.saveIdentity(id); err != nil {
		return err
	}
	s.ident, s.bound = id, true
	return nil
}

// checkFirst checks b against the identity's first block and, for the
// store's very first block, records it. Called with s.mu unlocked.
func (s *Store) checkFirst(height uint64, hash []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.bound {
		return fmt.Errorf("staging: %s: Bind must be called before blocks are written", s.dir)
	}
	if s.ident.FirstHash == nil {
		id := s.ident
		id.FirstHeight, id.FirstHash = height, bytes.Clone(hash)
		if err := s.saveIdentity(id); err != nil {
			return err
		}
		s.ident = id
		return nil
	}
	if height == s.ident.FirstHeight && !bytes.Equal(hash, s.ident.FirstHash) {
		return &WrongChainError{Dir: s.dir,
			Have:  fmt.Sprintf("block %d with hash %X", height, s.ident.FirstHash),
			Given: fmt.Sprintf("block %d with hash %X", height, hash)}
	}
	return nil
}

// Restore records id, whole (its first block too), as the identity of an
// unbound store: a store rebuilt from another's records (repair's salvage)
// holds the same chain from the same first block. A store already bound is
// checked as by Bind.
func (s *Store) Restore(id Identity) error {
	s.mu.Lock()
	bound := s.bound
	s.mu.Unlock()
	if bound {
		return s.Bind(id.Family, id.ChainID)
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("staging: %s is read-only and holds no chain yet", s.dir)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.saveIdentity(id); err != nil {
		return err
	}
	s.ident, s.bound = id, true
	return nil
}
