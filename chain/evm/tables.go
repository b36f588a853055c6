package evm

import "github.com/blockhaul/blockhaul/chain"

// Table positions in Tables() and Rows.
const (
	TableBlocks = iota
	TableTransactions
	TableLogs
	TableWithdrawals
)

// Column positions of the blocks table.
const (
	colBlockNumber = iota
	colBlockHash
	colBlockParentHash
	colBlockTimestamp
	colBlockMiner
	colBlockGasLimit
	colBlockGasUsed
	colBlockBaseFee
	colBlockTxCount
	colBlockSize
	colBlockExtraData
	colBlockNonce
	colBlockDifficulty
	colBlockSha3Uncles
	colBlockLogsBloom
	colBlockStateRoot
	colBlockTxRoot
	colBlockReceiptsRoot
	colBlockMixHash
	colBlockWithdrawalsRoot
	colBlockBlobGasUsed
	colBlockExcessBlobGas
	colBlockParentBeaconRoot
	colBlockRequestsHash
	colBlockTotalDifficulty
	numBlockCols
)

// Column positions of the transactions table.
const (
	colTxBlockNumber = iota
	colTxBlockTime
	colTxIndex
	colTxHash
	colTxType
	colTxNonce
	colTxFrom
	colTxTo
	colTxValue
	colTxInput
	colTxGas
	colTxGasPrice
	colTxMaxFee
	colTxMaxPriorityFee
	colTxMaxFeePerBlobGas
	colTxBlobHashes
	colTxStatus
	colTxGasUsed
	colTxCumulativeGasUsed
	colTxEffectiveGasPrice
	colTxContractAddress
	colTxBlobGasUsed
	colTxBlobGasPrice
	colTxRoot
	colTxChainID
	colTxV
	colTxR
	colTxS
	colTxYParity
	colTxAccessList
	colTxAuthorizationList
	colTxLogsBloom
	numTxCols
)

// Column positions of the logs table.
const (
	colLogBlockNumber = iota
	colLogBlockTime
	colLogIndex
	colLogTxIndex
	colLogTxHash
	colLogAddress
	colLogTopic0
	colLogTopic1
	colLogTopic2
	colLogTopic3
	colLogData
	numLogCols
)

// Column positions of the withdrawals table.
const (
	colWdBlockNumber = iota
	colWdBlockTime
	colWdIndex
	colWdValidatorIndex
	colWdAddress
	colWdAmount
	numWdCols
)

// Tables returns the export tables of the EVM family, in the order Decode
// fills them. Column names follow ethereum-etl where it has one
// (transaction_count, from_address, to_address, topic0..3); receipt fields
// are joined into transactions without a receipt_ prefix.
//
// Hashes and addresses are bytea; wei amounts, which exceed int64 routinely,
// are numeric; gas quantities are bigint. A column is nullable when a real
// chain can lack the field: a fork not yet active (base fee before London,
// blob gas before Cancun), a transaction type without it (max fees of
// legacy transactions), or a creation (to_address). A receipt has a status
// from Byzantium on, and before it the state root after the transaction
// (root; some providers synthesise a status beside it, kept as sent).
// timestamp is a timestamptz: it is what queries compare against, and there
// is one per block, so its encoding cost does not matter.
//
// Shape versions, per table (chain.Column.Since; export adds what an older
// database lacks): blocks 2 total_difficulty; transactions 2 root, 3
// block_time, 4 the signature, chain id, access and authorization lists and
// logs bloom; logs 2 block_time; withdrawals came whole.
func Tables() []chain.Table {
	bigint := func(n string) chain.Column { return chain.Column{Name: n, Type: "bigint"} }
	integer := func(n string) chain.Column { return chain.Column{Name: n, Type: "integer"} }
	bytea := func(n string) chain.Column { return chain.Column{Name: n, Type: "bytea"} }
	null := func(c chain.Column) chain.Column { c.Null = true; return c }
	since := func(v int, c chain.Column) chain.Column { c.Since = v; return c }
	numeric := func(n string) chain.Column { return chain.Column{Name: n, Type: "numeric"} }

	blocks := chain.Table{
		Name:         "blocks",
		HeightColumn: "number",
		PrimaryKey:   []string{"number"},
		Columns: []chain.Column{
			colBlockNumber:           bigint("number"),
			colBlockHash:             bytea("hash"),
			colBlockParentHash:       bytea("parent_hash"),
			colBlockTimestamp:        {Name: "timestamp", Type: "timestamptz"},
			colBlockMiner:            bytea("miner"),
			colBlockGasLimit:         bigint("gas_limit"),
			colBlockGasUsed:          bigint("gas_used"),
			colBlockBaseFee:          null(numeric("base_fee_per_gas")),
			colBlockTxCount:          integer("transaction_count"),
			colBlockSize:             null(bigint("size")),
			colBlockExtraData:        null(bytea("extra_data")),
			colBlockNonce:            null(bytea("nonce")),
			colBlockDifficulty:       null(numeric("difficulty")),
			colBlockSha3Uncles:       null(bytea("sha3_uncles")),
			colBlockLogsBloom:        null(bytea("logs_bloom")),
			colBlockStateRoot:        null(bytea("state_root")),
			colBlockTxRoot:           null(bytea("transactions_root")),
			colBlockReceiptsRoot:     null(bytea("receipts_root")),
			colBlockMixHash:          null(bytea("mix_hash")),
			colBlockWithdrawalsRoot:  null(bytea("withdrawals_root")),
			colBlockBlobGasUsed:      null(bigint("blob_gas_used")),
			colBlockExcessBlobGas:    null(bigint("excess_blob_gas")),
			colBlockParentBeaconRoot: null(bytea("parent_beacon_block_root")),
			colBlockRequestsHash:     null(bytea("requests_hash")),
			colBlockTotalDifficulty:  since(2, null(numeric("total_difficulty"))), // where the node gives it (pre-merge clients)
		},
		Indexes: []chain.Index{
			{Name: "blocks_hash_idx", Columns: "(hash)", Minimal: true},
			{Name: "blocks_timestamp_idx", Columns: "USING brin (timestamp)"},
		},
	}
	txs := chain.Table{
		Name:         "transactions",
		HeightColumn: "block_number",
		PrimaryKey:   []string{"block_number", "transaction_index"},
		Columns: []chain.Column{
			colTxBlockNumber:       bigint("block_number"),
			colTxBlockTime:         {Name: "block_time", Type: "timestamptz", Since: 3}, // the block's timestamp, for time ranges without a join
			colTxIndex:             integer("transaction_index"),
			colTxHash:              bytea("hash"),
			colTxType:              {Name: "type", Type: "smallint"},
			colTxNonce:             bigint("nonce"),
			colTxFrom:              bytea("from_address"),
			colTxTo:                null(bytea("to_address")),
			colTxValue:             numeric("value"),
			colTxInput:             bytea("input"),
			colTxGas:               bigint("gas"),
			colTxGasPrice:          null(numeric("gas_price")),
			colTxMaxFee:            null(numeric("max_fee_per_gas")),
			colTxMaxPriorityFee:    null(numeric("max_priority_fee_per_gas")),
			colTxMaxFeePerBlobGas:  null(numeric("max_fee_per_blob_gas")),
			colTxBlobHashes:        {Name: "blob_versioned_hashes", Type: "bytea[]", Null: true},
			colTxStatus:            {Name: "status", Type: "smallint", Null: true},
			colTxGasUsed:           bigint("gas_used"),
			colTxCumulativeGasUsed: bigint("cumulative_gas_used"),
			colTxEffectiveGasPrice: null(numeric("effective_gas_price")),
			colTxContractAddress:   null(bytea("contract_address")),
			colTxBlobGasUsed:       null(bigint("blob_gas_used")),
			colTxBlobGasPrice:      null(numeric("blob_gas_price")),
			colTxRoot:              since(2, null(bytea("root"))),
			colTxChainID:           since(4, null(numeric("chain_id"))), // absent from pre-EIP-155 legacy transactions
			colTxV:                 since(4, null(numeric("v"))),
			colTxR:                 since(4, null(bytea("r"))), // 32 bytes, big-endian
			colTxS:                 since(4, null(bytea("s"))),
			colTxYParity:           {Name: "y_parity", Type: "smallint", Null: true, Since: 4},
			colTxAccessList:        {Name: "access_list", Type: "jsonb", Null: true, Since: 4},        // as the node wrote it
			colTxAuthorizationList: {Name: "authorization_list", Type: "jsonb", Null: true, Since: 4}, // EIP-7702
			colTxLogsBloom:         since(4, null(bytea("logs_bloom"))),                               // the receipt's
		},
		Indexes: []chain.Index{
			{Name: "transactions_hash_idx", Columns: "(hash)", Minimal: true},
			// An address's transactions, newest first, without a sort.
			{Name: "transactions_from_idx", Columns: "(from_address, block_number)"},
			{Name: "transactions_to_idx", Columns: "(to_address, block_number)"},
			// Failed transactions are few: a partial index finds them
			// over any time range.
			{Name: "transactions_failed_idx", Columns: "(block_time) WHERE status = 0"},
			{Name: "transactions_block_time_idx", Columns: "USING brin (block_time)"},
		},
	}
	logs := chain.Table{
		Name:         "logs",
		HeightColumn: "block_number",
		PrimaryKey:   []string{"block_number", "log_index"},
		Columns: []chain.Column{
			colLogBlockNumber: bigint("block_number"),
			colLogBlockTime:   {Name: "block_time", Type: "timestamptz", Since: 2},
			colLogIndex:       integer("log_index"),
			colLogTxIndex:     integer("transaction_index"),
			colLogTxHash:      bytea("transaction_hash"),
			colLogAddress:     bytea("address"),
			colLogTopic0:      null(bytea("topic0")),
			colLogTopic1:      null(bytea("topic1")),
			colLogTopic2:      null(bytea("topic2")),
			colLogTopic3:      null(bytea("topic3")),
			colLogData:        bytea("data"),
		},
		Indexes: []chain.Index{
			{Name: "logs_address_idx", Columns: "(address, topic0, block_number)"}, // a contract's events of one kind, newest first
			{Name: "logs_topic0_idx", Columns: "(topic0)"},
			// Indexed event arguments: ERC-20/721 Transfer and Approval
			// carry from/owner in topic1 and to/spender in topic2.
			{Name: "logs_topic1_idx", Columns: "(topic1)"},
			{Name: "logs_topic2_idx", Columns: "(topic2)"},
			{Name: "logs_block_time_idx", Columns: "USING brin (block_time)"},
		},
	}
	// Withdrawals from the beacon chain (Shanghai on), one row per entry of
	// a block's withdrawals list.
	withdrawals := chain.Table{
		Name:         "withdrawals",
		HeightColumn: "block_number",
		PrimaryKey:   []string{"block_number", "withdrawal_index"},
		Columns: []chain.Column{
			colWdBlockNumber:    bigint("block_number"),
			colWdBlockTime:      {Name: "block_time", Type: "timestamptz"},
			colWdIndex:          bigint("withdrawal_index"), // the withdrawal's own index, unique over the chain
			colWdValidatorIndex: bigint("validator_index"),
			colWdAddress:        bytea("address"),
			colWdAmount:         bigint("amount"), // gwei
		},
		Indexes: []chain.Index{{Name: "withdrawals_address_idx", Columns: "(address)"}},
	}
	return []chain.Table{TableBlocks: blocks, TableTransactions: txs, TableLogs: logs, TableWithdrawals: withdrawals}
}

// Positions of the logs table's columns, for decoders that read the rows
// this one appends (chain/evm/events decodes them by ABI).
const (
	LogColBlockNumber = colLogBlockNumber
	LogColBlockTime   = colLogBlockTime
	LogColIndex       = colLogIndex
	LogColTxHash      = colLogTxHash
	LogColAddress     = colLogAddress
	LogColTopic0      = colLogTopic0
	LogColData        = colLogData
)
