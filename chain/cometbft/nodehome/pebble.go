package nodehome

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"
	dbm "github.com/cometbft/cometbft-db"
)

// errReadOnly is what every write to a node database returns: the source
// never changes a node's home.
var errReadOnly = errors.New("nodehome: node databases are opened read-only")

// pebbleDB is a node database of the pebbledb backend, opened read-only
// with the Pebble version CometBFT's cometbft-db writes it with (v1; the
// staging store's v2 does not open v1's oldest format versions). It is the
// small part of dbm.DB the block and state stores read with: point reads.
// cometbft-db's own pebble backend is only built with its pebbledb build
// tag, and opens read-write.
type pebbleDB struct {
	path string
	db   *pebble.DB
}

var _ dbm.DB = (*pebbleDB)(nil)

func openPebble(path string) (dbm.DB, error) {
	db, err := pebble.Open(path, &pebble.Options{ReadOnly: true, ErrorIfNotExists: true, Logger: pebbleLogger{path}})
	if err != nil {
		return nil, classifyOpen(path, err)
	}
	return &pebbleDB{path: path, db: db}, nil
}

// Get returns a copy of the value of key, or nil when there is none.
func (p *pebbleDB) Get(key []byte) ([]byte, error) {
	v, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

func (p *pebbleDB) Has(key []byte) (bool, error) {
	_, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}

func (p *pebbleDB) Set([]byte, []byte) error     { return errReadOnly }
func (p *pebbleDB) SetSync([]byte, []byte) error { return errReadOnly }
func (p *pebbleDB) Delete([]byte) error          { return errReadOnly }
func (p *pebbleDB) DeleteSync([]byte) error      { return errReadOnly }
func (p *pebbleDB) Compact(_, _ []byte) error    { return errReadOnly }
func (p *pebbleDB) NewBatch() dbm.Batch          { return readOnlyBatch{} }

// Iterator and ReverseIterator are not used by the reads this source makes.
func (p *pebbleDB) Iterator(_, _ []byte) (dbm.Iterator, error) {
	return nil, fmt.Errorf("nodehome: %s: iterators are not supported", p.path)
}

func (p *pebbleDB) ReverseIterator(_, _ []byte) (dbm.Iterator, error) {
	return nil, fmt.Errorf("nodehome: %s: iterators are not supported", p.path)
}

func (p *pebbleDB) Close() error { return p.db.Close() }
func (p *pebbleDB) Print() error { return nil }

func (p *pebbleDB) Stats() map[string]string {
	return map[string]string{"metrics": p.db.Metrics().String()}
}

// pebbleLogger keeps Pebble's informational lines (WAL replay) off the
// command's output, and turns its Fatalf (on-disk corruption found while
// reading) into a panic the source's reads recover as a *CorruptError,
// where Pebble's default logger would exit the process.
type pebbleLogger struct{ path string }

func (pebbleLogger) Infof(string, ...any) {}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Errorf("pebble: "+format, args...))
}

// readOnlyBatch refuses every write.
type readOnlyBatch struct{}

func (readOnlyBatch) Set([]byte, []byte) error { return errReadOnly }
func (readOnlyBatch) Delete([]byte) error      { return errReadOnly }
func (readOnlyBatch) Write() error             { return errReadOnly }
func (readOnlyBatch) WriteSync() error         { return errReadOnly }
func (readOnlyBatch) Close() error             { return nil }
