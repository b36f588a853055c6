// Package pipeline wires blockhaul's engines into the jobs its commands run:
// fetch (source → staging), export (staging → PostgreSQL), run (both at
// once, export following the staged prefix) and status. cmd/blockhaul only
// binds flags to a Config and calls Run.
package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/monitor"
)

// Config is everything one blockhaul invocation needs. Field comments name
// the flag that sets each field.
type Config struct {
	Command string

	Chain string   // --chain: a family's name or alias (family.Names); Resolve looks it up (Job.Family)
	RPC   []string // --rpc: endpoints; empty means the synthetic chain
	// NodeHome is --node-home: a stopped node's home directory, whose own
	// databases are read instead of its RPC (family.SourceNodeHome).
	NodeHome string
	// Archive is --archive: a published chunk archive read instead of a
	// node (family.SourceArchive; archive/chunked).
	Archive         string
	SyntheticSeed   int64   // --synthetic-seed
	SyntheticTip    uint64  // --synthetic-tip: the synthetic chain's tip height (0: --to, else DefaultSyntheticTip)
	SyntheticTxs    float64 // --synthetic-txs: mean transactions per block (0: the family's default)
	SyntheticSteady bool    // --synthetic-steady: every block at the mean density
	// SyntheticValidators is --synthetic-validators: the synthetic chain's
	// validator set size (0: the family's default).
	SyntheticValidators int

	// A synthetic chain that grows and reorganises (pipeline/synthetic.go).
	SyntheticBlockTime  time.Duration    // --synthetic-block-time: one block each (0: a fixed tip)
	SyntheticReorgEvery uint64           // --synthetic-reorg-every: a reorg each N blocks (0: none)
	SyntheticReorgDepth uint64           // --synthetic-reorg-depth: blocks each replaces
	Clock               func() time.Time // the synthetic chain's clock; nil: time.Now (tests)

	From    uint64 // --from (inclusive)
	To      uint64 // --to (inclusive)
	ToSet   bool   // whether --to was given
	FromSet bool   // whether --from was given (checksum, verify: else every height)

	PG      string // --pg: PostgreSQL DSN
	Staging string // --staging: staging directory
	Schema  string // --schema (default: the chain family's name)
	// SchemaDefaulted: Schema was not given but derived from Chain, so a
	// command that learns the family from staging may derive it again.
	SchemaDefaulted bool
	// ChainSet: --chain was given (flag or environment). Without it, a
	// command on a store that holds a chain already takes the store's
	// family instead of the default.
	ChainSet bool
	Alias    string // --alias (default: derived from the range)

	FetchWorkers int           // --fetch-workers
	FetchSpan    int           // --fetch-span
	FetchLead    uint64        // --fetch-lead: run's fetch stays at most this far ahead of export (0: four export batches)
	BatchBlocks  int           // --batch-blocks
	RPS          float64       // --rps per endpoint
	RPCTimeout   time.Duration // --rpc-timeout
	RPCDownAfter time.Duration // --rpc-down-after: how long a fetch waits out a source that serves nothing
	// rpcSilentAfter and rpcWaitReport are jsonrpc.Config's SilentAfter
	// and WaitReport (0: its defaults, a minute and 10 s), shorter in tests.
	rpcSilentAfter, rpcWaitReport time.Duration
	SyncCommit                    bool // --sync-commit

	// ExportStreams: export and run split the range, and follow its
	// --backfill-from range, into this many sub-ranges exported at once over
	// as many connections (--export-streams); run and follow also fetch
	// each beside its export. 0 is auto: chosen from the machine, the
	// server and the range (autoStreams); a range an earlier run split
	// resumes with its recorded count (planStreams).
	ExportStreams int
	// MemoryLimitPerStream, when positive, is the soft Go heap limit in
	// bytes of one export stream: a job that splits its range into N
	// streams sets the process's limit to N times it (a head stream beside
	// them counts too). cmd/blockhaul sets it to the default limit
	// (DefaultMemoryLimitMiB) when that is the limit in force; 0 leaves
	// the limit alone (--memory-limit, GOMEMLIMIT, tests).
	MemoryLimitPerStream int64

	PGRetries      int           // --pg-retries: retries of a transient database fault, since the last committed batch
	PGRetryMaxWait time.Duration // --pg-retry-max-wait: the longest backoff between them

	Confirmations uint64        // --confirmations: follow exports blocks at least this far below the tip
	PollInterval  time.Duration // --poll-interval: follow's tip polling
	ReorgWindow   uint64        // --reorg-window: exported heights follow may roll back on a reorg
	// BackfillFrom: follow also fills [BackfillFrom, where the head stream
	// started) beside the head, as a backfill named --alias (default: from
	// its range) over the same staging store (--backfill-from).
	BackfillFrom    uint64
	BackfillFromSet bool
	DeferIndexes    IndexMode       // --defer-indexes: auto, always or never (a fill's choice: indexPlan)
	Indexes         export.IndexSet // --indexes: default, minimal, none or a list of index names
	// IndexWorkers is --index-workers: deferred indexes built at once;
	// 0 is auto (autoIndexWorkers), resolved by prepareIndexes (indexPlan).
	IndexWorkers int
	// IndexMemoryMiB is each deferred index build's maintenance_work_mem
	// in MiB (--index-memory); 0 keeps the server's. Default
	// DefaultIndexMemoryMiB.
	IndexMemoryMiB int64
	// AnalyzeAfterBuilds makes a fill ANALYZE its tables only once every
	// deferred index is built, one after another, rather than beside the
	// builds (the order before; a switch for the benchmark's comparisons).
	AnalyzeAfterBuilds bool

	EventEncoding family.EventEncoding // --event-encoding: cometbft attributes auto, base64 or text
	// Cosmos messages (cometbft's messages.decoded; docs/messages.md):
	// directories of .proto files and compiled descriptor sets added to the
	// built-in Cosmos SDK and IBC types, and the chain's bech32 account
	// prefix for transactions.signers ("" learns it from the chain).
	Proto            []string // --proto
	ProtoDescriptors []string // --proto-descriptors
	Bech32Prefix     string   // --bech32-prefix

	// ABI are the --abi values (NAME=FILE[@ADDRESS,...]): EVM event tables
	// from contract ABIs, compiled by Resolve (Job.Decoding).
	ABI          []string
	VerifyBlocks chain.Verification // --verify-blocks: what is recomputed of a block before it is staged
	// Trust is --trust: which commits the chain of trust checks
	// (TrustChanges, TrustEvery, TrustOff; "" is TrustChanges); TrustRoot
	// is --trust-root: where it starts when the store has no checkpoint
	// ("": the source's genesis; a genesis.json; HEIGHT:HASH).
	Trust, TrustRoot string

	Tables string   // --tables: the tables run, export and follow write (see export.ParseTables); empty: all
	Replay []string // --replay: export writes these tables again in place from staging (pipeline/replay.go)

	HTTPAddr string // --http: serve /healthz, /readyz and /metrics

	// Parquet is --parquet: run, export and follow write the tables as
	// Parquet segments there (a directory or a gocloud.dev/blob URL) in
	// place of PostgreSQL; verify checks the segments there
	// (pipeline/parquet.go, docs/parquet.md).
	Parquet string
	// SegmentBlocks is --segment-blocks: heights per Parquet segment
	// (SegmentBlocksSet: given; else the family's default).
	SegmentBlocks    uint64
	SegmentBlocksSet bool
	// Version is blockhaul's version, recorded in what it writes (the
	// Parquet manifest and files); cmd/blockhaul sets it.
	Version string

	MergeFrom string // --merge-from: the staging directory merge copies from

	// Shards of a fetch run as a Kubernetes Indexed Job (pipeline/shard.go).
	Shards        int    // --shards: slices the range is cut into (0: not sharded)
	ShardIndex    int    // --shard-index (else JOB_COMPLETION_INDEX): this process's slice
	ShardIndexSet bool   // whether --shard-index or JOB_COMPLETION_INDEX gave it
	ShardChunk    uint64 // --shard-chunk: slices start and end on multiples of it
	// Wait is how long restore --shards waits for the shards' finished
	// snapshots (--wait; 0: they must be there).
	Wait time.Duration

	// The archive commands' fields.
	JSON          bool     // --json: print the report as JSON
	Against       string   // --against: checksum: the DSN of the database to compare with
	AgainstSchema string   // --against-schema (default: --schema)
	Chunk         uint64   // --chunk: checksum, verify --pg: heights per digest chunk
	Deep          bool     // --deep: verify: decompress and decode every record
	Below         uint64   // --below: prune: delete staged heights below this
	BelowSet      bool     // whether --below was given
	Force         bool     // --force: prune even when a target has not exported below --below
	DryRun        bool     // --dry-run: prune: say what would be deleted, delete nothing
	Args          []string // positional arguments: snapshot DEST, restore SRC, publish DEST
	ChunkBlocks   uint64   // --chunk-blocks: publish: blocks a chunk (0: the archive's, else chunked.DefaultChunkBlocks)
	MergeParts    bool     // --merge-parts: publish: write DEST's manifest from its parts alone, no staging store

	// Source, if set, replaces the source the flags describe (tests, bench).
	Source loader.Source
	// Monitor, if set, receives the job's events (progress display,
	// metrics); nil means a monitor that only logs progress.
	Monitor *monitor.Monitor

	LogFormat string        // --log-format: text or json
	LogLevel  string        // --log-level
	Progress  time.Duration // --progress-interval
}

// DefaultSyntheticTip is the synthetic chain's tip when neither
// --synthetic-tip nor --to sets it: a range without --to loads 10,000
// blocks (seconds for CometBFT, about a minute for EVM), as a trial of the
// tool should, instead of heading for a tip no run reaches.
const DefaultSyntheticTip = 10_000

// FieldError is one invalid configuration field.
type FieldError struct {
	Flag, Env string
	// Arg names the positional argument at fault (DEST, SRC) when it is
	// not a flag.
	Arg string
	Msg string
}

func (e *FieldError) Error() string {
	if e.Arg != "" {
		return fmt.Sprintf("%s: %s", e.Arg, e.Msg)
	}
	if e.Flag == "" {
		// A problem of the command line itself (a stray word, a flag
		// before the command) rather than of one field.
		return e.Msg
	}
	return fmt.Sprintf("--%s (%s): %s", e.Flag, e.Env, e.Msg)
}

// ConfigError lists every invalid field of a Config.
type ConfigError struct{ Fields []*FieldError }

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("invalid configuration:")
	for _, f := range e.Fields {
		b.WriteString("\n  ")
		b.WriteString(f.Error())
	}
	return b.String()
}

// Fault marks the error as a configuration error (exit 2): nothing was started.
func (e *ConfigError) Fault() fault.Class { return fault.Config }

// EnvName is the environment variable that sets a flag. --from and --to
// are BLOCKHAUL_FROM_HEIGHT and BLOCKHAUL_TO_HEIGHT; EnvAliases lists the
// shorter names also accepted for them.
func EnvName(flag string) string {
	switch flag {
	case "from":
		return "BLOCKHAUL_FROM_HEIGHT"
	case "to":
		return "BLOCKHAUL_TO_HEIGHT"
	}
	return "BLOCKHAUL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// EnvAliases maps a flag to the other environment variables that also set
// it: BLOCKHAUL_FROM and BLOCKHAUL_TO are what the flag names suggest, and
// ignoring them would fetch from height 1 to the tip.
var EnvAliases = map[string][]string{
	"from": {"BLOCKHAUL_FROM"},
	"to":   {"BLOCKHAUL_TO"},
}

// Bounds past which a value is a mistake rather than a tuning choice.
const (
	MaxFetchWorkers = 1024
	MaxFetchSpan    = 10_000  // heights per fetch request
	MaxBatchBlocks  = 100_000 // blocks per export transaction
	MaxSyntheticTxs = 10_000  // mean transactions per synthetic block
	// MaxSyntheticValidators bounds --synthetic-validators.
	MaxSyntheticValidators = 1000
	MaxRPS                 = 1e6 // requests per second per endpoint
	MaxAliasLen            = 128 // bytes of a backfill alias
	MaxIndexWorkers        = 64  // deferred indexes built at once (connections)
	// DefaultIndexMemoryMiB is the deferred builds' maintenance_work_mem:
	// at 60,000 CometBFT blocks every build cost less CPU at 16 MB than at
	// the server's default 64 MB (the GIN build 0.83-0.86x, the B-trees
	// 0.69-0.85x), and more at 256 MB and 1 GB (1.26x): a sort or a GIN
	// accumulator that fits the CPU's caches beats a larger one here
	// (docs/benchmarks.md). Below any server's own bound.
	DefaultIndexMemoryMiB = 16
	// MaxIndexMemoryMiB is PostgreSQL's own bound on maintenance_work_mem
	// (MAX_KILOBYTES kB on a 64-bit server), in MiB.
	MaxIndexMemoryMiB = 2097151
)

// MaxExportStreams bounds --export-streams (connections of one export).
const MaxExportStreams = 64

// DefaultConfig returns a Config holding every default; the CLI's flags
// start from it.
func DefaultConfig() Config {
	return Config{
		Chain:               family.Default.Name,
		SyntheticSeed:       1,
		From:                1,
		Staging:             "blockhaul-staging",
		FetchWorkers:        8,
		FetchSpan:           16,
		BatchBlocks:         500,
		PGRetries:           export.DefaultRetries,
		PGRetryMaxWait:      export.DefaultMaxWait,
		RPCTimeout:          30 * time.Second,
		RPCDownAfter:        loader.DefaultDownAfter,
		PollInterval:        2 * time.Second,
		ReorgWindow:         64,
		SyntheticReorgDepth: 3,
		Chunk:               10_000,
		ShardChunk:          DefaultShardChunk,
		DeferIndexes:        IndexesAuto,
		IndexMemoryMiB:      DefaultIndexMemoryMiB,
		LogFormat:           "text",
		LogLevel:            "info",
		Progress:            10 * time.Second,
	}
}

// EnsureDefaults fills fields derived from others (the schema from the
// chain) and empty strings that have defaults.
func (c *Config) EnsureDefaults() {
	c.Chain = strings.ToLower(strings.TrimSpace(c.Chain))
	c.Chain = cmp.Or(c.Chain, family.Default.Name)
	c.DeferIndexes = cmp.Or(c.DeferIndexes, IndexesAuto)
	f, err := family.Lookup(c.Chain)
	if err != nil {
		return // Validate names it
	}
	if c.Schema == "" {
		c.Schema, c.SchemaDefaulted = f.Name, true
	}
	// A range starts at the chain's first block unless --from says
	// otherwise (DefaultConfig's From is the default family's).
	if !c.FromSet && c.From == DefaultConfig().From {
		c.From = f.Genesis
	}
	c.Staging = cmp.Or(c.Staging, "blockhaul-staging")
	c.LogFormat = cmp.Or(c.LogFormat, "text")
	c.LogLevel = cmp.Or(c.LogLevel, "info")
}

// Validate checks every field and reports all problems at once as a
// *ConfigError: Resolve without the Job.
func (c *Config) Validate() error {
	fam, err := family.Lookup(c.Chain)
	if _, fs := c.resolve(fam, err); len(fs) > 0 {
		return &ConfigError{Fields: fs}
	}
	return nil
}

// validate checks the fields Resolve does not resolve, for family fam
// (nil when --chain names none) and the decoding d resolved.
func (c *Config) validate(fam *family.Family) []*FieldError {
	var fs []*FieldError
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	cmd := commandNamed(c.Command)
	switch {
	case cmd == nil:
		fs = append(fs, &FieldError{Msg: fmt.Sprintf("unknown command %q (want one of %s)", c.Command, strings.Join(Commands, ", "))})
	case cmd.validate != nil:
		fs = append(fs, cmd.validate(c)...)
	}
	switch c.DeferIndexes {
	case IndexesAuto, IndexesAlways, IndexesNever, "":
	default:
		bad("defer-indexes", "want auto, always or never, got %q", c.DeferIndexes)
	}
	if c.IndexMemoryMiB < 0 || c.IndexMemoryMiB > MaxIndexMemoryMiB {
		bad("index-memory", "want 0 (the server's) to %d MiB, got %d", MaxIndexMemoryMiB, c.IndexMemoryMiB)
	}
	if c.IndexWorkers < 0 || c.IndexWorkers > MaxIndexWorkers {
		bad("index-workers", "want auto or 1 to %d, got %d", MaxIndexWorkers, c.IndexWorkers)
	}
	if c.ToSet && c.To < c.From {
		bad("to", "%d is below --from %d", c.To, c.From)
	}
	if fam != nil && c.From < fam.Genesis && cmd != nil && cmd.job != nil {
		bad("from", "%s heights start at %d, got %d", fam.Title, fam.Genesis, c.From)
	}
	seen := make(map[string]int, len(c.RPC))
	for i, u := range c.RPC {
		if err := validRPCURL(u); err != nil {
			bad("rpc", "endpoint %d (%s): %v", i+1, jsonrpc.Redact(u), err)
			continue
		}
		key := endpointKey(u)
		if j, dup := seen[key]; dup {
			bad("rpc", "endpoint %d (%s) is endpoint %d again", i+1, jsonrpc.Redact(u), j+1)
		} else {
			seen[key] = i
		}
	}
	fs = append(fs, c.validateNodeHome(fam)...)
	fs = append(fs, c.validateArchiveSource(fam)...)
	if c.HTTPAddr != "" {
		if err := validListenAddr(c.HTTPAddr); err != nil {
			bad("http", "%q: %v", c.HTTPAddr, err)
		}
	}
	if c.Alias != "" {
		if err := validAlias(c.Alias); err != nil {
			bad("alias", "%v", err)
		}
	}
	fs = append(fs, c.validateParquet()...)
	if cmd != nil && cmd.writes && c.Parquet == "" && c.PG == "" {
		bad("pg", "a PostgreSQL DSN is required for %s", c.Command)
	}
	if c.Staging == "" {
		bad("staging", "a staging directory is required")
	}
	if c.Command == CmdMerge && c.MergeFrom == "" {
		bad("merge-from", "merge needs the staging directory to copy from")
	}
	if c.Command == CmdMerge && c.MergeFrom != "" && c.MergeFrom == c.Staging {
		bad("merge-from", "is the same directory as --staging")
	}
	if fam != nil && c.Schema == "" {
		bad("schema", "must not be empty")
	} else if len(c.Schema) > 63 {
		bad("schema", "%q is longer than PostgreSQL's 63-byte identifier limit", c.Schema)
	}
	if c.FetchWorkers <= 0 || c.FetchWorkers > MaxFetchWorkers {
		bad("fetch-workers", "want 1 to %d, got %d", MaxFetchWorkers, c.FetchWorkers)
	}
	if c.FetchSpan <= 0 || c.FetchSpan > MaxFetchSpan {
		bad("fetch-span", "want 1 to %d heights, got %d", MaxFetchSpan, c.FetchSpan)
	}
	if c.BatchBlocks <= 0 || c.BatchBlocks > MaxBatchBlocks {
		bad("batch-blocks", "want 1 to %d blocks, got %d", MaxBatchBlocks, c.BatchBlocks)
	}
	switch {
	case c.ExportStreams < 0 || c.ExportStreams > MaxExportStreams:
		bad("export-streams", "want auto or 1 to %d, got %d", MaxExportStreams, c.ExportStreams)
	case c.ExportStreams > 1 && c.Command == CmdFollow && !c.BackfillFromSet:
		bad("export-streams", "follow's head stream is one stream; --export-streams splits its --backfill-from range")
	case c.ExportStreams > 1 && (cmd == nil || !cmd.writes):
		bad("export-streams", "only export, run and follow --backfill-from split a bounded range into streams; %s exports with one", c.Command)
	}
	if c.PGRetries < 0 || c.PGRetries > 1000 {
		bad("pg-retries", "must be between 0 and 1000, got %d", c.PGRetries)
	}
	if c.PGRetryMaxWait <= 0 || c.PGRetryMaxWait > time.Hour {
		bad("pg-retry-max-wait", "must be positive and at most 1h, got %s", c.PGRetryMaxWait)
	}
	switch c.Trust {
	case "", TrustChanges, TrustEvery, TrustOff:
	default:
		bad("trust", "want changes, every or off, got %q", c.Trust)
	}
	if c.SyntheticValidators < 0 || c.SyntheticValidators > MaxSyntheticValidators {
		bad("synthetic-validators", "want 0 (the family's default) to %d, got %d", MaxSyntheticValidators, c.SyntheticValidators)
	}
	if !(c.SyntheticTxs >= 0 && c.SyntheticTxs <= MaxSyntheticTxs) { // also NaN
		bad("synthetic-txs", "want 0 to %d, got %g", MaxSyntheticTxs, c.SyntheticTxs)
	}
	if !(c.RPS >= 0 && c.RPS <= MaxRPS) { // also NaN
		bad("rps", "want 0 (unlimited) to %g, got %g", float64(MaxRPS), c.RPS)
	}
	if c.RPCTimeout <= 0 {
		bad("rpc-timeout", "must be positive, got %s", c.RPCTimeout)
	}
	if c.RPCDownAfter <= 0 {
		bad("rpc-down-after", "must be positive, got %s", c.RPCDownAfter)
	}
	if c.BackfillFromSet && c.Command != CmdFollow {
		bad("backfill-from", "only follow runs a backfill beside the head stream; for a backfill alone: run --from %d --to H", c.BackfillFrom)
	}
	if c.Command == CmdFollow && c.PollInterval <= 0 {
		bad("poll-interval", "must be positive, got %s", c.PollInterval)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log-format", "want text or json, got %q", c.LogFormat)
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(c.LogLevel)); err != nil {
		bad("log-level", "want debug, info, warn or error, got %q", c.LogLevel)
	}
	fs = append(fs, c.validateShards()...)
	fs = append(fs, c.validateSynthetic()...)
	return fs
}

func validRPCURL(u string) error {
	if strings.ContainsAny(u, "\"'<>\\^`{|} \t\r\n") {
		return errors.New("holds a quote, space or other character no URL has unescaped (a quoting mistake?)")
	}
	p, err := url.Parse(u)
	if err != nil {
		return errors.New("does not parse as a URL")
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return errors.New("needs an http:// or https:// scheme")
	}
	if p.Host == "" || p.Hostname() == "" {
		return errors.New("has no host")
	}
	if port := p.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return errors.New("port out of range (want 1 to 65535)")
		}
	}
	return nil
}

// endpointKey is the form of an RPC URL under which two spellings of one
// endpoint compare equal: scheme and host are case-insensitive, and a
// trailing slash names the same resource.
func endpointKey(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.Scheme, p.Host = strings.ToLower(p.Scheme), strings.ToLower(p.Host)
	if port := p.Port(); (p.Scheme == "http" && port == "80") || (p.Scheme == "https" && port == "443") {
		p.Host = p.Hostname()
	}
	p.Path = strings.TrimSuffix(p.Path, "/")
	p.RawPath = ""
	return p.String()
}

// validListenAddr checks an --http address without binding it: host:port
// with a numeric port (0 picks a free one).
func validListenAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port or :port (e.g. 127.0.0.1:9464)")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New("port must be a number from 0 to 65535")
	}
	if strings.ContainsAny(host, " /\\") {
		return errors.New("host is not a host name or IP address")
	}
	return nil
}

// validAlias checks a backfill alias: it is stored in PostgreSQL and shown
// one per line by status, so it is bounded printable UTF-8.
func validAlias(a string) error {
	if len(a) > MaxAliasLen {
		return fmt.Errorf("is %d bytes long, more than %d", len(a), MaxAliasLen)
	}
	if !utf8.ValidString(a) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range a {
		if unicode.IsControl(r) || !unicode.IsPrint(r) && r != ' ' {
			return fmt.Errorf("%q holds the unprintable character %U", a, r)
		}
	}
	if strings.TrimSpace(a) != a {
		return fmt.Errorf("%q begins or ends with white space", a)
	}
	return nil
}

// DefaultMemoryLimitMiB is the soft Go heap limit a blockhaul process sets
// for a chain family (nil: the default family's) unless told otherwise
// (--memory-limit, GOMEMLIMIT): the family's MemoryLimitMiB. Without a
// limit the garbage collector lets the heap grow with the live set it has
// seen, so a long run ends with a larger footprint than a short one; with
// it, memory stays flat whatever the range.
func DefaultMemoryLimitMiB(f *family.Family) int64 {
	if f == nil {
		f = family.Default
	}
	return f.MemoryLimitMiB
}

// IndexMode is --defer-indexes: whether a bounded range is filled with the
// secondary indexes dropped and built once it completes.
type IndexMode string

const (
	// IndexesAuto defers for a bounded range (run, export) whose tables are
	// empty — a fresh rebuild, which nothing else is reading yet — or whose
	// indexes an earlier run already deferred; never for follow.
	IndexesAuto IndexMode = "auto"
	// IndexesAlways defers for every bounded range.
	IndexesAlways IndexMode = "always"
	// IndexesNever keeps the indexes, and builds any an earlier run deferred.
	IndexesNever IndexMode = "never"
)

// String implements pflag.Value.
func (m *IndexMode) String() string { return string(*m) }

// Type implements pflag.Value.
func (m *IndexMode) Type() string { return "mode" }

// Set implements pflag.Value. true and false, the values of the flag when it
// was a switch, mean always and never.
func (m *IndexMode) Set(v string) error {
	switch IndexMode(strings.ToLower(strings.TrimSpace(v))) {
	case IndexesAuto:
		*m = IndexesAuto
	case IndexesAlways, "true":
		*m = IndexesAlways
	case IndexesNever, "false":
		*m = IndexesNever
	default:
		return fmt.Errorf("want auto, always or never, got %q", v)
	}
	return nil
}

// validBech32Prefix reports whether p can be the human-readable part of a
// bech32 address as chains write it: lowercase ASCII letters and digits,
// 1 to 83 of them.
func validBech32Prefix(p string) bool {
	if len(p) < 1 || len(p) > 83 {
		return false
	}
	for _, c := range p {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
