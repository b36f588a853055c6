// Package chain is the vocabulary shared by blockhaul's engines and its chain
// families: a raw Block as fetched and staged, and the Table/Rows shape a
// family's decoder fills for export. It knows no chain itself; each family
// lives in a folder of its own below this one (chain/cometbft, chain/evm).
package chain

import "fmt"

// Family names a chain family. The byte value is stored in every staged
// record header, so values must never be renumbered.
type Family uint8

const (
	FamilyUnknown  Family = 0
	FamilyCometBFT Family = 1
	FamilyEVM      Family = 2
)

func (f Family) String() string {
	switch f {
	case FamilyCometBFT:
		return "cometbft"
	case FamilyEVM:
		return "evm"
	}
	return fmt.Sprintf("family(%d)", uint8(f))
}

// ParseFamily maps a --chain value to a Family.
func ParseFamily(s string) (Family, error) {
	switch s {
	case "cometbft", "tendermint":
		return FamilyCometBFT, nil
	case "evm", "ethereum":
		return FamilyEVM, nil
	}
	return FamilyUnknown, fmt.Errorf("chain: unknown chain family %q (want cometbft or evm)", s)
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
