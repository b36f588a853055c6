-- The tables of this family as blockhaul created them at commit aafd7a3, before schema versions were recorded.
CREATE TABLE IF NOT EXISTS {{schema}}."blocks" (
	"height" bigint NOT NULL,
	"hash" bytea NOT NULL,
	"parent_hash" bytea,
	"time" timestamptz NOT NULL,
	"chain_id" text NOT NULL,
	"proposer_address" bytea NOT NULL,
	"num_txs" integer NOT NULL,
	"num_events" integer NOT NULL,
	"app_hash" bytea NOT NULL,
	"last_commit_hash" bytea NOT NULL,
	"data_hash" bytea NOT NULL,
	"validators_hash" bytea NOT NULL,
	"next_validators_hash" bytea NOT NULL,
	"consensus_hash" bytea NOT NULL,
	"last_results_hash" bytea NOT NULL,
	"evidence_hash" bytea NOT NULL,
	PRIMARY KEY ("height")
);
CREATE INDEX IF NOT EXISTS "blocks_hash_idx" ON {{schema}}."blocks" (hash);
CREATE TABLE IF NOT EXISTS {{schema}}."transactions" (
	"height" bigint NOT NULL,
	"tx_index" integer NOT NULL,
	"hash" bytea NOT NULL,
	"code" bigint NOT NULL,
	"codespace" text NOT NULL,
	"gas_wanted" bigint NOT NULL,
	"gas_used" bigint NOT NULL,
	"log" text NOT NULL,
	"info" text NOT NULL,
	"data" bytea NOT NULL,
	"tx" bytea NOT NULL,
	PRIMARY KEY ("height", "tx_index")
);
CREATE INDEX IF NOT EXISTS "transactions_hash_idx" ON {{schema}}."transactions" (hash);
CREATE TABLE IF NOT EXISTS {{schema}}."events" (
	"height" bigint NOT NULL,
	"event_index" integer NOT NULL,
	"tx_index" integer,
	"source" text NOT NULL,
	"type" text NOT NULL,
	"attributes" jsonb NOT NULL,
	PRIMARY KEY ("height", "event_index")
);
CREATE INDEX IF NOT EXISTS "events_type_idx" ON {{schema}}."events" (type);
