// Package family is blockhaul's registry of chain families. A family is one
// value, a Family: the facts of a chain family (the ID byte its staged
// records carry, its names, its genesis height, its default rates) and the
// functions that make it work (its decoder, its block verification, the
// sources its blocks can come from), as erigon's stages are a table of
// functions. The families are registered once, in this package (one file
// each: cometbft.go, evm.go); the engines, pipeline, cmd and bench hold a
// *Family and never switch on a family's name.
//
// A --chain string becomes a *Family once, with Lookup (pipeline's
// Config.Validate); a staged record's or a store's family byte with Of.
//
// Sources: a family's blocks can come from several kinds of source (RPC
// nodes, the synthetic chain, a stopped node's own databases, and whichever
// a family adds: a published archive). Family.Sources maps each kind the family
// supports to its constructor; Family.Source builds one, and a kind the
// family lacks is an error naming both. A new source is a new SourceKind,
// the options it needs in SourceOptions, and an entry in the Sources of
// each family that supports it. Decoders take DecoderOptions the same way.
//
// To add a family: write its folder under chain/ (decoder, verification,
// RPC source), its synthetic chain beside it, and a file here that builds
// its Family and appends it to the registry (see docs/families.md).
package family

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/archive/chunked"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/cometbft/protodec"
	"github.com/blockhaul/blockhaul/chain/evm/events"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/loader"
)

// Family is one chain family: what blockhaul knows of it and how it fetches,
// verifies and decodes its blocks. A Family is immutable once registered and
// safe for concurrent use; code compares families by pointer or ID, and asks
// a family for what it needs rather than testing which family it is.
type Family struct {
	// ID is the family's byte in every staged record header and store
	// identity: never renumber.
	ID chain.Family
	// Name is the --chain value and the default schema; Aliases are other
	// --chain values that select the family.
	Name    string
	Aliases []string
	// Title is the family's name in prose ("CometBFT heights start at 1").
	Title string
	// Genesis is the height of a chain's first block (the default --from).
	Genesis uint64
	// MemoryLimitMiB is the soft Go heap limit a process sets for the
	// family unless told otherwise (see pipeline.DefaultMemoryLimitMiB).
	MemoryLimitMiB int64
	// Rates are estimate's figures where nothing has been measured.
	Rates archive.Rates
	// SyntheticDensity says how dense the family's synthetic chain is by
	// default ("≈4.5 tx/block"), for reports of its workloads.
	SyntheticDensity string
	// SegmentBlocks is the default --segment-blocks: heights per Parquet
	// segment, so that a mainnet's busiest table comes to files of a few
	// hundred MB (docs/parquet.md); 0 takes pipeline's default.
	SegmentBlocks uint64
	// RPCMaxBatch is the largest JSON-RPC batch the family's nodes accept
	// by default; 0 leaves the client's default.
	RPCMaxBatch int
	// FlagValues are the values of the family's own flags, for shell
	// completion (flag name → values).
	FlagValues map[string][]string

	// NewDecoder returns the family's decoder of every table.
	NewDecoder func(DecoderOptions) export.Decoder
	// CompileABIs reads --abi values into the event tables its decoder
	// adds (DecoderOptions.Events); nil for a family without EVM logs.
	CompileABIs func(values []string) (*EventTables, error)
	// Verifier returns the function that recomputes a raw record's block
	// hash (returning it) at level v, nil when v recomputes nothing.
	Verifier func(v chain.Verification) func(raw []byte) ([]byte, error)
	// RecordIdentity reads the block hash, parent hash and height of a raw
	// record as the family's RPC source does (a source that reads stored
	// records, such as an archive, names its blocks with it).
	RecordIdentity func(raw []byte) (hash, parent []byte, height uint64, err error)
	// Trust opens the family's chain of trust over a job's records (see
	// TrustOptions), or returns nil when the job proves nothing (mode off,
	// a source that is not a chain of one history); nil for a family
	// without one (EVM: a beacon-chain light client is another project).
	Trust func(ctx context.Context, src loader.Source, o TrustOptions) (loader.Prover, error)
	// TrustProven describes a store's chain-of-trust checkpoint: the last
	// height proven and the root it was proven from ("genesis", "the
	// trusted header 1000 (ABCD…)").
	TrustProven func(checkpoint []byte) (height uint64, root string, err error)
	// Sources builds the family's sources, by kind.
	Sources map[SourceKind]func(SourceOptions) (loader.Source, error)
	// Node is how the family's nodes serve its records over JSON-RPC; the
	// zero value (Info nil) for a family whose nodes do not speak it
	// (Aptos's REST API), which bench's JSON-RPC node cannot imitate.
	Node Node
}

// Node is how a family's nodes serve its records over JSON-RPC: what a
// server that imitates a node answers (bench's RPC server) and what a
// client that does without the RPC source asks (bench's minimal client).
type Node struct {
	// Calls are the two calls whose results make one raw record, in the
	// record's order.
	Calls [2]NodeCall
	// Info answers the node's calls that are not of one height (status,
	// eth_chainId, …) as a node of chain chainID holding heights from..to
	// would; found is false for a method the node does not have.
	Info func(method, chainID string, from, to uint64) (result []byte, found bool, err error)
	// AbsentIsNull: a height the node does not hold is answered with a
	// null result (as geth does), not with an error (as CometBFT does).
	AbsentIsNull bool
}

// NodeCall is one of the calls that make a record.
type NodeCall struct {
	Method string // the JSON-RPC method
	Field  string // the raw record's key that holds its result
	// AppendParams appends the call's params for height h to dst.
	AppendParams func(dst []byte, h uint64) []byte
}

// DecoderOptions configure a family's decoder; a family reads the options
// that concern it and ignores the rest.
type DecoderOptions struct {
	// EventEncoding is how CometBFT event attributes are read (--event-encoding).
	EventEncoding EventEncoding
	// Messages are the Cosmos message types CometBFT's messages.decoded
	// is decoded with (--proto, --proto-descriptors; LoadMessageTypes);
	// nil is the built-in set of the Cosmos SDK and ibc-go.
	Messages *MessageTypes
	// Bech32Prefix is the chain's account address prefix for CometBFT's
	// transactions.signers (--bech32-prefix); "" learns it from the chain.
	Bech32Prefix string
	// Events are EVM event tables from ABIs (--abi, compiled by the
	// family's CompileABIs); nil: none.
	Events *EventTables
}

// MessageTypes is CometBFT's set of Cosmos message types, compiled from
// proto files (docs/messages.md), named here so that a Config holds it
// without importing the family.
type MessageTypes = protodec.Set

// NoMessageTypes is a set that knows no message type: messages stay raw
// (bench's -raw-messages, to measure what decoding costs).
func NoMessageTypes() *MessageTypes { return protodec.None() }

// ErrProtoCompile is wrapped by LoadMessageTypes' error for .proto files
// that do not compile (--proto).
var ErrProtoCompile = protodec.ErrCompile

// ErrProtoDir is wrapped by LoadMessageTypes' error for a --proto
// directory that is not there or cannot be read.
var ErrProtoDir = protodec.ErrProtoDir

// LoadMessageTypes compiles the .proto files under protoDirs and links the
// descriptor sets in descriptorSets over the built-in set; an error names
// the directory or file and wraps protodec.ErrCompile or
// protodec.ErrDescriptorSet.
func LoadMessageTypes(ctx context.Context, protoDirs, descriptorSets []string) (*MessageTypes, error) {
	return protodec.Load(ctx, protodec.Options{ProtoDirs: protoDirs, DescriptorSets: descriptorSets})
}

// EventTables are the EVM event tables of --abi values (chain/evm/events),
// named here so that a Config holds them without importing the family.
type EventTables = events.Set

// EventEncoding is CometBFT's decoder option --event-encoding (auto,
// base64 or text; a flag value), named here so that a Config holds it
// without importing the family.
type EventEncoding = cometbft.EventEncoding

// SourceKind names a kind of source a family's blocks can come from.
type SourceKind string

// The kinds of source.
const (
	// SourceRPC fetches from nodes over JSON-RPC (--rpc).
	SourceRPC SourceKind = "rpc"
	// SourceSynthetic generates a deterministic chain (no --rpc).
	SourceSynthetic SourceKind = "synthetic"
	// SourceNodeHome reads a stopped node's own databases, read-only, from
	// its home directory (--node-home).
	SourceNodeHome SourceKind = "node-home"
	// SourceArchive reads a published chunk archive (--archive; see
	// archive/chunked and docs/format/archive.md).
	SourceArchive SourceKind = "archive"
)

// SourceOptions configure a source; each kind reads its own fields.
type SourceOptions struct {
	// Client sends an RPC source's calls (SourceRPC; required). The source
	// does not own it.
	Client *jsonrpc.Client
	// Verify is how much of each block the job recomputes (--verify-blocks):
	// what an RPC source recomputes, and, with VerifyLinks, a node home's
	// own data_hash check (the loader makes none).
	Verify chain.Verification
	// Logger is told what a source notices (an RPC fallback). Default:
	// discard.
	Logger *slog.Logger

	// Synthetic configures a synthetic chain (SourceSynthetic).
	Synthetic SyntheticOptions

	// NodeHome is the home directory of a stopped node (SourceNodeHome;
	// required). The source opens its databases read-only and holds them
	// until it is closed.
	NodeHome string

	// Archive is the URL of a published archive (SourceArchive; required):
	// a directory, a blob URL or http(s)://.
	Archive string
}

// TrustOptions configure a job's chain of trust (Family.Trust).
type TrustOptions struct {
	// Mode is --trust: changes (the default), every or off.
	Mode string
	// Root is --trust-root: "" (the source's genesis), a genesis.json
	// path, or HEIGHT:HASH.
	Root string
	// Checkpoint is the store's chain-of-trust checkpoint, nil if none:
	// the chain continues from it, or with FromRoot (verify) starts again
	// from the root it keeps, unless Root names another.
	Checkpoint []byte
	FromRoot   bool
	// ChainID is the chain the job holds.
	ChainID string
}

// SyntheticOptions configure a family's synthetic chain; zero fields take
// the family's defaults.
type SyntheticOptions struct {
	Seed int64
	// Tip returns the chain's current tip; nil: a tip no run reaches.
	Tip func() uint64
	// TxPerBlock is the mean number of transactions a block; 0: the
	// family's default. A family scales its other densities with it.
	TxPerBlock float64
	// Steady gives every block the mean rate where the family varies it.
	Steady bool
	// Validators sizes a validator set where the family has one; 0: the
	// family's default.
	Validators int
	// ReorgEvery and ReorgDepth make the chain reorganise: each time the
	// tip reaches a multiple of ReorgEvery, the ReorgDepth blocks below it
	// are replaced. ReorgEvery 0: no reorganisations.
	ReorgEvery, ReorgDepth uint64
}

// Source builds the family's source of kind with o. It contacts nothing.
func (f *Family) Source(kind SourceKind, o SourceOptions) (loader.Source, error) {
	newSource := f.Sources[kind]
	if newSource == nil {
		return nil, fmt.Errorf("%s: no %s source for this chain family (it has %s)", f.Name, kind, kindList(f.Kinds()))
	}
	return newSource(o)
}

// Has reports whether the family has a source of kind, so that a flag
// selecting that kind can be refused for a family without it.
func (f *Family) Has(kind SourceKind) bool { return f.Sources[kind] != nil }

// Kinds returns the kinds of source the family has, sorted.
func (f *Family) Kinds() []SourceKind {
	out := make([]SourceKind, 0, len(f.Sources))
	for k := range f.Sources {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func kindList(kinds []SourceKind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// archiveSource builds f's source of a published archive: the records are
// named with f's own RecordIdentity and verified by the loader like any
// source's.
func (f *Family) archiveSource(o SourceOptions) (loader.Source, error) {
	s, err := chunked.New(chunked.SourceConfig{URL: o.Archive, Family: f.ID, FamilyName: f.Name, Identity: f.RecordIdentity, Logger: o.Logger})
	if err != nil {
		return nil, err // not a nil *Source in a non-nil interface
	}
	return s, nil
}

// Tables returns the family's tables, in the order its decoder fills them.
func (f *Family) Tables() []chain.Table { return f.NewDecoder(DecoderOptions{}).Tables() }

func (f *Family) String() string { return f.Name }

// registry holds the families in ID order.
var registry []*Family

// register adds f; it panics on a reused ID or name (a programming error).
func register(f *Family) *Family {
	for _, g := range registry {
		if g.ID == f.ID || slices.ContainsFunc(append([]string{f.Name}, f.Aliases...), g.names) {
			panic(fmt.Sprintf("family: %s registered twice (ID %d)", f.Name, f.ID))
		}
	}
	// A published archive holds a family's raw records as staged: every
	// family that can name its records (RecordIdentity) can be read from
	// one.
	if f.RecordIdentity != nil && f.Sources[SourceArchive] == nil {
		f.Sources[SourceArchive] = f.archiveSource
	}
	registry = append(registry, f)
	slices.SortFunc(registry, func(a, b *Family) int { return int(a.ID) - int(b.ID) })
	return f
}

func (f *Family) names(s string) bool { return s == f.Name || slices.Contains(f.Aliases, s) }

// All returns the registered families in ID order.
func All() []*Family { return slices.Clone(registry) }

// Names returns the families' names in ID order.
func Names() []string {
	out := make([]string, len(registry))
	for i, f := range registry {
		out[i] = f.Name
	}
	return out
}

// Lookup returns the family a --chain value names (its name or an alias,
// in any case).
func Lookup(name string) (*Family, error) {
	s := strings.ToLower(strings.TrimSpace(name))
	for _, f := range registry {
		if f.names(s) {
			return f, nil
		}
	}
	return nil, fmt.Errorf("unknown chain %q (want %s)", name, strings.Join(Names(), " or "))
}

// Of returns the family of a staged record's or a store's family byte, nil
// if none is registered with it.
func Of(id chain.Family) *Family {
	for _, f := range registry {
		if f.ID == id {
			return f
		}
	}
	return nil
}
