package nodehome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	dbm "github.com/cometbft/cometbft-db"
	abci "github.com/cometbft/cometbft/abci/types"
	cmtjson "github.com/cometbft/cometbft/libs/json"
	cmtstate "github.com/cometbft/cometbft/proto/tendermint/state"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	sm "github.com/cometbft/cometbft/state"
	"github.com/cometbft/cometbft/store"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// Config configures a Source.
type Config struct {
	// Home is the node's home directory (the one holding config/ and
	// data/); required.
	Home string
	// CheckDataHash checks each block's data_hash against its txs here, as
	// CometBFT's BlockFromProto does: for a job whose loader recomputes
	// nothing of a block (--verify-blocks links). Otherwise the loader's
	// verification of the record checks it, and it is not made twice.
	CheckDataHash bool
}

// Source serves CometBFT records from a node's home. It is safe for
// concurrent use (the block store and state store are read-only views of
// databases that allow concurrent reads); Close releases the databases
// once no Fetch is running.
type Source struct {
	home      string
	genesis   string // genesis_file, resolved
	blockPath string
	statePath string
	blockDB   dbm.DB
	stateDB   dbm.DB
	blocks    *store.BlockStore
	state     sm.Store
	discard   bool
	// checkDataHash: see Config.CheckDataHash.
	checkDataHash bool
	// legacyShape is set for the home of a 0.37 (or 0.34) node: its latest
	// results are legacy ABCIResponses, and its RPC answered /block_results
	// in the 0.37 shape.
	legacyShape bool
	// bytesAttrs is set for the home of a 0.34 node (the software version
	// in its state): its event attributes are bytes, which its RPC wrote
	// in base64.
	bytesAttrs bool
	tip        uint64
	chainID    string
	closeOnce  sync.Once

	// checked is the last range CheckRange found whole: a job asks for its
	// range more than once before it fetches (the run's preflight, then
	// the loader), and each pass reads a key per height.
	checkedMu            sync.Mutex
	checkedFrom, checked uint64
}

// Open opens the node home of cfg read-only and reads what it holds: its
// base and latest heights, its chain id and the shape of its results. It
// refuses a home whose databases a running node holds (*LockedError), a
// backend other than goleveldb or pebbledb, and a damaged database
// (*CorruptError).
func Open(cfg Config) (*Source, error) {
	if cfg.Home == "" {
		return nil, refuse(errors.New("nodehome: no node home"))
	}
	home, err := filepath.Abs(cfg.Home)
	if err != nil {
		return nil, refuse(fmt.Errorf("nodehome: %w", err))
	}
	nc, err := readConfig(home)
	if err != nil {
		return nil, err
	}
	if nc.DBBackend != backendGoLevelDB && nc.DBBackend != backendPebble {
		return nil, refuse(fmt.Errorf("nodehome: %s: db_backend %q is not supported (goleveldb and pebbledb are)",
			filepath.Join(home, "config", "config.toml"), nc.DBBackend))
	}
	dir := nc.dbDir(home)
	s := &Source{
		home:      home,
		blockPath: filepath.Join(dir, "blockstore.db"),
		statePath: filepath.Join(dir, "state.db"),
		discard:   nc.Storage.DiscardABCIResponses,
		genesis:   nc.genesisPath(home),

		checkDataHash: cfg.CheckDataHash,
	}
	// Both are opened at once: opening replays each database's write-ahead
	// log in memory, on the job's start-up path.
	var stateErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.stateDB, stateErr = openDB(nc.DBBackend, dir, "state")
	}()
	s.blockDB, err = openDB(nc.DBBackend, dir, "blockstore")
	wg.Wait()
	if err == nil {
		err = stateErr
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.load(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// load reads the block store's state, the chain id and the results' shape.
func (s *Source) load() (err error) {
	defer s.recoverCorrupt(s.blockPath, 0, &err)
	s.blocks = store.NewBlockStore(s.blockDB)
	// The state store is only read: the discard option is checked here, by
	// the source, so that a refusal can name the first height.
	s.state = sm.NewStore(s.stateDB, sm.StoreOptions{DiscardABCIResponses: false})
	height := s.blocks.Height()
	if height <= 0 {
		return refuse(fmt.Errorf("nodehome: %s holds no blocks", s.blockPath))
	}
	meta := s.blocks.LoadBlockMeta(height)
	if meta == nil {
		return &CorruptError{Path: s.blockPath, Height: uint64(height), Err: errors.New("no block meta at the store's latest height")}
	}
	s.chainID = meta.Header.ChainID
	s.tip = uint64(height)
	if s.discard {
		return nil
	}
	// A node stopped between saving a block and its results holds the
	// block alone; its results come when it replays the block on restart.
	buf, err := s.stateDB.Get(resultsKey(s.tip))
	if err != nil {
		return &CorruptError{Path: s.statePath, Height: s.tip, Err: err}
	}
	if len(buf) == 0 && s.tip > 1 {
		s.tip--
		if buf, err = s.stateDB.Get(resultsKey(s.tip)); err != nil {
			return &CorruptError{Path: s.statePath, Height: s.tip, Err: err}
		}
	}
	if len(buf) > 0 {
		s.legacyShape = isLegacy(buf)
	}
	if s.legacyShape {
		sw, err := s.software()
		if err != nil {
			return err
		}
		s.bytesAttrs = strings.HasPrefix(sw, "0.34.")
	}
	return nil
}

// software returns the version of the node software that last wrote the
// home's state (State.Version.Software: "0.34.35", "0.37.16").
func (s *Source) software() (string, error) {
	buf, err := s.stateDB.Get([]byte("stateKey")) // state/store.go stateKey, 0.34 to 0.38
	if err != nil {
		return "", &CorruptError{Path: s.statePath, Err: err}
	}
	var st cmtstate.State
	if err := st.Unmarshal(buf); err != nil {
		return "", &CorruptError{Path: s.statePath, Err: fmt.Errorf("state: %w", err)}
	}
	return st.Version.Software, nil
}

// recoverCorrupt turns a panic of the block store (it panics on any read
// or decode error) into a *CorruptError in *err.
func (s *Source) recoverCorrupt(path string, height uint64, err *error) {
	if r := recover(); r != nil {
		e, ok := r.(error)
		if !ok {
			e = fmt.Errorf("%v", r)
		}
		*err = &CorruptError{Path: path, Height: height, Err: e}
	}
}

// Close releases the databases. Later calls do nothing.
func (s *Source) Close() {
	s.closeOnce.Do(func() {
		if s.blockDB != nil {
			s.blockDB.Close()
		}
		if s.stateDB != nil {
			s.stateDB.Close()
		}
	})
}

// Family returns chain.FamilyCometBFT.
func (s *Source) Family() chain.Family { return chain.FamilyCometBFT }

// ChainID returns the chain id of the home's latest block header.
func (s *Source) ChainID(context.Context) (string, error) { return s.chainID, nil }

// Tip returns the highest height whose block and results the home holds.
func (s *Source) Tip(context.Context) (uint64, error) { return s.tip, nil }

// Base returns the lowest height the home's block store holds.
func (s *Source) Base() uint64 { return uint64(s.blocks.Base()) }

// LegacyShape reports whether results are written in the 0.37 shape (the
// home is a 0.37 or 0.34 node's).
func (s *Source) LegacyShape() bool { return s.legacyShape }

// BytesAttributes reports whether event attributes are written as a 0.34
// node's RPC wrote them, in base64 (the home is a 0.34 node's).
func (s *Source) BytesAttributes() bool { return s.bytesAttrs }

// String names the source for logs.
func (s *Source) String() string { return s.home }

// CheckRange returns an *UnavailableError naming the first height of
// from..to the home cannot serve: every height when results are discarded,
// the heights below the block store's base (pruned), a height whose results
// are not stored, a height above the tip. It reads a key per height, so a
// run is refused before anything is staged; a range within the last one it
// found whole is not read again.
func (s *Source) CheckRange(ctx context.Context, from, to uint64) error {
	if s.discard {
		return &UnavailableError{Home: s.home, Height: from,
			Reason: "config.toml sets discard_abci_responses = true: the node keeps no block results"}
	}
	if base := s.Base(); from < base {
		return &UnavailableError{Home: s.home, Height: from,
			Reason: fmt.Sprintf("pruned: the block store's lowest height is %d", base)}
	}
	if to > s.tip {
		return &UnavailableError{Home: s.home, Height: s.tip + 1,
			Reason: fmt.Sprintf("above the home's latest height %d", s.tip)}
	}
	s.checkedMu.Lock()
	whole := s.checked > 0 && from >= s.checkedFrom && to <= s.checked
	s.checkedMu.Unlock()
	if whole {
		return nil
	}
	if err := s.checkResults(ctx, from, to); err != nil {
		return err
	}
	s.checkedMu.Lock()
	s.checkedFrom, s.checked = from, to
	s.checkedMu.Unlock()
	return nil
}

// checkResults returns an *UnavailableError naming the first height of
// from..to with no results stored. A long range is read in parts at once,
// one a core (checkParts), each through its own cursor: the check reads
// every results value of the range before anything is fetched, on the
// job's start-up path, where nothing else runs.
func (s *Source) checkResults(ctx context.Context, from, to uint64) error {
	n := min(uint64(checkParts()), (to-from+1)/minCheckPart)
	if n <= 1 {
		return s.checkSpan(ctx, from, to)
	}
	size := (to - from + 1) / n
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		lo, hi := from+i*size, from+(i+1)*size-1
		if i == n-1 {
			hi = to
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.checkSpan(ctx, lo, hi)
		}()
	}
	wg.Wait()
	for _, err := range errs { // the lowest part's: the first height
		if err != nil {
			return err
		}
	}
	return nil
}

// minCheckPart is the fewest heights a part of the check reads.
const minCheckPart = 1024

func checkParts() int { return min(runtime.GOMAXPROCS(0), 8) }

// checkSpan is checkResults over from..to with one cursor, in order.
func (s *Source) checkSpan(ctx context.Context, from, to uint64) (err error) {
	h := from
	defer s.recoverCorrupt(s.statePath, h, &err)
	c, err := openCursor(s.stateDB)
	if err != nil {
		return &CorruptError{Path: s.statePath, Height: from, Err: err}
	}
	defer c.Close()
	var key []byte
	for ; h <= to; h++ {
		if h%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		key = appendResultsKey(key[:0], h)
		_, ok, err := c.get(key)
		if err != nil {
			return &CorruptError{Path: s.statePath, Height: h, Err: err}
		}
		if !ok {
			return s.noResults(h)
		}
	}
	return nil
}

// Fetch returns the records of heights from..to, in order.
func (s *Source) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if to < from {
		return nil, fmt.Errorf("nodehome: fetch: empty range %d-%d", from, to)
	}
	r, err := s.openReads()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := make([]chain.Block, 0, to-from+1)
	for h := from; h <= to; h++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := s.block(r, h)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Record returns the raw record of height h: the /block and /block_results
// results the node's RPC would have answered, joined by
// cometbft.MarshalRecord.
func (s *Source) Record(h uint64) ([]byte, error) {
	r, err := s.openReads()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := s.block(r, h)
	return b.Raw, err
}

// reads are the cursors a Fetch reads its heights with, one for each kind
// of key (block metas "H:h", block parts "P:h:i", results), so that each
// steps through its keys in order, and the buffer of the key asked for.
// They are used by one goroutine.
type reads struct {
	metas, parts, results *cursor
	key                   []byte
}

func (s *Source) openReads() (_ *reads, err error) {
	r := &reads{}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.metas, err = openCursor(s.blockDB); err != nil {
		return nil, &CorruptError{Path: s.blockPath, Err: err}
	}
	if r.parts, err = openCursor(s.blockDB); err != nil {
		return nil, &CorruptError{Path: s.blockPath, Err: err}
	}
	if r.results, err = openCursor(s.stateDB); err != nil {
		return nil, &CorruptError{Path: s.statePath, Err: err}
	}
	return r, nil
}

func (r *reads) Close() {
	for _, c := range []*cursor{r.metas, r.parts, r.results} {
		if c != nil {
			c.Close()
		}
	}
}

// block returns height h's record with its identity. The hash and parent
// hash are the block meta's and header's, the values its record is written
// from (the loader recomputes the hash from the record and compares).
func (s *Source) block(r *reads, h uint64) (chain.Block, error) {
	block, err := s.loadBlock(r, h)
	if err != nil {
		return chain.Block{}, err
	}
	results, err := s.loadResults(r, h)
	if err != nil {
		return chain.Block{}, err
	}
	if got := block.Block.Height; got != int64(h) {
		return chain.Block{}, &CorruptError{Path: s.blockPath, Height: h, Err: fmt.Errorf("block header height is %d", got)}
	}
	if len(block.BlockID.Hash) == 0 {
		return chain.Block{}, &CorruptError{Path: s.blockPath, Height: h, Err: errors.New("block meta has no block hash")}
	}
	var parent []byte
	if p := block.Block.LastBlockID.Hash; len(p) > 0 {
		parent = p
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	if sc.block, err = appendBlock(sc.block[:0], block); err != nil {
		return chain.Block{}, err
	}
	if sc.results, err = appendResults(sc.results[:0], results, s.bytesAttrs); err != nil {
		return chain.Block{}, err
	}
	return chain.Block{Height: h, Hash: block.BlockID.Hash, ParentHash: parent,
		Raw: cometbft.MarshalRecord(sc.block, sc.results)}, nil
}

// scratch holds the two results of a record while they are written;
// MarshalRecord copies them into the record, which is allocated once, at
// its size.
type scratch struct{ block, results []byte }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// loadBlock reads what /block?height=h answers (rpc/core Block): the block
// meta's block id and the block. It reads as store.BlockStore's LoadBlockMeta
// and LoadBlock do, through r's cursor, and decodes of the meta only its
// block id and of each part only its bytes.
func (s *Source) loadBlock(r *reads, h uint64) (out *ctypes.ResultBlock, err error) {
	defer s.recoverCorrupt(s.blockPath, h, &err)
	r.key = strconv.AppendUint(append(r.key[:0], "H:"...), h, 10) // store.calcBlockMetaKey
	v, _, err := r.metas.get(r.key)
	if err != nil {
		return nil, &CorruptError{Path: s.blockPath, Height: h, Err: err}
	}
	if len(v) == 0 {
		if base := s.Base(); h < base {
			return nil, &UnavailableError{Home: s.home, Height: h, Reason: fmt.Sprintf("pruned: the block store's lowest height is %d", base)}
		}
		return nil, &UnavailableError{Home: s.home, Height: h, Reason: "no block stored at this height"}
	}
	id, err := metaBlockID(v)
	if err != nil {
		return nil, &CorruptError{Path: s.blockPath, Height: h, Err: fmt.Errorf("block meta: %w", err)}
	}
	var buf []byte
	for i := range uint64(id.PartSetHeader.Total) {
		r.key = strconv.AppendUint(append(strconv.AppendUint(append(r.key[:0], "P:"...), h, 10), ':'), i, 10) // calcBlockPartKey
		v, _, err := r.parts.get(r.key)
		if err != nil {
			return nil, &CorruptError{Path: s.blockPath, Height: h, Err: err}
		}
		if len(v) == 0 {
			return nil, &CorruptError{Path: s.blockPath, Height: h, Err: errors.New("block meta without its block parts")}
		}
		if buf, err = appendPartBytes(buf, v); err != nil {
			return nil, &CorruptError{Path: s.blockPath, Height: h, Err: fmt.Errorf("block part %d: %w", i, err)}
		}
	}
	var pb cmtproto.Block
	if err := pb.Unmarshal(buf); err != nil {
		return nil, &CorruptError{Path: s.blockPath, Height: h, Err: fmt.Errorf("read block: %w", err)}
	}
	block, err := blockFromProto(&pb, s.checkDataHash)
	if err != nil {
		return nil, &CorruptError{Path: s.blockPath, Height: h, Err: fmt.Errorf("read block: %w", err)}
	}
	return &ctypes.ResultBlock{BlockID: id, Block: block}, nil
}

// loadResults reads what /block_results?height=h answers: rpc/core
// BlockResults of 0.38 (*ctypes.ResultBlockResults), or of 0.37 for a 0.37
// node's home (*resultBlockResults037).
func (s *Source) loadResults(r *reads, h uint64) (_ any, err error) {
	if s.discard {
		return nil, &UnavailableError{Home: s.home, Height: h,
			Reason: "config.toml sets discard_abci_responses = true: the node keeps no block results"}
	}
	defer s.recoverCorrupt(s.statePath, h, &err)
	r.key = appendResultsKey(r.key[:0], h)
	buf, _, err := r.results.get(r.key)
	if err != nil {
		return nil, &CorruptError{Path: s.statePath, Height: h, Err: err}
	}
	if len(buf) == 0 {
		return nil, s.noResults(h)
	}
	if s.legacyShape {
		var legacy cmtstate.LegacyABCIResponses
		if err := legacy.Unmarshal(buf); err != nil {
			return nil, &CorruptError{Path: s.statePath, Height: h, Err: fmt.Errorf("legacy ABCI responses: %w", err)}
		}
		return legacyResults(int64(h), &legacy), nil
	}
	// state.Store's LoadFinalizeBlockResponse, over the value read: results
	// that are not a finalize-block response with an app hash are legacy
	// ABCIResponses (a home upgraded from 0.37), which it converts.
	res := new(abci.ResponseFinalizeBlock)
	if err := res.Unmarshal(buf); err != nil || res.AppHash == nil {
		if res, err = s.state.LoadFinalizeBlockResponse(int64(h)); err != nil {
			var none sm.ErrNoABCIResponsesForHeight
			if errors.As(err, &none) {
				return nil, s.noResults(h)
			}
			return nil, &CorruptError{Path: s.statePath, Height: h, Err: err}
		}
	}
	return &ctypes.ResultBlockResults{
		Height:                int64(h),
		TxsResults:            res.TxResults,
		FinalizeBlockEvents:   res.Events,
		ValidatorUpdates:      res.ValidatorUpdates,
		ConsensusParamUpdates: res.ConsensusParamUpdates,
		AppHash:               res.AppHash,
	}, nil
}

// appendBlock appends the /block result r as the node's RPC writes it:
// by appendBlockResult, or libs/json for what that does not write.
func appendBlock(dst []byte, r *ctypes.ResultBlock) ([]byte, error) {
	if b, ok := appendBlockResult(dst, r.BlockID, r.Block); ok {
		return b, nil
	}
	b, err := rpcResult(r)
	return append(dst, b...), err
}

// appendResults appends the /block_results result r (a loadResults
// value) as the node's RPC writes it: by appendBlockResults or
// appendLegacyResults, or libs/json for what those do not write (with a
// 0.34 node's attributes, bytesAttrs, turned to their base64 text first).
func appendResults(dst []byte, r any, bytesAttrs bool) ([]byte, error) {
	switch r := r.(type) {
	case *ctypes.ResultBlockResults:
		if b, ok := appendBlockResults(dst, r); ok {
			return b, nil
		}
	case *resultBlockResults037:
		if b, ok := appendLegacyResults(dst, r, bytesAttrs); ok {
			return b, nil
		}
		if bytesAttrs {
			base64Attributes(r)
		}
	}
	b, err := rpcResult(r)
	return append(dst, b...), err
}

func (s *Source) noResults(h uint64) error {
	return &UnavailableError{Home: s.home, Height: h, Reason: "no block results stored for it (pruned or discarded)"}
}

// rpcResult encodes v as the node's JSON-RPC server encodes a result:
// libs/json (rpc/jsonrpc/types NewRPCSuccessResponse), then embedded as a
// json.RawMessage in the response that encoding/json marshals, which
// compacts it and escapes HTML characters. That second pass changes no
// byte of libs/json's output, so it is not run: libs/json writes its own
// punctuation without spaces ({ } [ ] , : and registered type names of
// ASCII letters, digits, / and _), and everything else through an
// encoding/json Encoder, which writes compact JSON with HTML escaping and
// compacts and escapes what a json.Marshaler (jsonpb's ExecTxResult)
// returns. The byte-for-byte tests against the node's RPC hold it. It
// writes what encode.go's encoders leave, and is their reference in tests.
func rpcResult(v any) (json.RawMessage, error) {
	b, err := cmtjson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("nodehome: encode result: %w", err)
	}
	return b, nil
}

// resultsKey is the state store's key of a height's results
// (state/store.go calcABCIResponsesKey, the same in 0.34 to 0.38).
func resultsKey(h uint64) []byte { return appendResultsKey(nil, h) }

func appendResultsKey(dst []byte, h uint64) []byte {
	return strconv.AppendUint(append(dst, "abciResponsesKey:"...), h, 10)
}

// isLegacy is CometBFT 0.38's own test (state/store.go
// LoadFinalizeBlockResponse) for results stored as the legacy
// ABCIResponses of 0.34/0.37: they do not decode as a finalize-block
// response, or decode to one without an app hash.
func isLegacy(buf []byte) bool {
	var resp abci.ResponseFinalizeBlock
	return resp.Unmarshal(buf) != nil || resp.AppHash == nil
}

// UnavailableError is a height the home cannot serve: pruned, results
// discarded, or above its latest height. It is not retryable.
type UnavailableError struct {
	Home   string
	Height uint64
	Reason string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("nodehome: height %d is not available in node home %s: %s", e.Height, e.Home, e.Reason)
}

// Is matches cometbft.ErrUnavailable, as the RPC source's error does, and
// chain.ErrSourceRefused: a home never gains the height it lacks.
func (e *UnavailableError) Is(target error) bool {
	return target == cometbft.ErrUnavailable || target == chain.ErrSourceRefused
}

// Fault marks the error as configuration (exit 2, as chain.ErrSourceRefused
// says): the home will not have the height later.
func (e *UnavailableError) Fault() fault.Class { return fault.Config }
