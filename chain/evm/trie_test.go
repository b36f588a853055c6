package evm

import (
	"bytes"
	"encoding/hex"
	"slices"
	"testing"

	"golang.org/x/crypto/sha3"
)

// TestTrieRootVectors checks the trie against the root vectors of
// ethereum/tests (trietest.json, trieanyorder.json), which go-ethereum's
// trie tests also use: keys that share prefixes, a key that is a prefix of
// another (a branch with a value), nodes embedded in their parent.
func TestTrieRootVectors(t *testing.T) {
	for _, c := range []struct {
		kv   []string
		root string
	}{
		{nil, "56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421"},
		{[]string{"A", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, "d23786fb4a010da3ce639d66d5e904a11dbc02746d1ce25029e53290cabf28ab"},
		{[]string{"doe", "reindeer", "dog", "puppy", "dogglesworth", "cat"}, "8aad789dff2f538bca5d8ea56e8abe10f4c7ba3a5dea95fea4cd6e7c3a1168d3"},
		{[]string{"do", "verb", "horse", "stallion", "doge", "coin", "dog", "puppy"}, "5991bb8c6514148a29db676a14ac506cd2cd5775ace63c30a4fe457715e9ac84"},
		{[]string{"be", "e", "dog", "puppy", "bed", "d"}, "3f67c7a47520f79faa29255d2d3c084a7a6df0453116ed7232ff10277a8be68b"},
	} {
		var items []trieKV
		for i := 0; i < len(c.kv); i += 2 {
			items = append(items, trieKV{key: nibbles([]byte(c.kv[i])), value: []byte(c.kv[i+1])})
		}
		sortItems(items)
		var tr trieHasher
		if got := tr.root(items); hex.EncodeToString(got[:]) != c.root {
			t.Errorf("%q: root %x, want %s", c.kv, got, c.root)
		}
		if got := naiveRoot(items); hex.EncodeToString(got[:]) != c.root {
			t.Errorf("%q: naive root %x, want %s", c.kv, got, c.root)
		}
	}
}

// TestIndexRootMatchesNaive builds the index tries of every size up to
// past the one-byte keys (and past 256, where keys grow to three bytes)
// both ways.
func TestIndexRootMatchesNaive(t *testing.T) {
	var tr trieHasher
	for n := 0; n <= 300; n++ {
		values := make([][]byte, n)
		for i := range values {
			values[i] = bytes.Repeat([]byte{byte(i), byte(n)}, 1+(i*7+n)%40) // embedded and hashed nodes
		}
		got := tr.indexRoot(values)
		if want := naiveIndexRoot(values); got != want {
			t.Fatalf("%d items: root %x, naive %x", n, got, want)
		}
	}
}

// FuzzTrieRoot compares the sorted-keys trie with an independent one built
// by inserting each key into a tree of nodes and hashing that tree: the
// same root for any set of keys (of any lengths, prefixes of each other or
// not) and non-empty values.
func FuzzTrieRoot(f *testing.F) {
	f.Add([]byte("doe\x00reindeer\x00dog\x00puppy\x00dogglesworth\x00cat"))
	f.Add([]byte("do\x00verb\x00horse\x00stallion\x00doge\x00coin\x00dog\x00puppy"))
	f.Add([]byte("\x80\x00a\x00\x01\x00b\x00\x81\x80\x00c"))
	f.Add([]byte("a\x00" + string(bytes.Repeat([]byte("x"), 100))))
	f.Fuzz(func(t *testing.T, in []byte) {
		parts := bytes.Split(in, []byte{0})
		seen := map[string]bool{}
		var items []trieKV
		for i := 0; i+1 < len(parts); i += 2 {
			k, v := parts[i], parts[i+1]
			if len(v) == 0 || seen[string(k)] {
				continue
			}
			seen[string(k)] = true
			items = append(items, trieKV{key: nibbles(k), value: v})
		}
		sortItems(items)
		var tr trieHasher
		if got, want := tr.root(items), naiveRoot(items); got != want {
			t.Fatalf("%d items: root %x, naive %x", len(items), got, want)
		}
		// And the index trie over the same values.
		values := make([][]byte, len(items))
		for i := range items {
			values[i] = items[i].value
		}
		if got, want := tr.indexRoot(values), naiveIndexRoot(values); got != want {
			t.Fatalf("index trie of %d: root %x, naive %x", len(values), got, want)
		}
	})
}

func nibbles(k []byte) []byte {
	out := make([]byte, 0, 2*len(k))
	for _, c := range k {
		out = append(out, c>>4, c&0xf)
	}
	return out
}

func sortItems(items []trieKV) {
	slices.SortFunc(items, func(a, b trieKV) int { return bytes.Compare(a.key, b.key) })
}

// The independent trie: nodes built by insertion, one key at a time, in
// the order given, then encoded with a generic RLP encoder of nested
// values — no sorted input, no shared encoding code.

type naiveNode struct {
	// A short node (leaf or extension) has path; a leaf has value and no
	// child; a branch has no path.
	short    bool
	path     []byte
	value    []byte
	child    *naiveNode
	children [16]*naiveNode
}

func naiveInsert(n *naiveNode, key, value []byte) *naiveNode {
	if n == nil {
		return &naiveNode{short: true, path: key, value: value}
	}
	if n.short {
		cp := 0
		for cp < len(key) && cp < len(n.path) && key[cp] == n.path[cp] {
			cp++
		}
		if cp == len(n.path) {
			if n.child == nil { // a leaf
				if cp == len(key) {
					return &naiveNode{short: true, path: key, value: value} // replace
				}
				// The leaf's key is a prefix of the new one: a branch with a value.
				b := &naiveNode{value: n.value}
				b = naiveInsert(b, key[cp:], value)
				return wrap(n.path, b)
			}
			n.child = naiveInsert(n.child, key[cp:], value)
			return n
		}
		// Split at cp into a branch.
		b := &naiveNode{}
		rest := n.path[cp:]
		var old *naiveNode
		switch {
		case n.child == nil:
			old = &naiveNode{short: true, path: rest[1:], value: n.value}
		case len(rest) == 1:
			old = n.child
		default:
			old = &naiveNode{short: true, path: rest[1:], child: n.child}
		}
		b.children[rest[0]] = old
		b = naiveInsert(b, key[cp:], value)
		return wrap(key[:cp], b)
	}
	if len(key) == 0 {
		n.value = value
		return n
	}
	n.children[key[0]] = naiveInsert(n.children[key[0]], key[1:], value)
	return n
}

// wrap puts an extension of path above branch b (none for an empty path).
func wrap(path []byte, b *naiveNode) *naiveNode {
	if len(path) == 0 {
		return b
	}
	return &naiveNode{short: true, path: slices.Clone(path), child: b}
}

// naiveRLP encodes []byte as a string and []any as a list.
func naiveRLP(v any) []byte {
	head := func(base byte, n int) []byte {
		if n <= 55 {
			return []byte{base + byte(n)}
		}
		var be []byte
		for x := n; x > 0; x >>= 8 {
			be = append([]byte{byte(x)}, be...)
		}
		return append([]byte{base + 55 + byte(len(be))}, be...)
	}
	switch v := v.(type) {
	case []byte:
		if len(v) == 1 && v[0] < 0x80 {
			return v
		}
		return append(head(0x80, len(v)), v...)
	case rawRLP:
		return v
	case []any:
		var body []byte
		for _, e := range v {
			body = append(body, naiveRLP(e)...)
		}
		return append(head(0xc0, len(body)), body...)
	}
	panic("naiveRLP: unknown kind")
}

type rawRLP []byte // already encoded: an embedded node

// compact is the hex-prefix encoding of a path (yellow paper, appendix C).
func compact(path []byte, leaf bool) []byte {
	flag := byte(0)
	if leaf {
		flag = 2
	}
	var out []byte
	if len(path)%2 == 1 {
		out = append(out, (flag+1)<<4|path[0])
		path = path[1:]
	} else {
		out = append(out, flag<<4)
	}
	for i := 0; i < len(path); i += 2 {
		out = append(out, path[i]<<4|path[i+1])
	}
	return out
}

func naiveEncode(n *naiveNode) []byte {
	if n.short {
		if n.child == nil {
			return naiveRLP([]any{compact(n.path, true), n.value})
		}
		return naiveRLP([]any{compact(n.path, false), naiveRef(n.child)})
	}
	var l []any
	for _, c := range n.children {
		if c == nil {
			l = append(l, []byte{})
		} else {
			l = append(l, naiveRef(c))
		}
	}
	return naiveRLP(append(l, n.value))
}

func naiveRef(n *naiveNode) any {
	e := naiveEncode(n)
	if len(e) < 32 {
		return rawRLP(e)
	}
	return keccak(e)
}

func keccak(b []byte) []byte {
	k := sha3.NewLegacyKeccak256()
	k.Write(b)
	return k.Sum(nil)
}

func naiveRoot(items []trieKV) [32]byte {
	var root *naiveNode
	// Insert in reverse, so that the order differs from the sorted one.
	for i := len(items) - 1; i >= 0; i-- {
		root = naiveInsert(root, slices.Clone(items[i].key), items[i].value)
	}
	if root == nil {
		return [32]byte(keccak([]byte{0x80}))
	}
	return [32]byte(keccak(naiveEncode(root)))
}

func naiveIndexRoot(values [][]byte) [32]byte {
	var items []trieKV
	for i, v := range values {
		items = append(items, trieKV{key: nibbles(naiveRLP(naiveUint(uint64(i)))), value: v})
	}
	return naiveRoot(items)
}

func naiveUint(x uint64) []byte {
	var b []byte
	for ; x > 0; x >>= 8 {
		b = append([]byte{byte(x)}, b...)
	}
	return b
}
