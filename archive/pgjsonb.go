package archive

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonbHasher computes jsonb_hash_extended of JSON text as PostgreSQL
// would after parsing it into jsonb: objects' keys sorted by length, then
// bytes, a duplicated key keeping its last value; strings unescaped;
// numbers as numeric. The hash walks the value's tokens in that order:
// the start of an array or object XORs a constant in, every key, value and
// element rotates the hash by one bit in each 32-bit half and XORs its own
// hash in. A jsonbHasher reuses its buffers: one per goroutine.
type jsonbHasher struct {
	order wordOrder // the server's
	in    []byte
	pos   int
	ops   []jsonbOp
	strs  []byte
	tmp   []jsonbOp
}

// jsonbOp is one token's step: XOR a container's flag (begin) or rotate and
// XOR a scalar's hash.
type jsonbOp struct {
	begin bool
	v     uint64
}

const (
	jbFArray  = 0x40000000
	jbFObject = 0x20000000
)

// hash returns jsonb_hash_extended(text::jsonb, seed).
func (j *jsonbHasher) hash(text []byte, seed uint64) (uint64, error) {
	j.in, j.pos, j.ops, j.strs = text, 0, j.ops[:0], j.strs[:0]
	j.skipSpace()
	c, ok := j.peek()
	if !ok {
		return 0, errors.New("jsonb: empty")
	}
	var empty bool
	if c == '[' || c == '{' {
		if err := j.value(seed); err != nil {
			return 0, err
		}
		empty = len(j.ops) == 1 // a root container without members
	} else { // a raw scalar is stored as a one-element array
		j.ops = append(j.ops, jsonbOp{begin: true, v: jbFArray<<32 | jbFArray})
		if err := j.value(seed); err != nil {
			return 0, err
		}
	}
	j.skipSpace()
	if j.pos != len(j.in) {
		return 0, fmt.Errorf("jsonb: text after the value at byte %d", j.pos)
	}
	if empty {
		return seed, nil
	}
	var h uint64
	for _, op := range j.ops {
		if op.begin {
			h ^= op.v
		} else {
			h = (h<<1)&0xfffffffefffffffe | (h>>31)&0x100000001
			h ^= op.v
		}
	}
	return h, nil
}

func (j *jsonbHasher) peek() (byte, bool) {
	if j.pos < len(j.in) {
		return j.in[j.pos], true
	}
	return 0, false
}

func (j *jsonbHasher) skipSpace() {
	for j.pos < len(j.in) {
		switch j.in[j.pos] {
		case ' ', '\t', '\n', '\r':
			j.pos++
		default:
			return
		}
	}
}

// value appends the ops of the value at pos.
func (j *jsonbHasher) value(seed uint64) error {
	j.skipSpace()
	c, ok := j.peek()
	if !ok {
		return errors.New("jsonb: unexpected end")
	}
	switch {
	case c == '[':
		j.pos++
		j.ops = append(j.ops, jsonbOp{begin: true, v: jbFArray<<32 | jbFArray})
		j.skipSpace()
		if c, _ := j.peek(); c == ']' {
			j.pos++
			return nil
		}
		for {
			if err := j.value(seed); err != nil {
				return err
			}
			j.skipSpace()
			c, _ := j.peek()
			j.pos++
			if c == ']' {
				return nil
			}
			if c != ',' {
				return fmt.Errorf("jsonb: expected , or ] at byte %d", j.pos-1)
			}
		}
	case c == '{':
		return j.object(seed)
	case c == '"':
		s, err := j.str()
		if err != nil {
			return err
		}
		j.ops = append(j.ops, jsonbOp{v: pgHashBytes(j.order, s, seed)})
	case c == 't' && bytes.HasPrefix(j.in[j.pos:], []byte("true")):
		j.pos += 4
		j.ops = append(j.ops, jsonbOp{v: jsonbBool(true, seed)})
	case c == 'f' && bytes.HasPrefix(j.in[j.pos:], []byte("false")):
		j.pos += 5
		j.ops = append(j.ops, jsonbOp{v: jsonbBool(false, seed)})
	case c == 'n' && bytes.HasPrefix(j.in[j.pos:], []byte("null")):
		j.pos += 4
		j.ops = append(j.ops, jsonbOp{v: seed + 1})
	case c == '-' || c >= '0' && c <= '9':
		h, err := j.number(seed)
		if err != nil {
			return err
		}
		j.ops = append(j.ops, jsonbOp{v: h})
	default:
		return fmt.Errorf("jsonb: unexpected %q at byte %d", c, j.pos)
	}
	return nil
}

// jsonbBool is a jsonb boolean's hash: fixed values without a seed,
// hashcharextended with one.
func jsonbBool(b bool, seed uint64) uint64 {
	if seed == 0 {
		if b {
			return 0x02
		}
		return 0x04
	}
	if b {
		return pgHashUint32(1, seed)
	}
	return pgHashUint32(0, seed)
}

// object appends an object's ops with its pairs in jsonb's key order.
func (j *jsonbHasher) object(seed uint64) error {
	j.pos++ // {
	j.ops = append(j.ops, jsonbOp{begin: true, v: jbFObject<<32 | jbFObject})
	type pair struct {
		key        []byte
		order      int
		start, end int // its ops
	}
	var pairs []pair
	start := len(j.ops)
	j.skipSpace()
	if c, _ := j.peek(); c == '}' {
		j.pos++
		return nil
	}
	for {
		j.skipSpace()
		if c, _ := j.peek(); c != '"' {
			return fmt.Errorf("jsonb: expected a key at byte %d", j.pos)
		}
		k, err := j.str()
		if err != nil {
			return err
		}
		p := pair{key: k, order: len(pairs), start: len(j.ops)}
		j.ops = append(j.ops, jsonbOp{v: pgHashBytes(j.order, k, seed)})
		j.skipSpace()
		if c, _ := j.peek(); c != ':' {
			return fmt.Errorf("jsonb: expected : at byte %d", j.pos)
		}
		j.pos++
		if err := j.value(seed); err != nil {
			return err
		}
		p.end = len(j.ops)
		pairs = append(pairs, p)
		j.skipSpace()
		c, _ := j.peek()
		j.pos++
		if c == '}' {
			break
		}
		if c != ',' {
			return fmt.Errorf("jsonb: expected , or } at byte %d", j.pos-1)
		}
	}
	if len(pairs) == 1 {
		return nil
	}
	// Sorted by length, then bytes; of equal keys the last one written
	// first, and only it kept.
	slices.SortStableFunc(pairs, func(a, b pair) int {
		if len(a.key) != len(b.key) {
			return len(a.key) - len(b.key)
		}
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return b.order - a.order
	})
	j.tmp = append(j.tmp[:0], j.ops[start:]...)
	j.ops = j.ops[:start]
	for i, p := range pairs {
		if i > 0 && bytes.Equal(p.key, pairs[i-1].key) {
			continue
		}
		j.ops = append(j.ops, j.tmp[p.start-start:p.end-start]...)
	}
	return nil
}

// str reads a JSON string at pos and returns it unescaped. The bytes are
// valid until the next call of hash.
func (j *jsonbHasher) str() ([]byte, error) {
	j.pos++ // "
	begin := j.pos
	for i := j.pos; i < len(j.in); i++ {
		switch j.in[i] {
		case '"':
			j.pos = i + 1
			return j.in[begin:i], nil
		case '\\':
			return j.escaped(begin)
		}
	}
	return nil, errors.New("jsonb: unterminated string")
}

// escaped reads a string holding escapes, from begin, into strs.
func (j *jsonbHasher) escaped(begin int) ([]byte, error) {
	at := len(j.strs)
	i := begin
	for i < len(j.in) {
		c := j.in[i]
		switch {
		case c == '"':
			j.pos = i + 1
			return j.strs[at:len(j.strs):len(j.strs)], nil
		case c != '\\':
			j.strs = append(j.strs, c)
			i++
			continue
		}
		if i+1 >= len(j.in) {
			break
		}
		e := j.in[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			j.strs = append(j.strs, e)
		case 'b':
			j.strs = append(j.strs, '\b')
		case 'f':
			j.strs = append(j.strs, '\f')
		case 'n':
			j.strs = append(j.strs, '\n')
		case 'r':
			j.strs = append(j.strs, '\r')
		case 't':
			j.strs = append(j.strs, '\t')
		case 'u':
			r, n, err := j.unicode(i)
			if err != nil {
				return nil, err
			}
			i = n
			j.strs = utf8.AppendRune(j.strs, r)
		default:
			return nil, fmt.Errorf("jsonb: bad escape \\%c at byte %d", e, i-2)
		}
	}
	return nil, errors.New("jsonb: unterminated string")
}

// unicode reads the XXXX of \uXXXX at i (and a low surrogate after a high
// one), returning the rune and the position after it.
func (j *jsonbHasher) unicode(i int) (rune, int, error) {
	hex4 := func(i int) (rune, bool) {
		if i+4 > len(j.in) {
			return 0, false
		}
		v, err := strconv.ParseUint(string(j.in[i:i+4]), 16, 16)
		return rune(v), err == nil
	}
	r, ok := hex4(i)
	if !ok {
		return 0, 0, fmt.Errorf("jsonb: bad \\u escape at byte %d", i-2)
	}
	i += 4
	if utf16.IsSurrogate(r) && i+6 <= len(j.in) && j.in[i] == '\\' && j.in[i+1] == 'u' {
		if r2, ok := hex4(i + 2); ok {
			if c := utf16.DecodeRune(r, r2); c != utf8.RuneError {
				return c, i + 6, nil
			}
		}
	}
	return r, i, nil
}

// number reads a JSON number at pos and returns hash_numeric_extended of
// it as a numeric.
func (j *jsonbHasher) number(seed uint64) (uint64, error) {
	begin := j.pos
	if j.in[j.pos] == '-' {
		j.pos++
	}
	var mant []byte // the significant digits, integer and fraction
	var frac, exp int
	var buf [40]byte
	mant = buf[:0]
	digits := func(into bool, count *int) int {
		n := 0
		for j.pos < len(j.in) && j.in[j.pos] >= '0' && j.in[j.pos] <= '9' {
			if into {
				mant = append(mant, j.in[j.pos])
			}
			if count != nil {
				*count++
			}
			j.pos++
			n++
		}
		return n
	}
	if digits(true, nil) == 0 {
		return 0, fmt.Errorf("jsonb: bad number at byte %d", begin)
	}
	if c, _ := j.peek(); c == '.' {
		j.pos++
		if digits(true, &frac) == 0 {
			return 0, fmt.Errorf("jsonb: bad number at byte %d", begin)
		}
	}
	if c, _ := j.peek(); c == 'e' || c == 'E' {
		j.pos++
		es := j.pos
		if c, _ := j.peek(); c == '+' || c == '-' {
			j.pos++
		}
		if digits(false, nil) == 0 {
			return 0, fmt.Errorf("jsonb: bad number at byte %d", begin)
		}
		e, err := strconv.Atoi(string(j.in[es:j.pos]))
		if err != nil || e > 1<<20 || e < -(1<<20) {
			return 0, fmt.Errorf("jsonb: number out of range at byte %d", begin)
		}
		exp = e
	}
	return decimalHash(j.order, mant, exp-frac, seed), nil
}

// decimalHash is hash_numeric_extended of the value digits × 10^e (digits
// in ASCII, most significant first): the digits regrouped into base-10000
// digits aligned on the decimal point, as numeric stores them.
func decimalHash(o wordOrder, digits []byte, e int, seed uint64) uint64 {
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return seed - 1
	}
	floorDiv := func(a, b int) int {
		q := a / b
		if a%b != 0 && a < 0 {
			q--
		}
		return q
	}
	top := floorDiv(e+len(digits)-1, 4)
	bottom := floorDiv(e, 4)
	groups := make([]int16, top-bottom+1)
	pow := [4]int16{1, 10, 100, 1000}
	for i, d := range digits {
		p := e + len(digits) - 1 - i // the decimal power of this digit
		g := floorDiv(p, 4)
		groups[top-g] += int16(d-'0') * pow[p-4*g]
	}
	return pgHashNumericDigits(o, groups, top, seed)
}
