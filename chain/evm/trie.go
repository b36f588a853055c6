package evm

import (
	"hash"

	"golang.org/x/crypto/sha3"
)

// The roots a header commits to — transactionsRoot, receiptsRoot,
// withdrawalsRoot — are roots of Merkle-Patricia tries (the yellow paper's
// appendix D; go-ethereum trie/stacktrie.go, core/types/hashing.go
// DeriveSha) whose keys are rlp(i), the item's index, and whose values are
// the items' encodings. The trie is built here from the sorted keys in one
// recursive pass, children before their parent, without keeping nodes:
// every node is encoded once, and hashed when its encoding is 32 bytes or
// more (a smaller one is embedded in its parent as it is).

// emptyRoot is the root of an empty trie: keccak256(rlp("")).
var emptyRoot = [32]byte{
	0x56, 0xe8, 0x1f, 0x17, 0x1b, 0xcc, 0x55, 0xa6, 0xff, 0x83, 0x45, 0xe6, 0x92, 0xc0, 0xf8, 0x6e,
	0x5b, 0x48, 0xe0, 0x1b, 0x99, 0x6c, 0xad, 0xc0, 0x01, 0x62, 0x2f, 0xb5, 0xe3, 0x63, 0xb4, 0x21,
}

// trieHasher computes trie roots; its buffers are reused from one root to
// the next. Not safe for concurrent use.
type trieHasher struct {
	keys  []byte   // every key's nibbles, back to back
	items []trieKV // sorted by key
	refs  []byte   // a stack of the references of nodes built, not yet taken by their parent
	enc   []byte   // the node being encoded
	k     hash.Hash
}

type trieKV struct {
	key   []byte // nibbles
	value []byte
}

// indexRoot returns the root of the trie mapping rlp(i) to values[i].
func (t *trieHasher) indexRoot(values [][]byte) [32]byte {
	t.keys = t.keys[:0]
	t.items = t.items[:0]
	// rlp(i) sorts as 1..127 (one byte each), 0 (0x80), then 128 on
	// (0x81 0x80.., 0x82 0x01 0x00.., ...: longer after shorter, and
	// big-endian within one length).
	add := func(i int) {
		start := len(t.keys)
		var k [9]byte
		key := appendRLPIndex(k[:0], uint64(i))
		for _, c := range key {
			t.keys = append(t.keys, c>>4, c&0xf)
		}
		t.items = append(t.items, trieKV{key: t.keys[start:len(t.keys):len(t.keys)], value: values[i]})
	}
	for i := 1; i < min(len(values), 128); i++ {
		add(i)
	}
	if len(values) > 0 {
		add(0)
	}
	for i := 128; i < len(values); i++ {
		add(i)
	}
	// t.keys may have moved while growing: point the items at its final
	// backing array.
	off := 0
	for i := range t.items {
		n := len(t.items[i].key)
		t.items[i].key = t.keys[off : off+n : off+n]
		off += n
	}
	return t.root(t.items)
}

// appendRLPIndex appends rlp(i), a trie key.
func appendRLPIndex(b []byte, i uint64) []byte {
	if i == 0 {
		return append(b, 0x80)
	}
	if i < 0x80 {
		return append(b, byte(i))
	}
	var be [8]byte
	k := 8
	for v := i; v > 0; v >>= 8 {
		k--
		be[k] = byte(v)
	}
	b = append(b, 0x80+byte(8-k))
	return append(b, be[k:]...)
}

// root returns the root of the trie holding items, which are sorted by
// key, have distinct keys, and non-empty values.
func (t *trieHasher) root(items []trieKV) [32]byte {
	if len(items) == 0 {
		return emptyRoot
	}
	if t.k == nil {
		t.k = sha3.NewLegacyKeccak256()
	}
	t.refs = t.refs[:0]
	t.node(items, 0, true)
	var sum [32]byte
	copy(sum[:], t.refs[1:]) // the root's reference is always a hash
	return sum
}

// node encodes the subtrie of items below the first depth nibbles of
// their keys (which they share) and pushes its reference on t.refs: the
// encoding itself when shorter than 32 bytes, else rlp(keccak256(encoding)).
// The root is always hashed.
func (t *trieHasher) node(items []trieKV, depth int, isRoot bool) {
	if len(items) == 1 {
		// A leaf: [hex-prefix(rest of key, leaf), value].
		it := items[0]
		e := t.begin()
		e = appendHexPrefix(e, it.key[depth:], true)
		e = appendRLPString(e, it.value)
		t.push(e, isRoot)
		return
	}
	// The nibbles all keys share from depth on; items are sorted, so the
	// first and the last tell.
	first, last := items[0].key, items[len(items)-1].key
	cp := 0
	for depth+cp < len(first) && depth+cp < len(last) && first[depth+cp] == last[depth+cp] {
		cp++
	}
	base := len(t.refs)
	if cp > 0 {
		// An extension: [hex-prefix(shared nibbles, not a leaf), child].
		t.node(items, depth+cp, false)
		e := t.begin()
		e = appendHexPrefix(e, first[depth:depth+cp], false)
		e = append(e, t.refs[base:]...)
		t.refs = t.refs[:base]
		t.push(e, isRoot)
		return
	}
	// A branch: 16 children by the nibble at depth, and the value of the key
	// that ends here (sorted first), if any.
	var value []byte
	if len(first) == depth {
		value = items[0].value
		items = items[1:]
	}
	var ends [16]int // where each child's reference ends in t.refs; 0 for none
	for len(items) > 0 {
		nib := items[0].key[depth]
		n := 1
		for n < len(items) && items[n].key[depth] == nib {
			n++
		}
		t.node(items[:n], depth+1, false)
		ends[nib] = len(t.refs)
		items = items[n:]
	}
	e := t.begin()
	prev := base
	for _, end := range ends {
		if end == 0 {
			e = append(e, 0x80) // no child: the empty string
			continue
		}
		e = append(e, t.refs[prev:end]...)
		prev = end
	}
	e = appendRLPString(e, value)
	t.refs = t.refs[:base]
	t.push(e, isRoot)
}

// maxListHeader is the longest list header a node can need.
const maxListHeader = 9

// begin starts a node's encoding in t.enc, room left for its list header.
func (t *trieHasher) begin() []byte {
	if cap(t.enc) < 1024 {
		t.enc = make([]byte, maxListHeader, 1024)
	}
	return t.enc[:maxListHeader]
}

// push completes the node whose payload e holds (after begin's room) and
// pushes its reference.
func (t *trieHasher) push(e []byte, isRoot bool) {
	t.enc = e // keep the buffer if it grew
	n := len(e) - maxListHeader
	h := rlpListHeaderLen(n)
	node := appendRLPListHeader(e[maxListHeader-h:maxListHeader-h], n)
	node = node[:h+n]
	if len(node) < 32 && !isRoot {
		t.refs = append(t.refs, node...)
		return
	}
	t.k.Reset()
	t.k.Write(node)
	t.refs = append(t.refs, 0xa0)
	t.refs = t.k.Sum(t.refs)
}

// appendHexPrefix appends the hex-prefix encoding of nibbles (with the
// leaf flag or not) as an RLP string.
func appendHexPrefix(b []byte, nibbles []byte, leaf bool) []byte {
	var flag byte
	if leaf {
		flag = 2
	}
	var buf [40]byte
	p := buf[:0]
	if len(nibbles)%2 == 1 {
		p = append(p, (flag+1)<<4|nibbles[0])
		nibbles = nibbles[1:]
	} else {
		p = append(p, flag<<4)
	}
	for i := 0; i < len(nibbles); i += 2 {
		p = append(p, nibbles[i]<<4|nibbles[i+1])
	}
	return appendRLPString(b, p)
}
