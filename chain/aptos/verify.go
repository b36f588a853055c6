package aptos

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"golang.org/x/crypto/sha3"

	"github.com/blockhaul/blockhaul/chain"
)

// What a REST answer lets be recomputed (docs/aptos.md):
//
//   - A transaction's hash is SHA3-256 of the "APTOS::Transaction" salt's
//     hash and the transaction's BCS encoding. For the chain's own
//     transactions every field the encoding needs is in the answer: block
//     metadata (Transaction::BlockMetadata, and BlockMetadataExt V1 with its
//     randomness), state checkpoints (the block's id) and block epilogues
//     (the block's id and its end info, V0). They are recomputed. A user
//     transaction's encoding needs its payload's arguments in BCS, which the
//     answer gives as JSON values whose Move types it does not carry in
//     full; it is not recomputed, nor are genesis and validator
//     transactions (their write sets and payloads are shown decoded).
//   - A transaction's event root is the Merkle accumulator of its events'
//     hashes, each over the event's BCS encoding (data in BCS, shown as
//     JSON): recomputed only where there are no events (the accumulator's
//     placeholder hash).
//   - Its state change hash is the hash of its write set's BCS encoding
//     (values in BCS, shown as JSON): recomputed only for an empty write set.
//   - The accumulator root hash covers every transaction before it, and the
//     block's hash is the consensus block's, over its payload: neither can
//     be recomputed from one block. The block's hash is checked to be the id
//     its metadata transaction (whose hash is recomputed) names.

var (
	txSalt       = saltHash("APTOS::Transaction")
	writeSetSalt = saltHash("APTOS::WriteSet")
	// placeholderHash is the root of an accumulator with no leaves.
	placeholderHash = append([]byte("ACCUMULATOR_PLACEHOLDER_HASH"), 0, 0, 0, 0)
	// emptyWriteSetHash is the hash of WriteSet::V0 with no changes.
	emptyWriteSetHash = saltedHash(writeSetSalt, []byte{0, 0})
)

func saltHash(s string) []byte {
	h := sha3.Sum256([]byte(s))
	return h[:]
}

func saltedHash(salt, body []byte) []byte {
	h := sha3.New256()
	h.Write(salt)
	h.Write(body)
	return h.Sum(nil)
}

// VerifyBlock checks a record (see Check) and recomputes what it lets be
// recomputed: the hashes of its block metadata, state checkpoint and block
// epilogue transactions, and the event root and state change hash of every
// transaction without events or changes. It returns the block's hash.
func VerifyBlock(raw []byte) ([]byte, error) { return verify(raw, true) }

// VerifyRecordHeader checks a record (see Check) without recomputing its
// hashes, and returns the block's hash.
func VerifyRecordHeader(raw []byte) ([]byte, error) { return verify(raw, false) }

func verify(raw []byte, hashes bool) ([]byte, error) {
	b, err := ParseRecord(raw)
	if err != nil {
		return nil, err
	}
	if err := b.Check(); err != nil {
		return nil, err
	}
	if hashes {
		if err := b.recompute(); err != nil {
			return nil, err
		}
	}
	return b.Hash, nil
}

// BlockIdentity returns a record's block hash, its parent's hash (nil at
// genesis) and its height, as the RPC source names the block it staged.
func BlockIdentity(raw []byte) (hash, parent []byte, height uint64, err error) {
	var rec struct {
		Block struct {
			BlockHeight string `json:"block_height"`
			BlockHash   string `json:"block_hash"`
		} `json:"block"`
		Parent *Parent `json:"parent"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, nil, 0, fmt.Errorf("aptos: record: %w", err)
	}
	if height, err = parseU64(rec.Block.BlockHeight); err != nil {
		return nil, nil, 0, fmt.Errorf("aptos: record: block_height %q: %w", rec.Block.BlockHeight, err)
	}
	if hash, err = parseBlockHash(rec.Block.BlockHash, height); err != nil {
		return nil, nil, 0, &RecordError{Height: height, Field: "block_hash", Reason: err.Error()}
	}
	if rec.Parent != nil {
		if parent, err = ParseHash(rec.Parent.BlockHash); err != nil {
			return nil, nil, 0, &RecordError{Height: height, Field: "parent.block_hash", Reason: err.Error()}
		}
	}
	return hash, parent, height, nil
}

// Check checks how the record's parts agree: its transactions are exactly
// its versions, first_version to last_version, in order; the first
// follows its parent's last version; the block opens with its metadata
// transaction (genesis: the genesis transaction), which names the block's
// id, time, height, epoch and round, and no other transaction is one.
func (b *Block) Check() error {
	bad := func(field, format string, args ...any) error {
		return &RecordError{Height: b.Height, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if b.LastVersion < b.FirstVersion {
		return bad("last_version", "%d is below first_version %d", b.LastVersion, b.FirstVersion)
	}
	if n := b.LastVersion - b.FirstVersion + 1; uint64(len(b.Txs)) != n {
		return bad("transactions", "%d transactions for versions %d-%d (%d)", len(b.Txs), b.FirstVersion, b.LastVersion, n)
	}
	for i := range b.Txs {
		tx := &b.Txs[i]
		v, err := parseU64(tx.Version)
		if err != nil {
			return bad(fmt.Sprintf("transactions[%d].version", i), "%q: %v", tx.Version, err)
		}
		if want := b.FirstVersion + uint64(i); v != want {
			return bad(fmt.Sprintf("transactions[%d].version", i), "is %d, the block's version %d is %d (versions %d-%d)", v, i, want, b.FirstVersion, b.LastVersion)
		}
		if _, err := ParseHash(tx.Hash); err != nil {
			return bad(fmt.Sprintf("transactions[%d].hash", i), "%v", err)
		}
		if i > 0 && (tx.Type == TxBlockMetadata || tx.Type == TxGenesis) {
			return bad(fmt.Sprintf("transactions[%d].type", i), "a %s inside the block (another block's transaction)", tx.Type)
		}
	}
	if b.Height == GenesisHeight {
		if b.Parent != nil || b.FirstVersion != 0 {
			return bad("first_version", "genesis starts at version %d with a parent %v", b.FirstVersion, b.Parent != nil)
		}
		if b.Txs[0].Type != TxGenesis {
			return bad("transactions[0].type", "is %q, want %s", b.Txs[0].Type, TxGenesis)
		}
		return nil
	}
	if b.Parent == nil {
		return bad("parent", "missing (the block before it)")
	}
	if _, err := ParseHash(b.Parent.BlockHash); err != nil {
		return bad("parent.block_hash", "%v", err)
	}
	plast, err := parseU64(b.Parent.LastVersion)
	if err != nil {
		return bad("parent.last_version", "%q: %v", b.Parent.LastVersion, err)
	}
	if plast+1 != b.FirstVersion {
		return bad("first_version", "is %d, block %d ends at version %d", b.FirstVersion, b.Height-1, plast)
	}
	m := &b.Txs[0]
	if m.Type != TxBlockMetadata {
		return bad("transactions[0].type", "is %q, want %s", m.Type, TxBlockMetadata)
	}
	id, err := ParseHash(m.ID)
	if err != nil {
		return bad("transactions[0].id", "%v", err)
	}
	if !bytes.Equal(id, b.Hash) {
		return bad("transactions[0].id", "%s is not the block's hash 0x%x", m.ID, b.Hash)
	}
	if ts, err := parseU64(m.Timestamp); err != nil || ts != b.TimestampUS {
		return bad("transactions[0].timestamp", "%q is not the block's timestamp %d", m.Timestamp, b.TimestampUS)
	}
	epoch, err := parseU64(m.Epoch)
	if err != nil {
		return bad("transactions[0].epoch", "%q: %v", m.Epoch, err)
	}
	round, err := parseU64(m.Round)
	if err != nil {
		return bad("transactions[0].round", "%q: %v", m.Round, err)
	}
	for j, e := range m.Events {
		if e.Type != "0x1::block::NewBlockEvent" {
			continue
		}
		var nb struct {
			Hash   string `json:"hash"`
			Height string `json:"height"`
			Epoch  string `json:"epoch"`
			Round  string `json:"round"`
		}
		field := fmt.Sprintf("transactions[0].events[%d].data", j)
		if err := json.Unmarshal(e.Data, &nb); err != nil {
			return bad(field, "%v", err)
		}
		if h, err := parseU64(nb.Height); err != nil || h != b.Height {
			return bad(field+".height", "%q is not the block's height", nb.Height)
		}
		if ep, err := parseU64(nb.Epoch); err != nil || ep != epoch {
			return bad(field+".epoch", "%q is not the metadata transaction's epoch %d", nb.Epoch, epoch)
		}
		if r, err := parseU64(nb.Round); err != nil || r != round {
			return bad(field+".round", "%q is not the metadata transaction's round %d", nb.Round, round)
		}
		// The event's hash is a Move address: shown without leading zeros.
		if h, err := ParseAddress(nb.Hash); err != nil || !bytes.Equal(h, id) {
			return bad(field+".hash", "%q is not the block's id %s", nb.Hash, m.ID)
		}
		return nil
	}
	return bad("transactions[0].events", "no 0x1::block::NewBlockEvent")
}

// recompute recomputes what the record lets be recomputed (see the note at
// the top of this file). Check has passed.
func (b *Block) recompute() error {
	for i := range b.Txs {
		tx := &b.Txs[i]
		var body []byte
		var err error
		switch tx.Type {
		case TxBlockMetadata:
			body, err = metadataBCS(tx)
		case TxStateCheckpoint:
			body = append([]byte{3}, b.Hash...)
		case TxBlockEpilogue:
			if tx.BlockEndInfo != nil {
				body = epilogueBCS(b.Hash, tx.BlockEndInfo)
			}
		}
		if err != nil {
			return &RecordError{Height: b.Height, Field: fmt.Sprintf("transactions[%d]", i), Reason: err.Error()}
		}
		claimed, _ := ParseHash(tx.Hash)
		if body != nil {
			if got := saltedHash(txSalt, body); !bytes.Equal(got, claimed) {
				return &chain.HashMismatchError{Family: chain.FamilyAptos, Height: b.Height, What: fmt.Sprintf("transactions[%d].hash (%s)", i, tx.Type), Claimed: claimed, Computed: got}
			}
		}
		if len(tx.Events) == 0 && tx.EventRootHash != "" {
			if h, err := ParseHash(tx.EventRootHash); err != nil || !bytes.Equal(h, placeholderHash) {
				return &chain.HashMismatchError{Family: chain.FamilyAptos, Height: b.Height, What: fmt.Sprintf("transactions[%d].event_root_hash (no events)", i), Claimed: h, Computed: placeholderHash}
			}
		}
		if len(tx.Changes) == 0 && tx.StateChangeHash != "" {
			if h, err := ParseHash(tx.StateChangeHash); err != nil || !bytes.Equal(h, emptyWriteSetHash) {
				return &chain.HashMismatchError{Family: chain.FamilyAptos, Height: b.Height, What: fmt.Sprintf("transactions[%d].state_change_hash (no changes)", i), Claimed: h, Computed: emptyWriteSetHash}
			}
		}
	}
	return nil
}

// metadataBCS is a block metadata transaction's BCS encoding as a
// Transaction: BlockMetadata (variant 2), or BlockMetadataExt (variant 5)
// V1 when the answer has a v1 extension.
func metadataBCS(tx *Tx) ([]byte, error) {
	id, _ := ParseHash(tx.ID)
	epoch, _ := parseU64(tx.Epoch)
	round, _ := parseU64(tx.Round)
	ts, err := parseU64(tx.Timestamp)
	if err != nil {
		return nil, fmt.Errorf("timestamp %q: %v", tx.Timestamp, err)
	}
	proposer, err := ParseAddress(tx.Proposer)
	if err != nil {
		return nil, fmt.Errorf("proposer: %v", err)
	}
	b := make([]byte, 0, 128+len(tx.PreviousBlockVotesBitvec)+4*len(tx.FailedProposerIndices))
	if tx.Extension == nil {
		b = append(b, 2)
	} else {
		if tx.Extension.Type != "v1" {
			return nil, fmt.Errorf("block_metadata_extension of type %q, which this blockhaul cannot encode to recompute the hash (--verify-blocks header does without)", tx.Extension.Type)
		}
		b = append(b, 5, 1)
	}
	b = append(b, id...)
	b = binary.LittleEndian.AppendUint64(b, epoch)
	b = binary.LittleEndian.AppendUint64(b, round)
	b = append(b, proposer...)
	b = appendULEB(b, uint64(len(tx.PreviousBlockVotesBitvec)))
	for _, x := range tx.PreviousBlockVotesBitvec {
		b = append(b, byte(x))
	}
	b = appendULEB(b, uint64(len(tx.FailedProposerIndices)))
	for _, x := range tx.FailedProposerIndices {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	b = binary.LittleEndian.AppendUint64(b, ts)
	if tx.Extension != nil {
		// randomness: Option<Randomness{metadata: {epoch, round}, randomness: Vec<u8>}>
		if tx.Extension.Randomness == nil {
			b = append(b, 0)
		} else {
			r, err := parseHex(*tx.Extension.Randomness)
			if err != nil {
				return nil, fmt.Errorf("block_metadata_extension.randomness: %v", err)
			}
			b = append(b, 1)
			b = binary.LittleEndian.AppendUint64(b, epoch)
			b = binary.LittleEndian.AppendUint64(b, round)
			b = appendULEB(b, uint64(len(r)))
			b = append(b, r...)
		}
	}
	return b, nil
}

// epilogueBCS is a block epilogue's BCS encoding as a Transaction:
// BlockEpilogue (variant 6), payload V0 {block_id, BlockEndInfo V0}.
func epilogueBCS(blockID []byte, e *blockEndInfo) []byte {
	b := make([]byte, 0, 64)
	b = append(b, 6, 0)
	b = append(b, blockID...)
	b = append(b, 0, boolByte(e.BlockGasLimitReached), boolByte(e.BlockOutputLimitReached))
	b = binary.LittleEndian.AppendUint64(b, e.BlockEffectiveBlockGasUnits)
	return binary.LittleEndian.AppendUint64(b, e.BlockApproxOutputSize)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// appendULEB appends BCS's length prefix, ULEB128.
func appendULEB(b []byte, n uint64) []byte {
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

// The hashes a synthetic chain needs to make records VerifyBlock accepts.
var (
	// PlaceholderHash is the event root of a transaction without events.
	PlaceholderHash = bytes.Clone(placeholderHash)
	// EmptyWriteSetHash is the state change hash of one without changes.
	EmptyWriteSetHash = bytes.Clone(emptyWriteSetHash)
)

// MetadataTxHash returns the hash of a block metadata transaction (its id,
// epoch, round, proposer, previous_block_votes_bitvec,
// failed_proposer_indices, timestamp and extension as tx holds them).
func MetadataTxHash(tx *Tx) ([]byte, error) {
	if _, err := ParseHash(tx.ID); err != nil {
		return nil, err
	}
	body, err := metadataBCS(tx)
	if err != nil {
		return nil, err
	}
	return saltedHash(txSalt, body), nil
}

// EpilogueTxHash returns the hash of the block epilogue transaction of
// block blockID with the given end info.
func EpilogueTxHash(blockID []byte, gasLimitReached, outputLimitReached bool, effectiveGas, approxOutput uint64) []byte {
	return saltedHash(txSalt, epilogueBCS(blockID, &blockEndInfo{gasLimitReached, outputLimitReached, effectiveGas, approxOutput}))
}
