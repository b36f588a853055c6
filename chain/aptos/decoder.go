package aptos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/blockhaul/blockhaul/chain"
)

// Decoder turns Aptos records into the rows of Tables(). It is safe for
// concurrent use.
type Decoder struct{ tables []chain.Table }

// NewDecoder returns the family's decoder.
func NewDecoder() *Decoder { return &Decoder{tables: Tables()} }

// Family returns chain.FamilyAptos.
func (*Decoder) Family() chain.Family { return chain.FamilyAptos }

// Tables returns the export tables.
func (d *Decoder) Tables() []chain.Table { return d.tables }

// DecodeError is a record whose rows cannot be made: it names the height
// and the field.
type DecodeError struct {
	Height uint64
	Field  string
	Reason string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("aptos: decode block %d: %s: %s", e.Height, e.Field, e.Reason)
}

// Decode appends the rows of one block. On error rows are as they were.
func (d *Decoder) Decode(height uint64, raw []byte, rows *chain.Rows) error {
	b, err := ParseRecord(raw)
	if err != nil {
		return fmt.Errorf("aptos: decode block %d: %w", height, err)
	}
	if b.Height != height {
		return &DecodeError{Height: height, Field: "block_height", Reason: fmt.Sprintf("the record is of block %d", b.Height)}
	}
	lens := rows.Lens()
	if err := d.decode(b, rows); err != nil {
		rows.Truncate(lens)
		return err
	}
	return nil
}

// decoding carries one block's decoding.
type decoding struct {
	b    *Block
	rows *chain.Rows
	err  error
}

func (x *decoding) fail(field, format string, args ...any) {
	if x.err == nil {
		x.err = &DecodeError{Height: x.b.Height, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
}

// int64Of reads a REST u64 that must fit a bigint.
func (x *decoding) int64Of(field, s string) any {
	v, err := parseU64(s)
	if err != nil {
		x.fail(field, "%q: %v", s, err)
		return nil
	}
	if v > math.MaxInt64 {
		x.fail(field, "%d does not fit a bigint", v)
		return nil
	}
	return x.rows.BoxInt64(int64(v))
}

// numericOf reads a REST u64 for a numeric column.
func (x *decoding) numericOf(field, s string) any {
	v, err := parseU64(s)
	if err != nil {
		x.fail(field, "%q: %v", s, err)
		return nil
	}
	if v > math.MaxInt64 {
		return pgtype.Numeric{Int: new(big.Int).SetUint64(v), Valid: true}
	}
	return x.rows.BoxInt64(int64(v))
}

func (x *decoding) hashOf(field, s string) any {
	h, err := ParseHash(s)
	if err != nil {
		x.fail(field, "%v", err)
		return nil
	}
	return x.bytes(h)
}

func (x *decoding) addressOf(field, s string) any {
	a, err := ParseAddress(s)
	if err != nil {
		x.fail(field, "%v", err)
		return nil
	}
	return x.bytes(a)
}

// bytes copies b into the rows' memory.
func (x *decoding) bytes(b []byte) any {
	out := x.rows.Bytes(len(b))
	copy(out, b)
	return x.rows.BoxBytes(out)
}

// jsonOf copies JSON text into the rows' memory for a jsonb column; nil
// for absent or null.
func (x *decoding) jsonOf(js json.RawMessage) any {
	t := bytes.TrimSpace(js)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	return x.bytes(t)
}

func (d *Decoder) decode(b *Block, rows *chain.Rows) error {
	x := &decoding{b: b, rows: rows}
	ts := time.UnixMicro(int64(min(b.TimestampUS, math.MaxInt64)))
	height := rows.BoxInt64(int64(min(b.Height, math.MaxInt64)))
	if b.Height > math.MaxInt64 || b.LastVersion > math.MaxInt64 {
		return &DecodeError{Height: b.Height, Field: "last_version", Reason: "does not fit a bigint"}
	}

	br := rows.Row(TableBlocks)
	br[colBlockHeight] = height
	br[colBlockHash] = x.bytes(b.Hash)
	if b.Parent != nil {
		br[colBlockParentHash] = x.hashOf("parent.block_hash", b.Parent.BlockHash)
	}
	br[colBlockTimestamp] = ts
	br[colBlockFirstVersion] = rows.BoxInt64(int64(b.FirstVersion))
	br[colBlockLastVersion] = rows.BoxInt64(int64(b.LastVersion))
	br[colBlockTxCount] = rows.BoxInt32(int32(len(b.Txs)))
	if len(b.Txs) > 0 && b.Txs[0].Type == TxBlockMetadata {
		m := &b.Txs[0]
		br[colBlockEpoch] = x.int64Of("transactions[0].epoch", m.Epoch)
		br[colBlockRound] = x.int64Of("transactions[0].round", m.Round)
		br[colBlockProposer] = x.addressOf("transactions[0].proposer", m.Proposer)
	}

	for i := range b.Txs {
		tx := &b.Txs[i]
		f := func(name string) string { return fmt.Sprintf("transactions[%d].%s", i, name) }
		version := x.int64Of(f("version"), tx.Version)
		r := rows.Row(TableTransactions)
		r[colTxVersion] = version
		r[colTxBlockHeight] = height
		r[colTxHash] = x.hashOf(f("hash"), tx.Hash)
		r[colTxType] = tx.Type
		r[colTxSuccess] = tx.Success
		r[colTxVMStatus] = tx.VMStatus
		r[colTxGasUsed] = x.numericOf(f("gas_used"), tx.GasUsed)
		r[colTxStateChangeHash] = x.hashOf(f("state_change_hash"), tx.StateChangeHash)
		r[colTxEventRootHash] = x.hashOf(f("event_root_hash"), tx.EventRootHash)
		if tx.StateCheckpointHash != nil {
			r[colTxStateCheckpointHash] = x.hashOf(f("state_checkpoint_hash"), *tx.StateCheckpointHash)
		}
		r[colTxAccumulatorRootHash] = x.hashOf(f("accumulator_root_hash"), tx.AccumulatorRootHash)
		r[colTxTimestamp] = ts
		r[colTxNumEvents] = rows.BoxInt32(int32(len(tx.Events)))
		r[colTxNumChanges] = rows.BoxInt32(int32(len(tx.Changes)))

		if tx.Type == TxUser {
			x.user(tx, version, height, f)
		}
		for j := range tx.Events {
			x.event(&tx.Events[j], version, height, j, func(name string) string { return f(fmt.Sprintf("events[%d].%s", j, name)) })
		}
		for j := range tx.Changes {
			x.change(&tx.Changes[j], version, height, j, func(name string) string { return f(fmt.Sprintf("changes[%d].%s", j, name)) })
		}
		if x.err != nil {
			return x.err
		}
	}
	return x.err
}

func (x *decoding) user(tx *Tx, version, height any, f func(string) string) {
	var p struct {
		Type        string `json:"type"`
		Function    string `json:"function"`
		Transaction *struct {
			Function string `json:"function"`
		} `json:"transaction_payload"` // multisig
	}
	if len(tx.Payload) > 0 {
		if err := json.Unmarshal(tx.Payload, &p); err != nil {
			x.fail(f("payload"), "%v", err)
			return
		}
	}
	var sig struct {
		Type string `json:"type"`
	}
	if len(tx.Signature) > 0 {
		if err := json.Unmarshal(tx.Signature, &sig); err != nil {
			x.fail(f("signature"), "%v", err)
			return
		}
	}
	exp, err := parseU64(tx.ExpirationTimestampSecs)
	if err != nil || exp > math.MaxInt64/1_000_000 {
		x.fail(f("expiration_timestamp_secs"), "%q is not a time in seconds", tx.ExpirationTimestampSecs)
		return
	}
	tsus, err := parseU64(tx.Timestamp)
	if err != nil || tsus > math.MaxInt64 {
		x.fail(f("timestamp"), "%q is not a time in microseconds", tx.Timestamp)
		return
	}
	r := x.rows.Row(TableUserTransactions)
	r[colUserVersion] = version
	r[colUserBlockHeight] = height
	r[colUserSender] = x.addressOf(f("sender"), tx.Sender)
	r[colUserSequenceNumber] = x.int64Of(f("sequence_number"), tx.SequenceNumber)
	r[colUserMaxGasAmount] = x.numericOf(f("max_gas_amount"), tx.MaxGasAmount)
	r[colUserGasUnitPrice] = x.numericOf(f("gas_unit_price"), tx.GasUnitPrice)
	r[colUserExpiration] = time.Unix(int64(exp), 0)
	switch {
	case p.Function != "":
		r[colUserEntryFunction] = p.Function
	case p.Transaction != nil && p.Transaction.Function != "":
		r[colUserEntryFunction] = p.Transaction.Function
	}
	r[colUserPayloadType] = p.Type
	if js := x.jsonOf(tx.Payload); js != nil {
		r[colUserPayload] = js
	} else {
		x.fail(f("payload"), "missing")
	}
	r[colUserSignatureType] = sig.Type
	r[colUserTimestamp] = time.UnixMicro(int64(tsus))
}

func (x *decoding) event(e *Event, version, height any, j int, f func(string) string) {
	r := x.rows.Row(TableEvents)
	r[colEventVersion] = version
	r[colEventIndex] = x.rows.BoxInt32(int32(j))
	r[colEventBlockHeight] = height
	// A module event (AIP-44) has no handle: its guid is 0x0, creation
	// number 0, and so is its sequence number.
	module := e.GUID.CreationNumber == "0" && e.SequenceNumber == "0"
	if module {
		if a, err := ParseAddress(e.GUID.AccountAddress); err != nil || !bytes.Equal(a, make([]byte, 32)) {
			module = false
		}
	}
	if !module {
		r[colEventAccount] = x.addressOf(f("guid.account_address"), e.GUID.AccountAddress)
		r[colEventCreationNumber] = x.int64Of(f("guid.creation_number"), e.GUID.CreationNumber)
		r[colEventSequenceNumber] = x.int64Of(f("sequence_number"), e.SequenceNumber)
	}
	r[colEventType] = e.Type
	if js := x.jsonOf(e.Data); js != nil {
		r[colEventData] = js
	} else {
		x.fail(f("data"), "missing")
	}
}

func (x *decoding) change(c *Change, version, height any, j int, f func(string) string) {
	r := x.rows.Row(TableWriteSetChanges)
	r[colChangeVersion] = version
	r[colChangeIndex] = x.rows.BoxInt32(int32(j))
	r[colChangeBlockHeight] = height
	r[colChangeType] = c.Type
	r[colChangeStateKeyHash] = x.hashOf(f("state_key_hash"), c.StateKeyHash)
	if c.Address != "" {
		r[colChangeAddress] = x.addressOf(f("address"), c.Address)
	}
	switch c.Type {
	case "write_resource":
		var d struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(c.Data, &d); err != nil {
			x.fail(f("data"), "%v", err)
			return
		}
		r[colChangeResourceType] = d.Type
		r[colChangeData] = x.jsonOf(d.Data)
	case "delete_resource":
		r[colChangeResourceType] = c.Resource
	case "write_module":
		var d struct {
			ABI *struct {
				Address string `json:"address"`
				Name    string `json:"name"`
			} `json:"abi"`
		}
		if err := json.Unmarshal(c.Data, &d); err != nil {
			x.fail(f("data"), "%v", err)
			return
		}
		if d.ABI != nil {
			r[colChangeResourceType] = d.ABI.Address + "::" + d.ABI.Name
		}
		r[colChangeData] = x.jsonOf(c.Data)
	case "delete_module":
		r[colChangeResourceType] = c.Module
	case "write_table_item", "delete_table_item":
		r[colChangeHandle] = x.addressOf(f("handle"), c.Handle)
		var b bytes.Buffer
		b.WriteString(`{"key":`)
		writeJSON(&b, c.Key)
		if c.Type == "write_table_item" {
			b.WriteString(`,"value":`)
			writeJSON(&b, c.Value)
		}
		b.WriteString(`,"data":`)
		writeJSON(&b, c.Data)
		b.WriteByte('}')
		r[colChangeData] = x.bytes(b.Bytes())
	default:
		r[colChangeData] = x.jsonOf(c.Data)
	}
}

// writeJSON writes a JSON value, null for none.
func writeJSON(b *bytes.Buffer, js json.RawMessage) {
	if t := bytes.TrimSpace(js); len(t) > 0 {
		b.Write(t)
		return
	}
	b.WriteString("null")
}
