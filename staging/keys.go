package staging

import "encoding/binary"

// Key layout. Every keyspace is one prefix byte; heights are big-endian so
// byte order is numeric order and a height range is one bounded iterator.
//
//	'b' height        the staged value (header + compressed raw record)
//	'h' height        the index entry: hash and parent hash only. Scans for
//	                  missing heights and continuity read this small
//	                  keyspace instead of the multi-KB block values.
//	'm' target        the export checkpoint mirrored for one target
//	'i'               the store's identity (which chain it holds)
//	't'               the chain of trust's checkpoint: how far the staged
//	                  history is proven, from which root (trust.go)
const (
	prefixBlock  = 'b'
	prefixIndex  = 'h'
	prefixMirror = 'm'
	prefixIdent  = 'i'
	prefixTrust  = 't'
)

func heightKey(prefix byte, h uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], h)
	return k
}

// keyHeight returns the height of a block or index key.
func keyHeight(k []byte) uint64 { return binary.BigEndian.Uint64(k[1:9]) }

// boundsFor returns iterator bounds covering heights [from, to] of prefix.
func boundsFor(prefix byte, from, to uint64) (lower, upper []byte) {
	lower = heightKey(prefix, from)
	if to == ^uint64(0) {
		return lower, []byte{prefix + 1}
	}
	return lower, heightKey(prefix, to+1)
}

func indexValue(hash, parent []byte) []byte {
	v := make([]byte, 0, 2+len(hash)+len(parent))
	v = append(v, byte(len(hash)))
	v = append(v, hash...)
	v = append(v, byte(len(parent)))
	return append(v, parent...)
}

func parseIndexValue(v []byte) (hash, parent []byte, ok bool) {
	if len(v) < 2 {
		return nil, nil, false
	}
	n := int(v[0])
	if 1+n+1 > len(v) {
		return nil, nil, false
	}
	m := int(v[1+n])
	if 2+n+m != len(v) {
		return nil, nil, false
	}
	return v[1 : 1+n], v[2+n:], true
}
