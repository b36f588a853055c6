package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/pipeline"
	"github.com/spf13/pflag"
)

// This file is the one place where blockhaul's flags are defined: each
// flag's name, default, help text, the group its help lists it under, the
// commands that use it, and what shell completion offers as its value.
// Every command accepts every flag (scripts and Kubernetes manifests share
// flag sets between commands); a command's help and completion show only
// those it uses, and a flag it does not use draws a warning and is ignored
// (its value is never set; see lenientValue), as its variable is.

// Help groups, in the order a command's help lists them.
const (
	groupSource   = "Chain and source"
	groupRange    = "Range"
	groupStaging  = "Staging"
	groupDatabase = "PostgreSQL"
	groupFetch    = "Fetch"
	groupExport   = "Export"
	groupFollow   = "Follow"
	groupReport   = "Checks and reports"
	groupWatch    = "Watching and logs"
)

var flagGroups = []string{groupSource, groupRange, groupStaging, groupDatabase, groupFetch, groupExport, groupFollow, groupReport, groupWatch}

const (
	cmdRun      = pipeline.CmdRun
	cmdFetch    = pipeline.CmdFetch
	cmdExport   = pipeline.CmdExport
	cmdFollow   = pipeline.CmdFollow
	cmdMerge    = pipeline.CmdMerge
	cmdStatus   = pipeline.CmdStatus
	cmdChecksum = pipeline.CmdChecksum
	cmdVerify   = pipeline.CmdVerify
	cmdRepair   = pipeline.CmdRepair
	cmdPrune    = pipeline.CmdPrune
	cmdSnapshot = pipeline.CmdSnapshot
	cmdRestore  = pipeline.CmdRestore
	cmdPublish  = pipeline.CmdPublish
	cmdEstimate = pipeline.CmdEstimate
)

// Commands by what they do, for the flags they share.
var (
	sourcing  = []string{cmdRun, cmdFetch, cmdFollow, cmdRepair} // build a block source (RPC or synthetic)
	exporting = []string{cmdRun, cmdExport, cmdFollow}           // COPY into PostgreSQL
	staged    = []string{cmdRun, cmdFetch, cmdExport, cmdFollow} // the jobs: --http, progress
	ranged    = []string{cmdRun, cmdFetch, cmdExport, cmdFollow, cmdMerge, cmdStatus, cmdChecksum, cmdVerify, cmdRepair, cmdPublish, cmdEstimate}
	onPG      = []string{cmdRun, cmdExport, cmdFollow, cmdStatus, cmdChecksum, cmdVerify, cmdEstimate}
	reporting = []string{cmdChecksum, cmdVerify, cmdRepair, cmdPrune, cmdSnapshot, cmdRestore, cmdPublish, cmdEstimate}
	every     = pipeline.Commands
)

// use is where a flag belongs: its help group, the commands that use it,
// what some of them do with it where that differs from the flag's usage,
// and, where its values are few, what completion offers.
type use struct {
	group  string
	cmds   []string
	says   map[string]saying
	values func(cfg *pipeline.Config, prefix string) []string
}

// saying is what one command does with a flag, in its help.
type saying struct {
	usage string
	// noDefault: the usage says in words what the command does without
	// the flag, and the flag's default value is not that (--from on
	// verify: the lowest staged height, not 1).
	noDefault bool
}

// saying gives the help of cmds for the flag: what those commands do with
// it, in place of the flag's usage.
func (u use) saying(usage string, cmds ...string) use {
	return u.say(saying{usage: usage}, cmds)
}

// sayingNoDefault is saying for a usage that says what the commands do
// without the flag; their help shows no default value.
func (u use) sayingNoDefault(usage string, cmds ...string) use {
	return u.say(saying{usage: usage, noDefault: true}, cmds)
}

func (u use) say(s saying, cmds []string) use {
	says := maps.Clone(u.says)
	if says == nil {
		says = map[string]saying{}
	}
	for _, c := range cmds {
		says[c] = s
	}
	u.says = says
	return u
}

func in(group string, cmds ...[]string) use {
	return use{group: group, cmds: slices.Concat(cmds...)}
}

// oneOf offers a fixed list of values to shell completion.
func (u use) oneOf(values ...string) use {
	u.values = func(*pipeline.Config, string) []string { return values }
	return u
}

// tableList offers the tables of the family --chain names, for a flag
// whose value is a comma-separated list of them, each maybe with a leading
// - (--tables): after the names already typed, each one not yet listed.
func (u use) tableList() use {
	u.values = func(cfg *pipeline.Config, prefix string) []string {
		cut := strings.LastIndex(prefix, ",") + 1
		typed, last := prefix[:cut], prefix[cut:]
		minus := ""
		if strings.HasPrefix(last, "-") {
			minus = "-"
		}
		listed := map[string]bool{}
		for _, item := range strings.Split(typed, ",") {
			listed[strings.TrimPrefix(strings.TrimSpace(item), "-")] = true
		}
		var out []string
		for _, name := range tableNames(cfg) {
			if !listed[name] {
				out = append(out, typed+minus+name)
			}
		}
		return out
	}
	return u
}

// Flag annotations carrying a use (pflag keeps them beside the flag).
const (
	annGroup = "blockhaul_group"
	annCmds  = "blockhaul_commands"
	annSays  = "blockhaul_says_" // + command: [usage] or [usage, "no-default"]
)

// flagDefs collects, while the flags are defined, the completion of each
// flag whose values are few.
type flagDefs struct {
	fs     *pflag.FlagSet
	values map[string]func(cfg *pipeline.Config, prefix string) []string
}

func (d *flagDefs) mark(name string, u use) {
	_ = d.fs.SetAnnotation(name, annGroup, []string{u.group})
	_ = d.fs.SetAnnotation(name, annCmds, u.cmds)
	for cmd, say := range u.says {
		v := []string{say.usage}
		if say.noDefault {
			v = append(v, "no-default")
		}
		_ = d.fs.SetAnnotation(name, annSays+cmd, v)
	}
	if u.values != nil {
		d.values[name] = u.values
	}
}

// def defines a flag through one of pflag's typed XxxVar methods.
func def[T any](d *flagDefs, bind func(p *T, name string, value T, usage string), p *T, name string, value T, usage string, u use) *pflag.Flag {
	bind(p, name, value, usage)
	d.mark(name, u)
	return d.fs.Lookup(name)
}

// defValue defines a flag of a pflag.Value of blockhaul's own.
func defValue(d *flagDefs, v pflag.Value, name, usage string, u use) *pflag.Flag {
	d.fs.Var(v, name, usage)
	d.mark(name, u)
	return d.fs.Lookup(name)
}

// processFlags are the flags that set the process up rather than the job.
type processFlags struct {
	memLimit int64
}

// defineFlags defines every flag on fs, bound to cfg (from the defaults of
// pipeline.DefaultConfig) and proc. It returns the completion of each flag
// whose values are few.
func defineFlags(fs *pflag.FlagSet, cfg *pipeline.Config, proc *processFlags) map[string]func(*pipeline.Config, string) []string {
	d := &flagDefs{fs: fs, values: map[string]func(*pipeline.Config, string) []string{}}
	dc := pipeline.DefaultConfig()
	fs.SortFlags = false

	defineSourceFlags(d, fs, cfg, dc)
	defineRangeFlags(d, fs, cfg, dc)
	defineStagingFlags(d, fs, cfg, dc)
	defineDatabaseFlags(d, fs, cfg, dc)
	defineFetchFlags(d, fs, cfg, dc)
	defineExportFlags(d, fs, cfg, dc)
	defineFollowFlags(d, fs, cfg, dc)
	defineReportFlags(d, fs, cfg, dc)
	defineWatchFlags(d, fs, cfg, dc, proc)
	return d.values
}

// defineSourceFlags defines the flags of the source: where blocks come from.
func defineSourceFlags(d *flagDefs, fs *pflag.FlagSet, cfg *pipeline.Config, dc pipeline.Config) {
	def(d, fs.StringVar, &cfg.Chain, "chain", dc.Chain, "chain family: "+strings.Join(family.Names(), " or "),
		in(groupSource, sourcing, onPG, []string{cmdExport}).oneOf(family.Names()...))
	defValue(d, &rpcList{urls: &cfg.RPC}, "rpc", "RPC endpoint URL(s), comma separated; without --rpc or --node-home, the synthetic chain", in(groupSource, sourcing, []string{cmdEstimate}).
		saying("RPC endpoint URL(s), comma separated: estimate fetches from them for a few seconds (nothing staged) and plans the fetch at the rate they gave; without it the fetch rate is assumed", cmdEstimate))
	def(d, fs.StringVar, &cfg.NodeHome, "node-home", "", "a stopped CometBFT node's home directory (config/, data/): read its blocks and results from its own databases, read-only, instead of its RPC (not with --rpc; see docs/sources.md)",
		in(groupSource, sourcing)) // follow takes it to refuse it: ignored, follow would read the synthetic chain
	def(d, fs.StringVar, &cfg.Archive, "archive", "", "a published chunk archive (blockhaul publish): a directory, file://, s3://, gs://, azblob:// or http(s):// URL of the chain's folder; its chunks are read, checked against the manifest and verified instead of asking a node (not with --rpc or --node-home; see docs/format/archive.md)",
		in(groupSource, sourcing)) // follow takes it to refuse it, as --node-home
	def(d, fs.Float64Var, &cfg.RPS, "rps", 0, "requests per second per RPC endpoint (0: unlimited)", in(groupSource, sourcing, []string{cmdEstimate}))
	def(d, fs.DurationVar, &cfg.RPCTimeout, "rpc-timeout", dc.RPCTimeout, "timeout of one RPC request", in(groupSource, sourcing, []string{cmdEstimate}))
	def(d, fs.DurationVar, &cfg.RPCDownAfter, "rpc-down-after", dc.RPCDownAfter, "a fetch whose source serves nothing, every span failing, waits this long for it before it fails (a span failing on its own fails after its retries)", in(groupSource, sourcing))
	def(d, fs.Int64Var, &cfg.SyntheticSeed, "synthetic-seed", dc.SyntheticSeed, "seed of the synthetic chain", in(groupSource, sourcing))
	def(d, fs.Uint64Var, &cfg.SyntheticTip, "synthetic-tip", 0, "tip height of the synthetic chain (0: --to plus --confirmations when --to is given, else 10000)", in(groupSource, sourcing))
	def(d, fs.Float64Var, &cfg.SyntheticTxs, "synthetic-txs", 0, "mean transactions per synthetic block (0: the family's mainnet-like default: cometbft 4.5, evm 150 with 400 logs)", in(groupSource, sourcing))
	def(d, fs.IntVar, &cfg.SyntheticValidators, "synthetic-validators", 0, "cometbft: validators of the synthetic chain, which sign its commits (0: 4)", in(groupSource, sourcing))
	def(d, fs.BoolVar, &cfg.SyntheticSteady, "synthetic-steady", false, "every synthetic block at the mean density (cometbft: no quiet stretches or bursts)", in(groupSource, sourcing))
	def(d, fs.DurationVar, &cfg.SyntheticBlockTime, "synthetic-block-time", 0, "the synthetic chain grows by one block each this long, from --synthetic-tip (else --from) when the job starts (0: a fixed tip)", in(groupSource, sourcing))
	def(d, fs.Uint64Var, &cfg.SyntheticReorgEvery, "synthetic-reorg-every", 0, "the synthetic chain reorganises each time its tip reaches a multiple of this, replacing the --synthetic-reorg-depth blocks below it (0: never)", in(groupSource, sourcing))
	def(d, fs.Uint64Var, &cfg.SyntheticReorgDepth, "synthetic-reorg-depth", dc.SyntheticReorgDepth, "blocks each synthetic reorg replaces", in(groupSource, sourcing))
}

// defineRangeFlags defines the flags of the range and the backfill alias.
func defineRangeFlags(d *flagDefs, fs *pflag.FlagSet, cfg *pipeline.Config, dc pipeline.Config) {
	def(d, fs.Uint64Var, &cfg.From, "from", dc.From, "first height (inclusive); without it, the chain's first block: cometbft 1, evm 0 (its genesis)",
		in(groupRange, ranged, []string{cmdRestore}).
			saying("first height of the sharded fetch's range (with --shards and --to: each shard's snapshot must hold its slice; a fetch from evm 0, its genesis, is held by the default 1's slices too)", cmdRestore).
			sayingNoDefault("first height copied from --merge-from; default: the lowest it holds", cmdMerge).
			sayingNoDefault("first height whose staged ranges and gaps are shown; default: the lowest staged, or with --to the chain's first block (cometbft 1, evm 0)", cmdStatus).
			sayingNoDefault("first height whose exported rows are digested; default: the lowest exported", cmdChecksum).
			sayingNoDefault("first height checked, in staging and with --pg in PostgreSQL; default: the lowest staged", cmdVerify).
			sayingNoDefault("first height checked and refetched where missing or wrong; default: the lowest staged", cmdRepair).
			saying("first height published: the chain's first block unless given (cometbft 1, evm 0); a chunk is published only when every height of it is staged and in the range", cmdPublish))
	to := def(d, fs.Uint64Var, &cfg.To, "to", 0, "last height (inclusive); default: the chain tip",
		in(groupRange, ranged, []string{cmdRestore}).
			saying("last height of the sharded fetch's range (with --shards): each shard's snapshot is waited for until it holds its slice; default: any finished snapshot", cmdRestore).
			saying("last height exported; default: the end of what is staged without a gap from --from", cmdExport).
			saying("stop once this height is exported; default: never, follow runs until stopped", cmdFollow).
			saying("last height copied from --merge-from; default: the highest it holds", cmdMerge).
			saying("last height whose staged ranges and gaps are shown; default: the highest staged", cmdStatus).
			saying("last height whose exported rows are digested; default: the highest exported", cmdChecksum).
			saying("last height checked, in staging and with --pg in PostgreSQL; default: the highest staged", cmdVerify).
			saying("last height checked and refetched where missing or wrong; default: the highest staged", cmdRepair).
			saying("last height of the range estimated (required)", cmdEstimate).
			saying("last height published; default: the highest staged (a chunk not full is not published)", cmdPublish))
	to.DefValue = "" // not 0, which is no valid end of a range from 1
	def(d, fs.StringVar, &cfg.Alias, "alias", "", "name of this backfill (default: range-FROM-TO)", in(groupRange, []string{cmdRun, cmdExport, cmdFollow}))
}

// defineStagingFlags defines the flags of the staging directories.
func defineStagingFlags(d *flagDefs, fs *pflag.FlagSet, cfg *pipeline.Config, dc pipeline.Config) {
	def(d, fs.StringVar, &cfg.Staging, "staging", dc.Staging, "staging directory", in(groupStaging, without(every, cmdChecksum)).
		saying("staging directory the blocks are fetched into", cmdRun, cmdFetch, cmdFollow).
		saying("staging directory the blocks are exported from", cmdExport).
		saying("staging directory the blocks of --merge-from are copied into", cmdMerge).
		saying("staging directory shown", cmdStatus).
		saying("staging directory checked", cmdVerify).
		saying("staging directory repaired", cmdRepair).
		saying("staging directory whose heights below --below are deleted", cmdPrune).
		saying("staging directory copied to DEST", cmdSnapshot).
		saying("staging directory whose staged blocks are published to DEST (no job may hold it)", cmdPublish).
		saying("directory the snapshot is restored into: new, or empty", cmdRestore).
		saying("staging directory a job would fetch into: its bytes per block, and its filesystem's room", cmdEstimate))
	def(d, fs.StringVar, &cfg.MergeFrom, "merge-from", "", "merge: the staging directory to copy blocks from", in(groupStaging, []string{cmdMerge}))
}

// defineDatabaseFlags defines the flags of the database, its indexes and the decoding options.
func defineDatabaseFlags(d *flagDefs, fs *pflag.FlagSet, cfg *pipeline.Config, dc pipeline.Config) {
	const dsn = " (URL or key=value; a password is better in BLOCKHAUL_PG or PGPASSWORD)"
	def(d, fs.StringVar, &cfg.PG, "pg", "", "PostgreSQL DSN"+dsn, in(groupDatabase, onPG, []string{cmdPrune}).
		saying("PostgreSQL DSN of the server of the targets the store mirrors: prune asks each target's database there, with these credentials, for its checkpoints and rows before it deletes"+dsn, cmdPrune).
		saying("PostgreSQL DSN of the database exported into"+dsn, exporting...).
		saying("also show each export stream's checkpoint in this PostgreSQL database"+dsn, cmdStatus).
		saying("PostgreSQL DSN of the database whose exported rows are digested"+dsn, cmdChecksum).
		saying("also check this PostgreSQL database's rows against staging"+dsn, cmdVerify).
		saying("also count what this PostgreSQL database holds of the range, its bytes per block and its disk's room"+dsn, cmdEstimate))
	def(d, fs.StringVar, &cfg.Schema, "schema", "", "PostgreSQL schema (default: the chain family's name)", in(groupDatabase, onPG))
	def(d, fs.BoolVar, &cfg.SyncCommit, "sync-commit", false, "wait for WAL flush on every batch commit", in(groupDatabase, exporting))
	def(d, fs.IntVar, &cfg.PGRetries, "pg-retries", dc.PGRetries, "retries of a transient PostgreSQL fault (terminated backend, restart, statement timeout, deadlock) since the last committed batch; 0: fail at once", in(groupDatabase, exporting))
	def(d, fs.DurationVar, &cfg.PGRetryMaxWait, "pg-retry-max-wait", dc.PGRetryMaxWait, "longest backoff between PostgreSQL retries (they start at 100ms and double)", in(groupDatabase, exporting))
	cfg.DeferIndexes = dc.DeferIndexes
	di := defValue(d, &cfg.DeferIndexes, "defer-indexes", "drop secondary indexes for the fill and build them when the range completes: auto (when the tables are empty), always (the flag alone) or never",
		in(groupDatabase, exporting, []string{cmdEstimate}).oneOf(string(pipeline.IndexesAuto), string(pipeline.IndexesAlways), string(pipeline.IndexesNever)))
	di.NoOptDefVal = string(pipeline.IndexesAlways)
	defValue(d, &cfg.Indexes, "indexes", "secondary indexes to create: default (the default: the set in docs/querying.md), minimal (lookups by hash), none, or index names separated by commas",
		in(groupDatabase, exporting, []string{cmdEstimate}).oneOf("default", "minimal", "none"))
	cfg.IndexWorkers = dc.IndexWorkers
	defValue(d, autoCount{&cfg.IndexWorkers, pipeline.MaxIndexWorkers}, "index-workers", "deferred indexes built at once when a fill completes, each on a connection of its own (1: one after another); auto: one a CPU when PostgreSQL is on this machine, at most 4, else 4 (the job logs the count and why)", in(groupDatabase, exporting).oneOf("auto", "1", "2", "4"))
	def(d, fs.Int64Var, &cfg.IndexMemoryMiB, "index-memory", dc.IndexMemoryMiB, "maintenance_work_mem of each deferred index build, in MiB, for that build alone (0: the server's; each of --index-workers builds may use it at once; 16 was cheaper than 64 or more in docs/benchmarks.md)", in(groupDatabase, exporting))
	defValue(d, &cfg.EventEncoding, "event-encoding", "cometbft: how event attributes are written: auto (decided per block from the data), base64 or text",
		in(groupDatabase, exporting, []string{cmdVerify}).oneOf(flagValues("event-encoding")...))
	def(d, fs.StringArrayVar, &cfg.Proto, "proto", nil, "cometbft: a directory of the chain's .proto files (repeatable): every message type they define is decoded into messages.decoded, beside the built-in Cosmos SDK and IBC types (docs/messages.md)",
		in(groupExport, exporting, []string{cmdVerify}))
	def(d, fs.StringArrayVar, &cfg.ProtoDescriptors, "proto-descriptors", nil, "cometbft: a compiled FileDescriptorSet of the chain's messages (repeatable; protoc --descriptor_set_out, buf build -o), as --proto",
		in(groupExport, exporting, []string{cmdVerify}))
	def(d, fs.StringVar, &cfg.Bech32Prefix, "bech32-prefix", "", "cometbft: the chain's account address prefix (cosmos, osmo, crc) for transactions.signers; default: learnt from the chain's own addresses in each block",
		in(groupExport, exporting, []string{cmdVerify}))
	def(d, fs.StringArrayVar, &cfg.ABI, "abi", nil, "evm: decode logs by a contract ABI into one table per event, NAME_event: NAME=FILE (a JSON ABI), optionally @ADDRESS[,ADDRESS] to read only those contracts' logs; repeatable (see docs/evm-events.md)",
		in(groupDatabase, exporting, []string{cmdChecksum, cmdVerify}).
			saying("evm: the ABIs the schema's event tables were exported with, NAME=FILE[@ADDRESS,...] (repeatable); default: those the schema records, so its event tables are compared too", cmdChecksum, cmdVerify))
	def(d, fs.StringVar, &cfg.Tables, "tables", "", "the tables to write, comma separated (blocks,transactions), or all but those given with a leading - (-logs); default all", in(groupExport, exporting).tableList())
	def(d, fs.StringSliceVar, &cfg.Replay, "replay", nil, "export: write these tables again in place from staging, over the heights the checkpoints cover (or --from/--to within them), beside a running follow", in(groupExport, []string{cmdExport}).tableList())
}

// defineFetchFlags defines the flags of the Parquet output, fetch and shards.
func defineFetchFlags(d *flagDefs, fs *pflag.FlagSet, cfg *pipeline.Config, dc pipeline.Config) {
	def(d, fs.StringVar, &cfg.Parquet, "parquet", "", "write the tables as Parquet files in place of PostgreSQL, to this directory or URL (file://, s3://, gs://, azblob://): one file per table per segment of --segment-blocks heights, and a manifest (docs/parquet.md)",
		in(groupExport, exporting, []string{cmdVerify}).
			saying("verify the Parquet segments at this directory or URL against their manifest, and against --staging when it holds a store", cmdVerify))
	def(d, fs.Uint64Var, &cfg.SegmentBlocks, "segment-blocks", 0, "with --parquet: heights per segment; segment k holds heights k×N to k×N+N-1 (default by chain: cometbft 100000, evm 10000)", in(groupExport, exporting))
	def(d, fs.IntVar, &cfg.FetchWorkers, "fetch-workers", dc.FetchWorkers, "concurrent fetches", in(groupFetch, sourcing, []string{cmdEstimate}))
	def(d, fs.IntVar, &cfg.FetchSpan, "fetch-span", dc.FetchSpan, "heights per fetch request", in(groupFetch, sourcing, []string{cmdEstimate}))
	def(d, fs.Uint64Var, &cfg.FetchLead, "fetch-lead", 0, "run: how many heights fetch may stage ahead of export (0: four export batches)", in(groupFetch, []string{cmdRun}))
	def(d, fs.IntVar, &cfg.Shards, "shards", 0, "cut the range into this many slices, one per pod of a Kubernetes Indexed Job (needs --to; 0: not sharded)", in(groupFetch, []string{cmdFetch, cmdSnapshot, cmdRestore, cmdPublish}).
		saying("publish as shard --shard-index of this many: its chunks and its manifest part, not the manifest, which publish --merge-parts merges (0: not sharded)", cmdPublish).
		saying("write the store as the snapshot of shard --shard-index of this many, under DEST/shard-I/ (0: a plain snapshot)", cmdSnapshot).
		saying("restore the snapshots of this many shards under SRC (shard-0/ to shard-N-1/) and merge them into --staging (0: one plain snapshot)", cmdRestore))
	def(d, fs.IntVar, &cfg.ShardIndex, "shard-index", 0, "the slice this process fetches, 0 to --shards-1 (default: JOB_COMPLETION_INDEX)", in(groupFetch, []string{cmdFetch, cmdSnapshot, cmdPublish}).
		saying("the shard this publish is, 0 to --shards-1 (default: JOB_COMPLETION_INDEX): its manifest part is parts/shard-I-of-N.json", cmdPublish).
		saying("the shard whose snapshot this is, 0 to --shards-1 (default: JOB_COMPLETION_INDEX)", cmdSnapshot))
	def(d, fs.Uint64Var, &cfg.ShardChunk, "shard-chunk", dc.ShardChunk, "shard slices start and end on multiples of this many heights", in(groupFetch, []string{cmdFetch, cmdRestore}))
	def(d, fs.DurationVar, &cfg.Wait, "wait", 0, "with --shards: wait up to this long for every shard's finished snapshot, looking every hundredth of it (1s to 30s), merging each as it comes (0: they must be there)", in(groupFetch, []string{cmdRestore}))
	def(d, fs.StringVar, &cfg.Trust, "trust", "", "cometbft: prove every header from a trust root before it is staged (docs/trust.md): changes (check the commits of the heights where the validator set changes and of the last height of every batch; the headers between are proven by their hash links), every (check every commit) or off; given, a chain of trust that cannot start is refused (default: changes where a root is at hand, else the job goes on unproven with a warning)",
		in(groupFetch, sourcing, []string{cmdVerify}).oneOf(pipeline.TrustChanges, pipeline.TrustEvery, pipeline.TrustOff).
			saying("cometbft: prove the staged history from the store's chain-of-trust checkpoint, or from --trust-root, to its last height (docs/trust.md): changes, every or off", cmdVerify))
	def(d, fs.StringVar, &cfg.TrustRoot, "trust-root", "", "cometbft: where the chain of trust starts when the store has proven nothing: a genesis.json, or HEIGHT:HASH (a header you trust, for a chain started from an exported state or a range above genesis; its validators are asked of --rpc) (default: the source's genesis)",
		in(groupFetch, sourcing, []string{cmdVerify}))
	defValue(d, &cfg.VerifyBlocks, "verify-blocks", "what is recomputed of every block before it is staged: full (the block hash from its header, and what the header commits to from the contents), header (evm: the block hash alone, for a chain with transactions the family's encoding does not cover; cometbft: the same as full, data_hash included) or links (nothing: a chain whose block hash is not the family's, as an EVM chain on a CometBFT engine; parent links are still checked)",
		in(groupFetch, sourcing, []string{cmdPublish}).oneOf("full", "header", "links").
			saying("what is recomputed of every staged block before it is published: full, header or links (see fetch)", cmdPublish))
}

// defineExportFlags defines the flags of export batches and streams.
func defineExportFlags(d *flagDefs, fs *pflag.FlagSet, cfg *pipeline.Config, dc pipeline.Config) {
	def(d, fs.IntVar, &cfg.BatchBlocks, "batch-blocks", dc.BatchBlocks, "blocks per export transaction", in(groupExport, exporting))
	cfg.ExportStreams = dc.ExportStreams
	defValue(d, autoCount{&cfg.ExportStreams, pipeline.MaxExportStreams}, "export-streams", "export, run, follow --backfill-from: split the range into this many contiguous sub-ranges exported at once over as many connections; auto: 1 when PostgreSQL is on this machine and the tables have BRIN indexes (a split leaves the rows out of the height order they need, for a small gain: docs/querying.md#indexes), 3/4 of the CPUs (rounded up) when it is on this machine without them, else 2 a CPU up to 16, at most half the server's free connections and one stream per --batch-blocks of the range (the job logs the count and why); a range an earlier run split resumes with its count",
		in(groupExport, []string{cmdExport, cmdRun, cmdFollow}).oneOf("auto", "1", "2", "4"))
}

// defineFollowFlags defines the flags of follow.
func defineFollowFlags(d *flagDefs, fs *pflag.FlagSet, cfg *pipeline.Config, dc pipeline.Config) {
	def(d, fs.Uint64Var, &cfg.Confirmations, "confirmations", 0, "follow: export only blocks at least this many below the tip", in(groupFollow, []string{cmdFollow}))
	def(d, fs.DurationVar, &cfg.PollInterval, "poll-interval", dc.PollInterval, "follow: how often to poll the chain tip", in(groupFollow, []string{cmdFollow}))
	def(d, fs.Uint64Var, &cfg.ReorgWindow, "reorg-window", dc.ReorgWindow, "follow: how many exported heights a reorg may roll back before halting", in(groupFollow, []string{cmdFollow}))
	def(d, fs.Uint64Var, &cfg.BackfillFrom, "backfill-from", 0, "follow: also fill from this height up to where the head stream started, beside it, as a backfill named --alias", in(groupFollow, []string{cmdFollow}))
}

// defineReportFlags defines the flags of the reports of the archive commands.
func defineReportFlags(d *flagDefs, fs *pflag.FlagSet, cfg *pipeline.Config, dc pipeline.Config) {
	def(d, fs.Uint64Var, &cfg.ChunkBlocks, "chunk-blocks", 0, "publish: blocks a chunk holds; chunk k holds heights k×N to k×N+N-1 (0: the archive's own size, else 1000)", in(groupReport, []string{cmdPublish}))
	def(d, fs.BoolVar, &cfg.MergeParts, "merge-parts", false, "publish: write DEST's manifest from the manifest parts under it (publish --shards writes one a shard) and its earlier manifest; reads no staging store", in(groupReport, []string{cmdPublish}))
	def(d, fs.BoolVar, &cfg.JSON, "json", false, "print the report as JSON", in(groupReport, reporting))
	def(d, fs.StringVar, &cfg.Against, "against", "", "checksum: DSN of a second database to compare with (exit 4 when they differ)", in(groupReport, []string{cmdChecksum}))
	def(d, fs.StringVar, &cfg.AgainstSchema, "against-schema", "", "checksum: schema in the --against database (default: --schema)", in(groupReport, []string{cmdChecksum}))
	def(d, fs.Uint64Var, &cfg.Chunk, "chunk", dc.Chunk, "checksum and verify --pg: heights per digest chunk", in(groupReport, []string{cmdChecksum, cmdVerify}))
	def(d, fs.BoolVar, &cfg.Deep, "deep", false, "verify: also decompress and decode every record", in(groupReport, []string{cmdVerify}))
	def(d, fs.Uint64Var, &cfg.Below, "below", 0, "prune: delete staged heights below this one", in(groupReport, []string{cmdPrune}))
	def(d, fs.BoolVar, &cfg.Force, "force", false, "prune: delete even heights no target has exported, a target lacks, or a target cannot confirm (gone, reset, unreachable): they may be the only copy", in(groupReport, []string{cmdPrune}))
	def(d, fs.BoolVar, &cfg.DryRun, "dry-run", false, "prune: print the heights and size a prune would delete, and which targets hold them; delete nothing", in(groupReport, []string{cmdPrune}))
}

// defineWatchFlags defines the flags of logs, progress, metrics and the heap limit.
func defineWatchFlags(d *flagDefs, fs *pflag.FlagSet, cfg *pipeline.Config, dc pipeline.Config, proc *processFlags) {
	def(d, fs.StringVar, &cfg.HTTPAddr, "http", "", "serve /healthz, /readyz and Prometheus /metrics on this address (e.g. 127.0.0.1:9464; :0 picks a port)", in(groupWatch, staged))
	def(d, fs.DurationVar, &cfg.Progress, "progress-interval", dc.Progress, "interval of progress log lines (0: none)", in(groupWatch, staged))
	def(d, fs.StringVar, &cfg.LogFormat, "log-format", dc.LogFormat, "log format: text or json", in(groupWatch, every).oneOf("text", "json"))
	def(d, fs.StringVar, &cfg.LogLevel, "log-level", dc.LogLevel, "log level: debug, info, warn, error", in(groupWatch, every).oneOf("debug", "info", "warn", "error"))
	def(d, fs.Int64Var, &proc.memLimit, "memory-limit", 0, "soft limit of the Go heap in MiB, so memory stays flat over any range (0: by chain, cometbft 128, evm 448, times the export streams within 3/4 of a container's memory; negative: none; GOMEMLIMIT wins)", in(groupWatch, every))
}

// newFlags returns a flag set holding every flag, bound to a new Config.
func newFlags(cmd string) (*pflag.FlagSet, *pipeline.Config) {
	cfg := &pipeline.Config{}
	fs := pflag.NewFlagSet("blockhaul "+cmd, pflag.ContinueOnError)
	defineFlags(fs, cfg, &processFlags{})
	return fs, cfg
}

// usedBy reports whether command cmd uses flag f.
func usedBy(f *pflag.Flag, cmd string) bool {
	return slices.Contains(f.Annotations[annCmds], cmd)
}

func without(cmds []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(cmds), func(c string) bool { return slices.Contains(drop, c) })
}

// flagValues are the values the families give flag name (for completion),
// in family order.
func flagValues(name string) []string {
	var out []string
	for _, f := range family.All() {
		for _, v := range f.FlagValues[name] {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// tableNames are the export tables of the family --chain names (of every
// family when it names none), for the completion of flags that take them.
// It reads the command line as typed so far, before any validation.
func tableNames(cfg *pipeline.Config) []string {
	fams := family.All()
	if f, err := family.Lookup(cfg.Chain); err == nil {
		fams = []*family.Family{f}
	}
	var tables []chain.Table
	for _, f := range fams {
		tables = append(tables, f.Tables()...)
	}
	var out []string
	for _, t := range tables {
		if !slices.Contains(out, t.Name) {
			out = append(out, t.Name)
		}
	}
	return out
}

// autoCount is a flag of a count or auto (0): --export-streams,
// --index-workers.
type autoCount struct {
	p   *int
	max int
}

func (v autoCount) String() string {
	if v.p == nil || *v.p == 0 {
		return "auto"
	}
	return strconv.Itoa(*v.p)
}

func (v autoCount) Type() string { return "count" }

func (v autoCount) Set(s string) error {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "auto") {
		*v.p = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > v.max {
		return fmt.Errorf("want auto or 1 to %d", v.max)
	}
	*v.p = n
	return nil
}
