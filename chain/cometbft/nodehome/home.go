package nodehome

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	dbm "github.com/cometbft/cometbft-db"
	"github.com/pelletier/go-toml/v2"
	"github.com/syndtr/goleveldb/leveldb/opt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// nodeConfig is what the source reads of a node's config/config.toml: the
// database backend and directory, and whether results are kept.
type nodeConfig struct {
	GenesisFile string `toml:"genesis_file"`
	DBBackend   string `toml:"db_backend"`
	DBDir       string `toml:"db_dir"`
	Storage     struct {
		DiscardABCIResponses bool `toml:"discard_abci_responses"`
	} `toml:"storage"`
}

// Backends the source reads, by the name config.toml gives them.
const (
	backendGoLevelDB = "goleveldb"
	backendPebble    = "pebbledb"
)

// readConfig reads home/config/config.toml. A home without one is refused:
// it is how a node home is recognised, and the backend is named there.
func readConfig(home string) (nodeConfig, error) {
	var c nodeConfig
	path := filepath.Join(home, "config", "config.toml")
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return c, refuse(fmt.Errorf("nodehome: %s is not a CometBFT node home: no %s", home, path))
		}
		return c, refuse(fmt.Errorf("nodehome: read %s: %w", path, err))
	}
	if err := toml.Unmarshal(b, &c); err != nil {
		return c, refuse(fmt.Errorf("nodehome: read %s: %w", path, err))
	}
	if c.DBBackend == "" {
		c.DBBackend = backendGoLevelDB // CometBFT's default
	}
	if c.DBDir == "" {
		c.DBDir = "data"
	}
	return c, nil
}

// dbDir is where the node keeps its databases (db_dir, relative to home).
func (c nodeConfig) dbDir(home string) string {
	if filepath.IsAbs(c.DBDir) {
		return c.DBDir
	}
	return filepath.Join(home, c.DBDir)
}

// ErrLocked is matched (errors.Is) by a *LockedError.
var ErrLocked = errors.New("nodehome: database locked by a running node")

// LockedError is a node database another process holds: the node is
// running. Its lock is never taken from it.
type LockedError struct {
	Path string
	Err  error
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("nodehome: %s is locked by a running node (%v): stop the node first, or read a copy of its home "+
		"(stop it and copy the home, or take a filesystem snapshot and mount it; see docs/sources.md)", e.Path, e.Err)
}

func (e *LockedError) Unwrap() error { return e.Err }
func (e *LockedError) Is(target error) bool {
	return target == ErrLocked || target == chain.ErrSourceRefused
}

// Fault marks the error as configuration (exit 2, as chain.ErrSourceRefused
// says): not transient, the node holds its lock until it stops.
func (e *LockedError) Fault() fault.Class { return fault.Config }

// ErrCorrupt is matched (errors.Is) by a *CorruptError.
var ErrCorrupt = errors.New("nodehome: damaged node database")

// CorruptError is a node database that cannot be read: a damaged file, a
// record that does not decode. Height is 0 when the damage is not tied to
// one height (the database would not open).
type CorruptError struct {
	Path   string
	Height uint64
	Err    error
}

func (e *CorruptError) Error() string {
	if e.Height == 0 {
		return fmt.Sprintf("nodehome: damaged node database %s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("nodehome: damaged node database %s at height %d: %v", e.Path, e.Height, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }
func (e *CorruptError) Is(target error) bool {
	return target == ErrCorrupt || target == chain.ErrSourceDamaged
}

// Fault marks the error as data that is wrong (exit 4): reading the file
// again gives the same bytes.
func (e *CorruptError) Fault() fault.Class { return fault.Data }

// RefusedError is a home the source cannot read as asked: not a node
// home, a backend it does not read, a database missing or unreadable for
// permissions, no blocks. It matches chain.ErrSourceRefused (bad input).
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string        { return e.Err.Error() }
func (e *RefusedError) Unwrap() error        { return e.Err }
func (e *RefusedError) Is(target error) bool { return target == chain.ErrSourceRefused }

// Fault marks the error as configuration (exit 2): bad input.
func (e *RefusedError) Fault() fault.Class { return fault.Config }

func refuse(err error) error { return &RefusedError{Err: err} }

// openDB opens the node database name (blockstore or state) of the backend
// read-only.
func openDB(backend, dir, name string) (dbm.DB, error) {
	path := filepath.Join(dir, name+".db")
	if _, err := os.Stat(path); err != nil {
		return nil, refuse(fmt.Errorf("nodehome: no %s database: %w", name, err))
	}
	switch backend {
	case backendGoLevelDB:
		db, err := dbm.NewGoLevelDBWithOpts(name, dir, &opt.Options{ReadOnly: true, ErrorIfMissing: true,
			BlockCacheCapacity: levelBlockCache})
		if err != nil {
			return nil, classifyOpen(path, err)
		}
		return db, nil
	case backendPebble:
		return openPebble(path)
	}
	return nil, refuse(fmt.Errorf("nodehome: db_backend %q is not supported (goleveldb and pebbledb are)", backend))
}

// levelBlockCache is the block cache of a goleveldb node database: the
// source reads each data block once, in key order (cursor.go), so the cache
// need hold only the index blocks and the blocks its cursors stand in.
// goleveldb's default of 8 MiB a database cost more than it saved: fetch
// --node-home over 1..12,000 took 0.88x the CPU and 145 against 171 MiB at
// its peak with 1 MiB (docs/sources.md, Speed).
const levelBlockCache = 1 << 20

// classifyOpen names an error opening a database: a lock held by a running
// node, or damage.
func classifyOpen(path string, err error) error {
	if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) {
		return &LockedError{Path: path, Err: err}
	}
	if errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrNotExist) {
		return refuse(fmt.Errorf("nodehome: open %s: %w", path, err))
	}
	return &CorruptError{Path: path, Err: err}
}

// genesisPath is the node's genesis document (genesis_file, relative to
// home; config/genesis.json by default).
func (c nodeConfig) genesisPath(home string) string {
	p := c.GenesisFile
	if p == "" {
		p = filepath.Join("config", "genesis.json")
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(home, p)
}
