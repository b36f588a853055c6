package nodehome

import (
	"bytes"
	"fmt"

	dbm "github.com/cometbft/cometbft-db"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	"github.com/cometbft/cometbft/types"
	"github.com/syndtr/goleveldb/leveldb/iterator"
	"google.golang.org/protobuf/encoding/protowire"
)

// An iter reads a node database in key order: goleveldb's iterator
// (levelIter) or Pebble's (*pebble.Iterator). Key and Value are valid until
// the next move.
type iter interface {
	SeekGE(key []byte) bool
	Next() bool
	Valid() bool
	Key() []byte
	Value() []byte
	Error() error
	Close() error
}

// newIter opens an iterator over the whole of db, one of the databases
// openDB returns.
func newIter(db dbm.DB) (iter, error) {
	switch db := db.(type) {
	case *dbm.GoLevelDB:
		return levelIter{db.DB().NewIterator(nil, nil)}, nil
	case *pebbleDB:
		return db.db.NewIter(nil)
	}
	return nil, fmt.Errorf("nodehome: no ordered reads of a %T", db)
}

// levelIter is goleveldb's iterator under iter's names.
type levelIter struct{ iterator.Iterator }

func (i levelIter) SeekGE(key []byte) bool { return i.Seek(key) }
func (i levelIter) Close() error           { i.Release(); return nil }

// A cursor reads the values of keys asked for one after another from one
// iterator. Heights are keys of decimal text (CometBFT's "H:1234",
// "abciResponsesKey:1234"), so the key after a height's is most often the
// next height's: where it is, the cursor steps to it instead of searching
// the database again, which for goleveldb is a walk over every table whose
// range holds the key (CometBFT's databases have no bloom filter) and costs
// ten times a step. Where it is not (the next key is a longer height's,
// "H:12340" after "H:1234", or a key asked for is below the cursor), the
// cursor seeks. A cursor is used by one goroutine.
type cursor struct {
	it iter
	// taken: the iterator stands on the key the last get returned, whose
	// value the caller may still hold; the next get steps past it first.
	taken bool
}

// maxSteps is how many keys a get steps over before it seeks instead.
const maxSteps = 4

func openCursor(db dbm.DB) (*cursor, error) {
	it, err := newIter(db)
	if err != nil {
		return nil, err
	}
	return &cursor{it: it}, nil
}

// get returns the value of key, valid until the next call, and whether the
// database holds the key.
func (c *cursor) get(key []byte) (value []byte, found bool, err error) {
	it := c.it
	if c.taken {
		c.taken = false
		it.Next()
	}
	for range maxSteps {
		if !it.Valid() {
			break
		}
		cmp := bytes.Compare(it.Key(), key)
		if cmp == 0 {
			c.taken = true
			return it.Value(), true, nil
		}
		if cmp > 0 {
			break
		}
		it.Next()
	}
	if err := it.Error(); err != nil {
		return nil, false, err
	}
	if it.SeekGE(key) && bytes.Equal(it.Key(), key) {
		c.taken = true
		return it.Value(), true, nil
	}
	return nil, false, it.Error()
}

// Close releases the iterator.
func (c *cursor) Close() error { return c.it.Close() }

// metaBlockID decodes the block id of a stored block meta
// (tendermint.types.BlockMeta, field 1) as types.BlockMetaFromTrustedProto
// does, leaving its header, which the block holds too.
func metaBlockID(meta []byte) (types.BlockID, error) {
	raw, err := protoField(meta, 1)
	if err != nil {
		return types.BlockID{}, err
	}
	var pb cmtproto.BlockID
	if err := pb.Unmarshal(raw); err != nil {
		return types.BlockID{}, err
	}
	id, err := types.BlockIDFromProto(&pb)
	if err != nil {
		return types.BlockID{}, err
	}
	return *id, nil
}

// appendPartBytes appends the bytes of a stored block part
// (tendermint.types.Part, field 2) to dst, leaving its Merkle proof: the
// block is checked by its hash, recomputed from the block by the loader.
func appendPartBytes(dst, part []byte) ([]byte, error) {
	raw, err := protoField(part, 2)
	if err != nil {
		return dst, err
	}
	return append(dst, raw...), nil
}

// protoField returns the length-delimited field num of the protobuf
// message msg (the last one, should it appear twice), or nil when it has
// none.
func protoField(msg []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	for len(msg) > 0 {
		n, typ, tl := protowire.ConsumeTag(msg)
		if tl < 0 {
			return nil, protowire.ParseError(tl)
		}
		msg = msg[tl:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(msg)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			out, msg = v, msg[l:]
			continue
		}
		l := protowire.ConsumeFieldValue(n, typ, msg)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		msg = msg[l:]
	}
	return out, nil
}
