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
	return []chain.Table{TableBlocks: blocksTable(), TableTransactions: transactionsTable(), TableLogs: logsTable(), TableWithdrawals: withdrawalsTable()}
}

// Column constructors for the tables below.
func colBigint(n string) chain.Column             { return chain.Column{Name: n, Type: "bigint"} }
func colInteger(n string) chain.Column            { return chain.Column{Name: n, Type: "integer"} }
func colBytea(n string) chain.Column              { return chain.Column{Name: n, Type: "bytea"} }
func colNumeric(n string) chain.Column            { return chain.Column{Name: n, Type: "numeric"} }
func colNull(c chain.Column) chain.Column         { c.Null = true; return c }
func colSince(v int, c chain.Column) chain.Column { c.Since = v; return c }

func blocksTable() chain.Table {
	return chain.Table{
		Name:         "blocks",
		HeightColumn: "number",
		PrimaryKey:   []string{"number"},
		Columns: []chain.Column{
			colBlockNumber:           colBigint("number"),
			colBlockHash:             colBytea("hash"),
			colBlockParentHash:       colBytea("parent_hash"),
			colBlockTimestamp:        {Name: "timestamp", Type: "timestamptz"},
			colBlockMiner:            colBytea("miner"),
			colBlockGasLimit:         colBigint("gas_limit"),
			colBlockGasUsed:          colBigint("gas_used"),
			colBlockBaseFee:          colNull(colNumeric("base_fee_per_gas")),
			colBlockTxCount:          colInteger("transaction_count"),
			colBlockSize:             colNull(colBigint("size")),
			colBlockExtraData:        colNull(colBytea("extra_data")),
			colBlockNonce:            colNull(colBytea("nonce")),
			colBlockDifficulty:       colNull(colNumeric("difficulty")),
			colBlockSha3Uncles:       colNull(colBytea("sha3_uncles")),
			colBlockLogsBloom:        colNull(colBytea("logs_bloom")),
			colBlockStateRoot:        colNull(colBytea("state_root")),
			colBlockTxRoot:           colNull(colBytea("transactions_root")),
			colBlockReceiptsRoot:     colNull(colBytea("receipts_root")),
			colBlockMixHash:          colNull(colBytea("mix_hash")),
			colBlockWithdrawalsRoot:  colNull(colBytea("withdrawals_root")),
			colBlockBlobGasUsed:      colNull(colBigint("blob_gas_used")),
			colBlockExcessBlobGas:    colNull(colBigint("excess_blob_gas")),
			colBlockParentBeaconRoot: colNull(colBytea("parent_beacon_block_root")),
			colBlockRequestsHash:     colNull(colBytea("requests_hash")),
			colBlockTotalDifficulty:  colSince(2, colNull(colNumeric("total_difficulty"))), // where the node gives it (pre-merge clients)
		},
		Indexes: []chain.Index{
			{Name: "blocks_hash_idx", Columns: "(hash)", Minimal: true},
			{Name: "blocks_timestamp_idx", Columns: "USING brin (timestamp)"},
		},
	}
}

func transactionsTable() chain.Table {
	return chain.Table{
		Name:         "transactions",
		HeightColumn: "block_number",
		PrimaryKey:   []string{"block_number", "transaction_index"},
		Columns: []chain.Column{
			colTxBlockNumber:       colBigint("block_number"),
			colTxBlockTime:         {Name: "block_time", Type: "timestamptz", Since: 3}, // the block's timestamp, for time ranges without a join
			colTxIndex:             colInteger("transaction_index"),
			colTxHash:              colBytea("hash"),
			colTxType:              {Name: "type", Type: "smallint"},
			colTxNonce:             colBigint("nonce"),
			colTxFrom:              colBytea("from_address"),
			colTxTo:                colNull(colBytea("to_address")),
			colTxValue:             colNumeric("value"),
			colTxInput:             colBytea("input"),
			colTxGas:               colBigint("gas"),
			colTxGasPrice:          colNull(colNumeric("gas_price")),
			colTxMaxFee:            colNull(colNumeric("max_fee_per_gas")),
			colTxMaxPriorityFee:    colNull(colNumeric("max_priority_fee_per_gas")),
			colTxMaxFeePerBlobGas:  colNull(colNumeric("max_fee_per_blob_gas")),
			colTxBlobHashes:        {Name: "blob_versioned_hashes", Type: "bytea[]", Null: true},
			colTxStatus:            {Name: "status", Type: "smallint", Null: true},
			colTxGasUsed:           colBigint("gas_used"),
			colTxCumulativeGasUsed: colBigint("cumulative_gas_used"),
			colTxEffectiveGasPrice: colNull(colNumeric("effective_gas_price")),
			colTxContractAddress:   colNull(colBytea("contract_address")),
			colTxBlobGasUsed:       colNull(colBigint("blob_gas_used")),
			colTxBlobGasPrice:      colNull(colNumeric("blob_gas_price")),
			colTxRoot:              colSince(2, colNull(colBytea("root"))),
			colTxChainID:           colSince(4, colNull(colNumeric("chain_id"))), // absent from pre-EIP-155 legacy transactions
			colTxV:                 colSince(4, colNull(colNumeric("v"))),
			colTxR:                 colSince(4, colNull(colBytea("r"))), // 32 bytes, big-endian
			colTxS:                 colSince(4, colNull(colBytea("s"))),
			colTxYParity:           {Name: "y_parity", Type: "smallint", Null: true, Since: 4},
			colTxAccessList:        {Name: "access_list", Type: "jsonb", Null: true, Since: 4},        // as the node wrote it
			colTxAuthorizationList: {Name: "authorization_list", Type: "jsonb", Null: true, Since: 4}, // EIP-7702
			colTxLogsBloom:         colSince(4, colNull(colBytea("logs_bloom"))),                      // the receipt's
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
}

func logsTable() chain.Table {
	return chain.Table{
		Name:         "logs",
		HeightColumn: "block_number",
		PrimaryKey:   []string{"block_number", "log_index"},
		Columns: []chain.Column{
			colLogBlockNumber: colBigint("block_number"),
			colLogBlockTime:   {Name: "block_time", Type: "timestamptz", Since: 2},
			colLogIndex:       colInteger("log_index"),
			colLogTxIndex:     colInteger("transaction_index"),
			colLogTxHash:      colBytea("transaction_hash"),
			colLogAddress:     colBytea("address"),
			colLogTopic0:      colNull(colBytea("topic0")),
			colLogTopic1:      colNull(colBytea("topic1")),
			colLogTopic2:      colNull(colBytea("topic2")),
			colLogTopic3:      colNull(colBytea("topic3")),
			colLogData:        colBytea("data"),
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
}

// Withdrawals from the beacon chain (Shanghai on), one row per entry of
// a block's withdrawals list.
func withdrawalsTable() chain.Table {
	return chain.Table{
		Name:         "withdrawals",
		HeightColumn: "block_number",
		PrimaryKey:   []string{"block_number", "withdrawal_index"},
		Columns: []chain.Column{
			colWdBlockNumber:    colBigint("block_number"),
			colWdBlockTime:      {Name: "block_time", Type: "timestamptz"},
			colWdIndex:          colBigint("withdrawal_index"), // the withdrawal's own index, unique over the chain
			colWdValidatorIndex: colBigint("validator_index"),
			colWdAddress:        colBytea("address"),
			colWdAmount:         colBigint("amount"), // gwei
		},
		Indexes: []chain.Index{{Name: "withdrawals_address_idx", Columns: "(address)"}},
	}
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
