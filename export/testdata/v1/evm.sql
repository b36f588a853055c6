-- The tables of this family as blockhaul created them at commit aafd7a3, before schema versions were recorded.
CREATE TABLE IF NOT EXISTS {{schema}}."blocks" (
	"number" bigint NOT NULL,
	"hash" bytea NOT NULL,
	"parent_hash" bytea NOT NULL,
	"timestamp" timestamptz NOT NULL,
	"miner" bytea NOT NULL,
	"gas_limit" bigint NOT NULL,
	"gas_used" bigint NOT NULL,
	"base_fee_per_gas" numeric,
	"transaction_count" integer NOT NULL,
	"size" bigint,
	"extra_data" bytea,
	"nonce" bytea,
	"difficulty" numeric,
	"sha3_uncles" bytea,
	"logs_bloom" bytea,
	"state_root" bytea,
	"transactions_root" bytea,
	"receipts_root" bytea,
	"mix_hash" bytea,
	"withdrawals_root" bytea,
	"blob_gas_used" bigint,
	"excess_blob_gas" bigint,
	"parent_beacon_block_root" bytea,
	"requests_hash" bytea,
	PRIMARY KEY ("number")
);
CREATE INDEX IF NOT EXISTS "blocks_hash_idx" ON {{schema}}."blocks" (hash);
CREATE TABLE IF NOT EXISTS {{schema}}."transactions" (
	"block_number" bigint NOT NULL,
	"transaction_index" integer NOT NULL,
	"hash" bytea NOT NULL,
	"type" smallint NOT NULL,
	"nonce" bigint NOT NULL,
	"from_address" bytea NOT NULL,
	"to_address" bytea,
	"value" numeric NOT NULL,
	"input" bytea NOT NULL,
	"gas" bigint NOT NULL,
	"gas_price" numeric,
	"max_fee_per_gas" numeric,
	"max_priority_fee_per_gas" numeric,
	"max_fee_per_blob_gas" numeric,
	"blob_versioned_hashes" bytea[],
	"status" smallint,
	"gas_used" bigint NOT NULL,
	"cumulative_gas_used" bigint NOT NULL,
	"effective_gas_price" numeric,
	"contract_address" bytea,
	"blob_gas_used" bigint,
	"blob_gas_price" numeric,
	PRIMARY KEY ("block_number", "transaction_index")
);
CREATE INDEX IF NOT EXISTS "transactions_hash_idx" ON {{schema}}."transactions" (hash);
CREATE TABLE IF NOT EXISTS {{schema}}."logs" (
	"block_number" bigint NOT NULL,
	"log_index" integer NOT NULL,
	"transaction_index" integer NOT NULL,
	"transaction_hash" bytea NOT NULL,
	"address" bytea NOT NULL,
	"topic0" bytea,
	"topic1" bytea,
	"topic2" bytea,
	"topic3" bytea,
	"data" bytea NOT NULL,
	PRIMARY KEY ("block_number", "log_index")
);
CREATE INDEX IF NOT EXISTS "logs_address_idx" ON {{schema}}."logs" (address);
CREATE INDEX IF NOT EXISTS "logs_topic0_idx" ON {{schema}}."logs" (topic0);
