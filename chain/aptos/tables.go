package aptos

import "github.com/blockhaul/blockhaul/chain"

// Table positions in Tables() and Rows.
const (
	TableBlocks = iota
	TableTransactions
	TableUserTransactions
	TableEvents
	TableWriteSetChanges
)

// Column positions of the blocks table.
const (
	colBlockHeight = iota
	colBlockHash
	colBlockParentHash
	colBlockTimestamp
	colBlockFirstVersion
	colBlockLastVersion
	colBlockEpoch
	colBlockRound
	colBlockProposer
	colBlockTxCount
	numBlockCols
)

// Column positions of the transactions table.
const (
	colTxVersion = iota
	colTxBlockHeight
	colTxHash
	colTxType
	colTxSuccess
	colTxVMStatus
	colTxGasUsed
	colTxStateChangeHash
	colTxEventRootHash
	colTxStateCheckpointHash
	colTxAccumulatorRootHash
	colTxTimestamp
	colTxNumEvents
	colTxNumChanges
	numTxCols
)

// Column positions of the user_transactions table.
const (
	colUserVersion = iota
	colUserBlockHeight
	colUserSender
	colUserSequenceNumber
	colUserMaxGasAmount
	colUserGasUnitPrice
	colUserExpiration
	colUserEntryFunction
	colUserPayloadType
	colUserPayload
	colUserSignatureType
	colUserTimestamp
	numUserCols
)

// Column positions of the events table.
const (
	colEventVersion = iota
	colEventIndex
	colEventBlockHeight
	colEventAccount
	colEventCreationNumber
	colEventSequenceNumber
	colEventType
	colEventData
	numEventCols
)

// Column positions of the write_set_changes table.
const (
	colChangeVersion = iota
	colChangeIndex
	colChangeBlockHeight
	colChangeType
	colChangeAddress
	colChangeStateKeyHash
	colChangeResourceType
	colChangeHandle
	colChangeData
	numChangeCols
)

// Tables returns the export tables of the Aptos family, in the order Decode
// fills them, after the Aptos indexer's default processors (its
// transactions, user_transactions, events and write_set_changes; blocks
// from its block metadata). docs/aptos.md describes every column.
//
// Versions and heights are bigint; gas amounts, u64 on the chain, are
// numeric (a u64 passes a bigint); times are timestamptz (microseconds, as
// the chain keeps them; expiration in seconds). Hashes are bytea of 32
// bytes; addresses bytea of 32 bytes, zero-extended on the left as the
// chain stores them ("0x1" is 31 zero bytes and 0x01). Payloads, event
// data and changes' data are jsonb, as the node rendered them.
func Tables() []chain.Table {
	bigint := func(n string) chain.Column { return chain.Column{Name: n, Type: "bigint"} }
	integer := func(n string) chain.Column { return chain.Column{Name: n, Type: "integer"} }
	bytea := func(n string) chain.Column { return chain.Column{Name: n, Type: "bytea"} }
	text := func(n string) chain.Column { return chain.Column{Name: n, Type: "text"} }
	numeric := func(n string) chain.Column { return chain.Column{Name: n, Type: "numeric"} }
	jsonb := func(n string) chain.Column { return chain.Column{Name: n, Type: "jsonb"} }
	timestamptz := func(n string) chain.Column { return chain.Column{Name: n, Type: "timestamptz"} }
	null := func(c chain.Column) chain.Column { c.Null = true; return c }

	blocks := chain.Table{
		Name:         "blocks",
		HeightColumn: "height",
		PrimaryKey:   []string{"height"},
		Columns: []chain.Column{
			colBlockHeight:       bigint("height"),
			colBlockHash:         bytea("hash"),
			colBlockParentHash:   null(bytea("parent_hash")), // the block before's, as the node named it; NULL at genesis
			colBlockTimestamp:    timestamptz("timestamp"),
			colBlockFirstVersion: bigint("first_version"),
			colBlockLastVersion:  bigint("last_version"),
			colBlockEpoch:        null(bigint("epoch")), // genesis has no metadata transaction
			colBlockRound:        null(bigint("round")),
			colBlockProposer:     null(bytea("proposer")),
			colBlockTxCount:      integer("transaction_count"),
		},
		Indexes: []chain.Index{
			{Name: "blocks_hash_idx", Columns: "(hash)", Minimal: true},
			{Name: "blocks_timestamp_idx", Columns: "USING brin (timestamp)"},
		},
	}
	txs := chain.Table{
		Name:         "transactions",
		HeightColumn: "block_height",
		PrimaryKey:   []string{"version"},
		Columns: []chain.Column{
			colTxVersion:             bigint("version"),
			colTxBlockHeight:         bigint("block_height"),
			colTxHash:                bytea("hash"),
			colTxType:                text("type"),
			colTxSuccess:             {Name: "success", Type: "boolean"},
			colTxVMStatus:            text("vm_status"),
			colTxGasUsed:             numeric("gas_used"),
			colTxStateChangeHash:     bytea("state_change_hash"),
			colTxEventRootHash:       bytea("event_root_hash"),
			colTxStateCheckpointHash: null(bytea("state_checkpoint_hash")),
			colTxAccumulatorRootHash: bytea("accumulator_root_hash"),
			colTxTimestamp:           timestamptz("timestamp"), // the block's
			colTxNumEvents:           integer("num_events"),
			colTxNumChanges:          integer("num_write_set_changes"),
		},
		Indexes: []chain.Index{
			{Name: "transactions_hash_idx", Columns: "(hash)", Minimal: true},
			{Name: "transactions_block_height_idx", Columns: "USING brin (block_height)"},
		},
	}
	users := chain.Table{
		Name:         "user_transactions",
		HeightColumn: "block_height",
		PrimaryKey:   []string{"version"},
		Columns: []chain.Column{
			colUserVersion:        bigint("version"),
			colUserBlockHeight:    bigint("block_height"),
			colUserSender:         bytea("sender"),
			colUserSequenceNumber: bigint("sequence_number"),
			colUserMaxGasAmount:   numeric("max_gas_amount"),
			colUserGasUnitPrice:   numeric("gas_unit_price"),
			colUserExpiration:     timestamptz("expiration_timestamp_secs"),
			colUserEntryFunction:  null(text("entry_function_id")), // address::module::function of an entry function (or multisig) payload
			colUserPayloadType:    text("payload_type"),
			colUserPayload:        jsonb("payload"),
			colUserSignatureType:  text("signature_type"),
			colUserTimestamp:      timestamptz("timestamp"),
		},
		Indexes: []chain.Index{
			// An account's transactions in order.
			{Name: "user_transactions_sender_idx", Columns: "(sender, sequence_number)"},
			{Name: "user_transactions_entry_function_idx", Columns: "(entry_function_id, version)"},
			{Name: "user_transactions_block_height_idx", Columns: "USING brin (block_height)"},
		},
	}
	events := chain.Table{
		Name:         "events",
		HeightColumn: "block_height",
		PrimaryKey:   []string{"version", "event_index"},
		Columns: []chain.Column{
			colEventVersion:        bigint("version"),
			colEventIndex:          integer("event_index"),
			colEventBlockHeight:    bigint("block_height"),
			colEventAccount:        null(bytea("account_address")), // handle events; NULL for module events
			colEventCreationNumber: null(bigint("creation_number")),
			colEventSequenceNumber: null(bigint("sequence_number")),
			colEventType:           text("type"),
			colEventData:           jsonb("data"),
		},
		Indexes: []chain.Index{
			{Name: "events_type_idx", Columns: "(type, version)"},
			{Name: "events_handle_idx", Columns: "(account_address, creation_number, sequence_number)"},
			{Name: "events_block_height_idx", Columns: "USING brin (block_height)"},
		},
	}
	changes := chain.Table{
		Name:         "write_set_changes",
		HeightColumn: "block_height",
		PrimaryKey:   []string{"version", "change_index"},
		Columns: []chain.Column{
			colChangeVersion:      bigint("version"),
			colChangeIndex:        integer("change_index"),
			colChangeBlockHeight:  bigint("block_height"),
			colChangeType:         text("type"),
			colChangeAddress:      null(bytea("address")), // NULL for table items
			colChangeStateKeyHash: bytea("state_key_hash"),
			colChangeResourceType: null(text("resource_type")), // a resource's type, or a module's address::name
			colChangeHandle:       null(bytea("handle")),       // a table item's table handle
			colChangeData:         null(jsonb("data")),
		},
		Indexes: []chain.Index{
			{Name: "write_set_changes_block_height_idx", Columns: "USING brin (block_height)"},
		},
	}
	return []chain.Table{TableBlocks: blocks, TableTransactions: txs, TableUserTransactions: users, TableEvents: events, TableWriteSetChanges: changes}
}
