// Package chain is the vocabulary shared by blockhaul's engines and its chain
// families: a raw Block as fetched and staged, and the Table/Rows shape a
// family's decoder fills for export. It knows no chain itself; each family
// lives in a folder of its own below this one (chain/cometbft, chain/evm),
// and is registered as one value in package family.
package chain

import (
	"errors"
	"fmt"
)

// Family is a chain family's ID. The byte value is stored in every staged
// record header, so values must never be renumbered. What a family is and
// does (its names, decoder, sources) is its family.Family, registered in
// package family; family.Of maps an ID to it.
type Family uint8

const (
	FamilyUnknown  Family = 0
	FamilyCometBFT Family = 1
	FamilyEVM      Family = 2
	FamilyAptos    Family = 3
)

func (f Family) String() string {
	switch f {
	case FamilyCometBFT:
		return "cometbft"
	case FamilyEVM:
		return "evm"
	case FamilyAptos:
		return "aptos"
	}
	return fmt.Sprintf("family(%d)", uint8(f))
}

// Block is one raw block as a source produced it: the record exactly as the
// node sent it (for CometBFT the /block and /block_results results together),
// plus the identity fields the engines need without decoding it.
//
// Hash and ParentHash are the block's own hash and its parent's hash in raw
// bytes (32 bytes for both families today).
type Block struct {
	Height     uint64
	Hash       []byte
	ParentHash []byte
	Raw        []byte
}

// ErrSourceRefused is matched (errors.Is) by a source's error saying that
// it cannot serve the job as asked, found before anything is fetched: a
// range it does not hold (pruned, results discarded, above its tip), data a
// running process holds, a format it cannot read, a path that is not one.
// It is bad input: the job exits 2 and changes nothing.
var ErrSourceRefused = errors.New("the source cannot serve this job")

// ErrSourceDamaged is matched (errors.Is) by a source's error saying that
// its own data is damaged (a node database file that does not read): the
// job exits 4, as for a damaged staging store.
var ErrSourceDamaged = errors.New("the source's data is damaged")
