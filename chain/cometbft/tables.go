package cometbft

import "github.com/blockhaul/blockhaul/chain"

// Table indexes in the order Decoder.Tables returns them.
const (
	tableBlocks = iota
	tableTransactions
	tableEvents
	tableCommitSignatures
	tableValidatorUpdates
	tableConsensusParamUpdates
	tableMessages
)

// Column positions of each table, in COPY order. They must follow the
// Columns lists below.
const (
	bHeight = iota
	bHash
	bParentHash
	bTime
	bChainID
	bProposer
	bNumTxs
	bNumEvents
	bAppHash
	bLastCommitHash
	bDataHash
	bValidatorsHash
	bNextValidatorsHash
	bConsensusHash
	bLastResultsHash
	bEvidenceHash
	bWidth
)

const (
	tHeight = iota
	tBlockTime
	tIndex
	tHash
	tCode
	tCodespace
	tGasWanted
	tGasUsed
	tLog
	tInfo
	tData
	tTx
	tMemo
	tFee
	tGasLimit
	tFeePayer
	tFeeGranter
	tSigners
	tWidth
)

const (
	eHeight = iota
	eBlockTime
	eIndex
	eTxIndex
	eTxHash
	eSource
	eType
	eAttributes
	eWidth
)

const (
	csHeight = iota
	csBlockTime
	csSignedHeight
	csIndex
	csFlag
	csAddress
	csTimestamp
	csWidth
)

const (
	vuHeight = iota
	vuBlockTime
	vuIndex
	vuKeyType
	vuKey
	vuAddress
	vuPower
	vuWidth
)

const (
	cpHeight = iota
	cpBlockTime
	cpParams
	cpWidth
)

const (
	mHeight = iota
	mBlockTime
	mTxIndex
	mIndex
	mTypeURL
	mValue
	mDecoded
	mWidth
)

// Event sources, as stored in events.source.
const (
	SourceBeginBlock    = "begin_block"
	SourceTx            = "tx"
	SourceEndBlock      = "end_block"
	SourceFinalizeBlock = "finalize_block"
)

// Tables are the CometBFT export tables. Hashes and addresses are bytea in
// raw bytes (CometBFT prints them as uppercase hex).
//
// events.attributes is a jsonb array with one [key, value, index] array
// per attribute, in emission order, keys and values decoded to plain text
// whatever the node version, e.g.
//
//	[["spender","cosmos1…",true],["amount","5000uatom",true]]
//
// Each key stays with its value, and containment finds events by attribute:
// attributes @> '[["sender","cosmos1…"]]', which the GIN (jsonb_path_ops)
// index events_attributes_idx serves (the largest index of the schema:
// --indexes minimal leaves it out). Containment ignores order inside the pair; a->>0 = 'sender'
// AND a->>1 = '…' over jsonb_array_elements is the exact test. BenchmarkAttributesCopy chose
// this form over {"key","value","index"} objects (about 30% slower to COPY,
// 25% larger) and over key/value/index text[]/boolean[] columns (within 10%
// as fast, 10% larger, and the pairs come apart); its comment has the
// numbers.
//
// Shape versions, per table (chain.Column.Since; export adds what an older
// database lacks): transactions 2 block_time, 3 memo, fee, gas_limit,
// fee_payer, fee_granter, signers; events 2 block_time, 3 tx_hash; the
// tables after events came whole.
var tables = []chain.Table{
	{
		Name: "blocks",
		Columns: []chain.Column{
			{Name: "height", Type: "bigint"},
			{Name: "hash", Type: "bytea"},
			{Name: "parent_hash", Type: "bytea", Null: true}, // null for the chain's first block
			{Name: "time", Type: "timestamptz"},
			{Name: "chain_id", Type: "text"},
			{Name: "proposer_address", Type: "bytea"},
			{Name: "num_txs", Type: "integer"},
			{Name: "num_events", Type: "integer"},
			{Name: "app_hash", Type: "bytea"}, // state after the previous block
			{Name: "last_commit_hash", Type: "bytea"},
			{Name: "data_hash", Type: "bytea"},
			{Name: "validators_hash", Type: "bytea"},
			{Name: "next_validators_hash", Type: "bytea"},
			{Name: "consensus_hash", Type: "bytea"},
			{Name: "last_results_hash", Type: "bytea"},
			{Name: "evidence_hash", Type: "bytea"},
		},
		PrimaryKey:   []string{"height"},
		HeightColumn: "height",
		Indexes:      []chain.Index{{Name: "blocks_hash_idx", Columns: "(hash)", Minimal: true}},
	},
	{
		Name: "transactions",
		Columns: []chain.Column{
			{Name: "height", Type: "bigint"},
			{Name: "block_time", Type: "timestamptz", Since: 2}, // the block's header.time, for time ranges without a join
			{Name: "tx_index", Type: "integer"},
			{Name: "hash", Type: "bytea"}, // SHA-256 of tx, CometBFT's tx hash
			// code is a uint32 in ABCI: bigint, not integer, so that no
			// code a chain can return fails the COPY.
			{Name: "code", Type: "bigint"},
			{Name: "codespace", Type: "text"},
			{Name: "gas_wanted", Type: "bigint"},
			{Name: "gas_used", Type: "bigint"},
			{Name: "log", Type: "text"},
			{Name: "info", Type: "text"},
			{Name: "data", Type: "bytea"},
			{Name: "tx", Type: "bytea"},
			// Read from the tx bytes when they are a Cosmos SDK tx (see
			// sdktx.go); NULL for any other tx, such as the kvstore app's.
			{Name: "memo", Type: "text", Null: true, Since: 3},
			{Name: "fee", Type: "jsonb", Null: true, Since: 3},        // [{"denom":"uatom","amount":"5000"}], amounts as strings
			{Name: "gas_limit", Type: "bigint", Null: true, Since: 3}, // Fee.gas_limit; NULL too above the bigint range
			{Name: "fee_payer", Type: "text", Null: true, Since: 3},   // Fee.payer, else the first signer
			{Name: "fee_granter", Type: "text", Null: true, Since: 3},
			{Name: "signers", Type: "text[]", Null: true, Since: 3}, // bech32, one per signer_infos entry
		},
		PrimaryKey:   []string{"height", "tx_index"},
		HeightColumn: "height",
		Facts: []chain.Fact{{
			Query: "SELECT count(*), '' FROM %s WHERE array_position(signers, NULL) IS NOT NULL",
			Line:  "transactions: %d with a signer whose address is not known%s (a multisig key, or no bech32 prefix learnt: --bech32-prefix, then export --replay transactions)",
		}},
		Indexes: []chain.Index{
			{Name: "transactions_hash_idx", Columns: "(hash)", Minimal: true},
			// Failed transactions are few: a partial index finds them
			// over any time range.
			{Name: "transactions_failed_idx", Columns: "(block_time) WHERE code <> 0"},
			{Name: "transactions_block_time_idx", Columns: "USING brin (block_time)"},
		},
	},
	{
		Name: "events",
		Columns: []chain.Column{
			{Name: "height", Type: "bigint"},
			{Name: "block_time", Type: "timestamptz", Since: 2},
			// Position within the block over all its events: begin_block,
			// then each tx's in tx order, then end_block, then
			// finalize_block.
			{Name: "event_index", Type: "integer"},
			{Name: "tx_index", Type: "integer", Null: true},        // null for block-level events
			{Name: "tx_hash", Type: "bytea", Null: true, Since: 3}, // the tx's hash; null for block-level events
			{Name: "source", Type: "text"},
			{Name: "type", Type: "text"},
			{Name: "attributes", Type: "jsonb"},
		},
		PrimaryKey:   []string{"height", "event_index"},
		HeightColumn: "height",
		Indexes: []chain.Index{
			{Name: "events_type_idx", Columns: "(type)"},
			// Containment of [key, value] pairs: attributes @> '[["sender","cosmos1…"]]'.
			{Name: "events_attributes_idx", Columns: "USING gin (attributes jsonb_path_ops)"},
			{Name: "events_block_time_idx", Columns: "USING brin (block_time)"},
		},
	},
	{
		// The signatures of block.last_commit: the votes that committed the
		// block before (signed_height = height - 1), one row per member of
		// that block's validator set, absent validators included, for
		// uptime queries. The signature bytes stay in the raw record.
		Name: "commit_signatures",
		Columns: []chain.Column{
			{Name: "height", Type: "bigint"}, // the block that carries the commit
			{Name: "block_time", Type: "timestamptz"},
			{Name: "signed_height", Type: "bigint"}, // the block the signatures sign: last_commit.height
			// Position in the commit, which is the validator's index in the
			// validator set of signed_height: the only name an absent
			// validator has in the commit.
			{Name: "validator_index", Type: "integer"},
			{Name: "block_id_flag", Type: "integer"},               // 1 absent, 2 commit, 3 nil
			{Name: "validator_address", Type: "bytea", Null: true}, // null when absent
			{Name: "timestamp", Type: "timestamptz", Null: true},   // the vote's time; null when absent
		},
		PrimaryKey:   []string{"height", "validator_index"},
		HeightColumn: "height",
		Indexes:      []chain.Index{{Name: "commit_signatures_address_idx", Columns: "(validator_address, signed_height)"}},
	},
	{
		// block_results.validator_updates: the changes of the validator set
		// the application returned at the end of this block (EndBlock up to
		// 0.37, FinalizeBlock from 0.38); CometBFT applies them at height+2.
		// Power 0 removes the validator.
		Name: "validator_updates",
		Columns: []chain.Column{
			{Name: "height", Type: "bigint"},
			{Name: "block_time", Type: "timestamptz"},
			{Name: "update_index", Type: "integer"},
			{Name: "pub_key_type", Type: "text"}, // ed25519, secp256k1, bls12_381; other names as the node prints them
			{Name: "pub_key", Type: "bytea"},
			// CometBFT's validator address of the key, as in
			// commit_signatures.validator_address and
			// blocks.proposer_address; null for a key type it is not known for.
			{Name: "address", Type: "bytea", Null: true},
			{Name: "power", Type: "bigint"},
		},
		PrimaryKey:   []string{"height", "update_index"},
		HeightColumn: "height",
	},
	{
		// block_results.consensus_param_updates, as the node prints it
		// (strings cleaned as every jsonb value is), one row per block that
		// has them. Cosmos SDK 0.50 chains return the whole parameter set in
		// every block; older ones only when it changes.
		Name: "consensus_param_updates",
		Columns: []chain.Column{
			{Name: "height", Type: "bigint"},
			{Name: "block_time", Type: "timestamptz"},
			{Name: "params", Type: "jsonb"},
		},
		PrimaryKey:   []string{"height"},
		HeightColumn: "height",
	},
	{
		// The messages of each Cosmos SDK tx (TxBody.messages), in order.
		// value is the Any's bytes as the tx holds them; decoded is their
		// protojson JSON (protodec) for every type the descriptors know:
		// the Cosmos SDK's and ibc-go's built in, plus --proto and
		// --proto-descriptors; NULL for any other type and for bytes that
		// do not read as their type (docs/messages.md).
		Name: "messages",
		Columns: []chain.Column{
			{Name: "height", Type: "bigint"},
			{Name: "block_time", Type: "timestamptz"},
			{Name: "tx_index", Type: "integer"},
			{Name: "msg_index", Type: "integer"},
			{Name: "type_url", Type: "text"},
			{Name: "value", Type: "bytea"},
			{Name: "decoded", Type: "jsonb", Null: true},
		},
		PrimaryKey:   []string{"height", "tx_index", "msg_index"},
		HeightColumn: "height",
		Facts: []chain.Fact{{
			Query: `SELECT coalesce(sum(n), 0)::bigint, count(*) || ' types' || coalesce(': ' || string_agg(type_url || ' (' || n || ')', ', ' ORDER BY n DESC, type_url)
				FILTER (WHERE rank <= 5), '') || CASE WHEN count(*) > 5 THEN ', …' ELSE '' END
				FROM (SELECT type_url, count(*) AS n, row_number() OVER (ORDER BY count(*) DESC, type_url) AS rank FROM %s WHERE decoded IS NULL GROUP BY type_url) t`,
			Line: "messages: %d not decoded, of %s (add their .proto files with --proto, then export --replay messages)",
		}},
		Indexes: []chain.Index{
			{Name: "messages_type_url_idx", Columns: "(type_url)"},
			{Name: "messages_block_time_idx", Columns: "USING brin (block_time)"},
		},
	},
}
