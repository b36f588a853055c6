package aptos

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/blockhaul/blockhaul/internal/fault"
)

// GenesisHeight is the height of an Aptos chain's first block.
const GenesisHeight = 0

// Transaction types as the REST API names them.
const (
	TxBlockMetadata   = "block_metadata_transaction"
	TxUser            = "user_transaction"
	TxStateCheckpoint = "state_checkpoint_transaction"
	TxGenesis         = "genesis_transaction"
	TxValidator       = "validator_transaction"
	TxBlockEpilogue   = "block_epilogue_transaction"
)

// Parent is what a record keeps of the block before it: its hash and its
// last version, as the node gave them.
type Parent struct {
	BlockHash   string `json:"block_hash"`
	LastVersion string `json:"last_version"`
}

// Record is a raw record's parts: the node's answers as sent.
type Record struct {
	Block  json.RawMessage   `json:"block"`
	Pages  []json.RawMessage `json:"pages,omitempty"`
	Parent *Parent           `json:"parent,omitempty"`
}

// MarshalRecord joins a block's answers into its raw record.
func MarshalRecord(block json.RawMessage, pages []json.RawMessage, parent *Parent) []byte {
	var b bytes.Buffer
	b.Grow(len(block) + 128)
	b.WriteString(`{"block":`)
	b.Write(block)
	if len(pages) > 0 {
		b.WriteString(`,"pages":[`)
		for i, p := range pages {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(p)
		}
		b.WriteByte(']')
	}
	if parent != nil {
		fmt.Fprintf(&b, `,"parent":{"block_hash":%q,"last_version":%q}`, parent.BlockHash, parent.LastVersion)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// restBlock is a /v1/blocks answer.
type restBlock struct {
	BlockHeight    string            `json:"block_height"`
	BlockHash      string            `json:"block_hash"`
	BlockTimestamp string            `json:"block_timestamp"`
	FirstVersion   string            `json:"first_version"`
	LastVersion    string            `json:"last_version"`
	Transactions   []json.RawMessage `json:"transactions"`
}

// Tx is one transaction of the REST API, the fields of every type.
type Tx struct {
	Type                string          `json:"type"`
	Version             string          `json:"version"`
	Hash                string          `json:"hash"`
	StateChangeHash     string          `json:"state_change_hash"`
	EventRootHash       string          `json:"event_root_hash"`
	StateCheckpointHash *string         `json:"state_checkpoint_hash"`
	GasUsed             string          `json:"gas_used"`
	Success             bool            `json:"success"`
	VMStatus            string          `json:"vm_status"`
	AccumulatorRootHash string          `json:"accumulator_root_hash"`
	Changes             []Change        `json:"changes"`
	Events              []Event         `json:"events"`
	Timestamp           string          `json:"timestamp"`
	Payload             json.RawMessage `json:"payload"`
	Signature           json.RawMessage `json:"signature"`

	// block_metadata_transaction
	ID                       string             `json:"id"`
	Epoch                    string             `json:"epoch"`
	Round                    string             `json:"round"`
	Proposer                 string             `json:"proposer"`
	PreviousBlockVotesBitvec []Uint8Num         `json:"previous_block_votes_bitvec"`
	FailedProposerIndices    []uint32           `json:"failed_proposer_indices"`
	Extension                *MetadataExtension `json:"block_metadata_extension"`

	// user_transaction
	Sender                  string `json:"sender"`
	SequenceNumber          string `json:"sequence_number"`
	MaxGasAmount            string `json:"max_gas_amount"`
	GasUnitPrice            string `json:"gas_unit_price"`
	ExpirationTimestampSecs string `json:"expiration_timestamp_secs"`

	// block_epilogue_transaction
	BlockEndInfo *blockEndInfo `json:"block_end_info"`
}

// Uint8Num is a byte written as a JSON number (encoding/json reads a
// []byte from base64).
type Uint8Num uint8

// MetadataExtension is a block metadata transaction's extension (v1: its
// randomness).
type MetadataExtension struct {
	Type       string  `json:"type"`
	Randomness *string `json:"randomness"`
}

type blockEndInfo struct {
	BlockGasLimitReached        bool   `json:"block_gas_limit_reached"`
	BlockOutputLimitReached     bool   `json:"block_output_limit_reached"`
	BlockEffectiveBlockGasUnits uint64 `json:"block_effective_block_gas_units"`
	BlockApproxOutputSize       uint64 `json:"block_approx_output_size"`
}

// Event is one event of a transaction.
type Event struct {
	GUID struct {
		CreationNumber string `json:"creation_number"`
		AccountAddress string `json:"account_address"`
	} `json:"guid"`
	SequenceNumber string          `json:"sequence_number"`
	Type           string          `json:"type"`
	Data           json.RawMessage `json:"data"`
}

// Change is one write set change of a transaction.
type Change struct {
	Type         string          `json:"type"`
	Address      string          `json:"address"`
	StateKeyHash string          `json:"state_key_hash"`
	Data         json.RawMessage `json:"data"`
	Module       string          `json:"module"`   // delete_module
	Resource     string          `json:"resource"` // delete_resource
	Handle       string          `json:"handle"`   // table items
	Key          json.RawMessage `json:"key"`
	Value        json.RawMessage `json:"value"`
}

// Block is a record read whole: the block's fields, every transaction of
// it in order, and its parent's.
type Block struct {
	Height       uint64
	Hash         []byte
	TimestampUS  uint64
	FirstVersion uint64
	LastVersion  uint64
	Txs          []Tx
	Parent       *Parent
}

// RecordError is a record that is not what the node's answers make: a
// field that does not parse, or that does not agree with another (a
// version skipped, a transaction of another block, a metadata transaction
// that names another height). It names the height and the field. Like a
// hash mismatch it is unsound: asked again elsewhere, and a data error
// (exit status 4) once the retries are spent.
type RecordError struct {
	Height   uint64
	Field    string // "transactions[3].version", "block_height", …
	Reason   string
	Endpoint string // redacted; "" when not known
}

func (e *RecordError) Error() string {
	s := fmt.Sprintf("aptos: block %d: %s: %s", e.Height, e.Field, e.Reason)
	if e.Endpoint != "" {
		s += " (answered by " + e.Endpoint + ")"
	}
	return s
}

// FailedHeight is the block's height (a fetch charges the failure to it).
func (e *RecordError) FailedHeight() uint64 { return e.Height }

// Fault marks the error unsound: retried, elsewhere first; data that is
// wrong (exit status 4) once the retries are spent.
func (e *RecordError) Fault() fault.Class { return fault.Unsound }

// ParseRecord reads a raw record whole. It checks the shape of what it
// reads (numbers, hashes), not how the parts agree: that is VerifyBlock's.
func ParseRecord(raw []byte) (*Block, error) {
	// One pass over the record; a record that does not read is read again
	// in parts, for an error that names the part.
	var rec struct {
		Block struct {
			BlockHeight    string `json:"block_height"`
			BlockHash      string `json:"block_hash"`
			BlockTimestamp string `json:"block_timestamp"`
			FirstVersion   string `json:"first_version"`
			LastVersion    string `json:"last_version"`
			Transactions   []Tx   `json:"transactions"`
		} `json:"block"`
		Pages  [][]Tx  `json:"pages"`
		Parent *Parent `json:"parent"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return parseRecordParts(raw)
	}
	rb := &rec.Block
	b, err := newBlock(rb.BlockHeight, rb.BlockHash, rb.BlockTimestamp, rb.FirstVersion, rb.LastVersion, rec.Parent)
	if err != nil {
		return nil, err
	}
	b.Txs = rb.Transactions
	for _, p := range rec.Pages {
		b.Txs = append(b.Txs, p...)
	}
	return b, nil
}

// newBlock reads a block's fields.
func newBlock(height, hash, timestamp, first, last string, parent *Parent) (*Block, error) {
	h, err := parseU64(height)
	if err != nil {
		return nil, fmt.Errorf("aptos: record: block_height %q: %w", height, err)
	}
	b := &Block{Height: h, Parent: parent}
	bad := func(field string, err error) error { return &RecordError{Height: h, Field: field, Reason: err.Error()} }
	if b.Hash, err = parseBlockHash(hash, h); err != nil {
		return nil, bad("block_hash", err)
	}
	if b.TimestampUS, err = parseU64(timestamp); err != nil {
		return nil, bad("block_timestamp", err)
	}
	if b.FirstVersion, err = parseU64(first); err != nil {
		return nil, bad("first_version", err)
	}
	if b.LastVersion, err = parseU64(last); err != nil {
		return nil, bad("last_version", err)
	}
	return b, nil
}

// parseRecordParts reads a record part by part, for the error of one that
// does not read.
func parseRecordParts(raw []byte) (*Block, error) {
	var rec Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("aptos: record: %w", err)
	}
	var rb restBlock
	if err := json.Unmarshal(rec.Block, &rb); err != nil {
		return nil, fmt.Errorf("aptos: record: block: %w", err)
	}
	b, err := newBlock(rb.BlockHeight, rb.BlockHash, rb.BlockTimestamp, rb.FirstVersion, rb.LastVersion, rec.Parent)
	if err != nil {
		return nil, err
	}
	bad := func(field string, err error) error {
		return &RecordError{Height: b.Height, Field: field, Reason: err.Error()}
	}
	n := len(rb.Transactions)
	pages := make([][]json.RawMessage, len(rec.Pages))
	for i, p := range rec.Pages {
		if err := json.Unmarshal(p, &pages[i]); err != nil {
			return nil, bad(fmt.Sprintf("pages[%d]", i), err)
		}
		n += len(pages[i])
	}
	b.Txs = make([]Tx, 0, n)
	for _, list := range append([][]json.RawMessage{rb.Transactions}, pages...) {
		for _, t := range list {
			i := len(b.Txs)
			b.Txs = append(b.Txs, Tx{})
			if err := json.Unmarshal(t, &b.Txs[i]); err != nil {
				return nil, bad(fmt.Sprintf("transactions[%d]", i), err)
			}
		}
	}
	return nil, bad("record", errors.New("does not read as a whole, yet every part does"))
}

// parseU64 reads a REST u64: a decimal string.
func parseU64(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("missing")
	}
	return strconv.ParseUint(s, 10, 64)
}

// parseBlockHash reads a block's hash; a test network's genesis block may
// have none (""), which is the zero hash.
func parseBlockHash(s string, height uint64) ([]byte, error) {
	if s == "" && height == GenesisHeight {
		return make([]byte, 32), nil
	}
	return ParseHash(s)
}

// ParseHash reads a 0x-prefixed 32-byte hash.
func ParseHash(s string) ([]byte, error) {
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok || len(digits) != 64 {
		return nil, fmt.Errorf("%q is not a 0x-prefixed 32-byte hash", s)
	}
	b, err := hex.DecodeString(digits)
	if err != nil {
		return nil, fmt.Errorf("%q is not hex", s)
	}
	return b, nil
}

// ParseAddress reads an account address, short ("0x1") or long, into its
// 32 bytes (zero-extended on the left, as the chain stores it).
func ParseAddress(s string) ([]byte, error) {
	return appendAddress(nil, s)
}

func appendAddress(dst []byte, s string) ([]byte, error) {
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok || len(digits) == 0 || len(digits) > 64 {
		return dst, fmt.Errorf("%q is not a 0x-prefixed address", s)
	}
	var buf [64]byte
	pad := 64 - len(digits)
	for i := range pad {
		buf[i] = '0'
	}
	copy(buf[pad:], digits)
	out := make([]byte, 32)
	if _, err := hex.Decode(out, buf[:]); err != nil {
		return dst, fmt.Errorf("%q is not hex", s)
	}
	return append(dst, out...), nil
}

// parseHex reads 0x-prefixed hex bytes of any length.
func parseHex(s string) ([]byte, error) {
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return nil, fmt.Errorf("%q is not 0x-prefixed hex", s)
	}
	b, err := hex.DecodeString(digits)
	if err != nil {
		return nil, fmt.Errorf("%q is not hex", s)
	}
	return b, nil
}
