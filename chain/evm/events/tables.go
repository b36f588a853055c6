package events

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/ethereum/go-ethereum/accounts/abi"
)

// Every event table starts with the log's place and contract; the
// arguments follow, in the event's order.
const (
	colBlockNumber = iota
	colBlockTime
	colTxHash
	colLogIndex
	colAddress
	numFixedCols
)

// The undecoded table's columns after the fixed ones.
const (
	colUndecodedTable = numFixedCols + iota
	colUndecodedReason
)

var fixedColumns = []chain.Column{
	colBlockNumber: {Name: "block_number", Type: "bigint"},
	colBlockTime:   {Name: "block_time", Type: "timestamptz"},
	colTxHash:      {Name: "transaction_hash", Type: "bytea"},
	colLogIndex:    {Name: "log_index", Type: "integer"},
	colAddress:     {Name: "address", Type: "bytea"},
}

// kind is how an argument's decoded value becomes a column value.
type kind uint8

const (
	kindBytes   kind = iota // bytea: address, bytesN, bytes, function, an indexed dynamic value's topic
	kindInt                 // bigint: intN up to 64 bits, uintN below 64
	kindNumeric             // numeric: the wider integers
	kindBool                // boolean
	kindText                // text: string
	kindJSON                // jsonb: arrays and tuples
)

// column is one argument's column.
type column struct {
	arg     abi.Argument
	kind    kind
	hashed  bool // indexed and dynamic: the column holds the topic, a keccak hash of the value
	topic   int  // indexed: the topic that holds it (1.. for a named event, 0.. for an anonymous one)
	dataPos int  // not indexed: its position among the unpacked data values
}

// event is one event of an ABI and its table.
type event struct {
	abi        *abiTables
	ev         abi.Event
	id         [32]byte
	table      chain.Table
	pos        int // the table's position in the Set's tables
	cols       []column
	nonIndexed abi.Arguments
	topics     int // the log's topic count: the indexed arguments, and topic0 unless anonymous
}

// abiTables is what one --abi value makes.
type abiTables struct {
	spec         Spec
	events       []*event
	undecoded    chain.Table
	undecodedPos int
	filter       map[[20]byte]bool // nil: every address
}

func (a *abiTables) tables() []chain.Table {
	out := make([]chain.Table, 0, len(a.events)+1)
	for _, e := range a.events {
		out = append(out, e.table)
	}
	return append(out, a.undecoded)
}

func (a *abiTables) accepts(addr []byte) bool {
	if a.filter == nil {
		return true
	}
	var k [20]byte
	if len(addr) != 20 {
		return false
	}
	copy(k[:], addr)
	return a.filter[k]
}

// maxIdent is PostgreSQL's longest identifier (NAMEDATALEN-1): a longer
// one would be cut, and the table would not be found by its name.
const maxIdent = 63

func newABI(sp Spec, parsed abi.ABI) (*abiTables, error) {
	a := &abiTables{spec: sp}
	if len(sp.Addresses) > 0 {
		a.filter = map[[20]byte]bool{}
		for _, ad := range sp.Addresses {
			a.filter[ad] = true
		}
	}
	// Overloads: events that share a name get the first four bytes of
	// their topic0 after it, all of them, whatever their order in the file.
	byName := map[string]int{}
	for _, ev := range parsed.Events {
		byName[ev.RawName]++
	}
	names := make([]string, 0, len(parsed.Events))
	for n := range parsed.Events {
		names = append(names, n)
	}
	slices.Sort(names)
	var evs []*event
	for _, n := range names {
		ev := parsed.Events[n]
		table := sp.Name + "_" + snake(ev.RawName)
		if byName[ev.RawName] > 1 {
			table += "_" + hex.EncodeToString(ev.ID[:4])
		}
		e, err := newEvent(a, ev, table)
		if err != nil {
			return nil, err
		}
		if ev.Anonymous && a.filter == nil {
			return nil, fmt.Errorf("anonymous event %s has no topic0 to know it by: give the contracts it comes from (NAME=FILE@ADDRESS)", ev.Sig)
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("the ABI has no events")
	}
	slices.SortFunc(evs, func(x, y *event) int { return strings.Compare(x.table.Name, y.table.Name) })
	a.events = evs
	a.undecoded = chain.Table{
		Name:         sp.Name + "_undecoded",
		HeightColumn: "block_number",
		PrimaryKey:   []string{"block_number", "log_index"},
		Columns: append(slices.Clone(fixedColumns),
			chain.Column{Name: "event_table", Type: "text"}, // the table the log was read for
			chain.Column{Name: "reason", Type: "text"}),
		Definition: "blockhaul: EVM logs that ABI " + sp.Name + "'s events claim but that do not decode as them, " + addressNote(sp.Addresses),
		Facts: []chain.Fact{{
			Query: `SELECT coalesce(sum(n), 0)::bigint, coalesce(string_agg(event_table || ' ' || n, ', ' ORDER BY n DESC, event_table), '')
				FROM (SELECT event_table, count(*) AS n FROM %s GROUP BY event_table) t`,
			Line: sp.Name + "_undecoded: %d logs an event of ABI " + sp.Name + " claims did not decode as it (%s; their reasons are in the table)",
		}},
	}
	for _, t := range a.tables() {
		if len(t.Name) > maxIdent-len("_address_idx") {
			return nil, fmt.Errorf("table name %s is longer than %d bytes: give a shorter NAME", t.Name, maxIdent-len("_address_idx"))
		}
	}
	for i, e := range evs {
		for _, f := range evs[:i] {
			if f.table.Name == e.table.Name {
				return nil, fmt.Errorf("events %s and %s would both be table %s", f.ev.Sig, e.ev.Sig, e.table.Name)
			}
		}
		if e.table.Name == a.undecoded.Name {
			return nil, fmt.Errorf("event %s would be table %s, the ABI's table of logs that do not decode: give the ABI another NAME", e.ev.Sig, e.table.Name)
		}
	}
	return a, nil
}

func newEvent(a *abiTables, ev abi.Event, table string) (*event, error) {
	e := &event{abi: a, ev: ev, id: ev.ID, nonIndexed: ev.Inputs.NonIndexed()}
	if !ev.Anonymous {
		e.topics = 1
	}
	cols := slices.Clone(fixedColumns)
	taken := map[string]bool{}
	for _, c := range cols {
		taken[c.Name] = true
	}
	var decl []string
	dataPos := 0
	for i, arg := range ev.Inputs {
		c := column{arg: arg}
		typ, k, err := columnType(arg.Type)
		if err != nil {
			return nil, fmt.Errorf("event %s argument %s: %w", ev.Sig, arg.Name, err)
		}
		if arg.Indexed {
			c.topic = e.topics
			e.topics++
			if dynamic(arg.Type) {
				c.hashed = true
				typ, k = "bytea", kindBytes
			}
		} else {
			c.dataPos = dataPos
			dataPos++
		}
		c.kind = k
		name := snake(arg.Name)
		if name == "" || taken[name] {
			name = fmt.Sprintf("%s_%d", cmpOr(name, "arg"), i)
		}
		if len(name) > maxIdent {
			return nil, fmt.Errorf("event %s argument %s: column name %s is longer than %d bytes", ev.Sig, arg.Name, name, maxIdent)
		}
		taken[name] = true
		cols = append(cols, chain.Column{Name: name, Type: typ})
		e.cols = append(e.cols, c)
		ind := ""
		if arg.Indexed {
			ind = " indexed"
		}
		decl = append(decl, arg.Type.String()+ind+" "+arg.Name)
	}
	if e.topics > 4 {
		return nil, fmt.Errorf("event %s has %d indexed arguments: a log has at most 4 topics", ev.Sig, e.topics-1)
	}
	def := fmt.Sprintf("blockhaul: EVM event %s(%s)", ev.RawName, strings.Join(decl, ", "))
	if ev.Anonymous {
		def += " anonymous"
	}
	e.table = chain.Table{
		Name:         table,
		HeightColumn: "block_number",
		PrimaryKey:   []string{"block_number", "log_index"},
		Columns:      cols,
		Indexes:      []chain.Index{{Name: table + "_address_idx", Columns: "(address, block_number)"}},
		Definition:   def + ", topic0 " + "0x" + hex.EncodeToString(ev.ID[:]) + ", " + addressNote(a.spec.Addresses),
	}
	return e, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func addressNote(addrs [][20]byte) string {
	if len(addrs) == 0 {
		return "from any address"
	}
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = "0x" + hex.EncodeToString(a[:])
	}
	return "from " + strings.Join(s, ",")
}

// validType refuses a type go-ethereum parses but the ABI specification
// does not have (uint999, int12), in t or any type within it: no
// contract emits it, and its values would not decode as any real type's.
func validType(t abi.Type) error {
	switch t.T {
	case abi.UintTy, abi.IntTy:
		if t.Size < 8 || t.Size > 256 || t.Size%8 != 0 {
			return fmt.Errorf("type %s is not an ABI type: int and uint sizes are 8 to 256 bits in steps of 8", t)
		}
	case abi.SliceTy, abi.ArrayTy:
		if t.Elem != nil {
			return validType(*t.Elem)
		}
	case abi.TupleTy:
		for _, e := range t.TupleElems {
			if err := validType(*e); err != nil {
				return err
			}
		}
	}
	return nil
}

// columnType is the PostgreSQL type of an argument of type t.
func columnType(t abi.Type) (string, kind, error) {
	if err := validType(t); err != nil {
		return "", 0, err
	}
	switch t.T {
	case abi.AddressTy, abi.FixedBytesTy, abi.BytesTy, abi.FunctionTy, abi.HashTy:
		return "bytea", kindBytes, nil
	case abi.UintTy:
		if t.Size < 64 {
			return "bigint", kindInt, nil
		}
		return "numeric", kindNumeric, nil
	case abi.IntTy:
		if t.Size <= 64 {
			return "bigint", kindInt, nil
		}
		return "numeric", kindNumeric, nil
	case abi.BoolTy:
		return "boolean", kindBool, nil
	case abi.StringTy:
		return "text", kindText, nil
	case abi.SliceTy, abi.ArrayTy, abi.TupleTy:
		return "jsonb", kindJSON, nil
	}
	return "", 0, fmt.Errorf("type %s has no column type", t)
}

// dynamic reports whether an indexed argument of type t is stored in its
// topic as a keccak hash of its encoding rather than as its value.
func dynamic(t abi.Type) bool {
	switch t.T {
	case abi.StringTy, abi.BytesTy, abi.SliceTy, abi.ArrayTy, abi.TupleTy:
		return true
	}
	return false
}

// snake turns an event or argument name into snake case: Transfer →
// transfer, OwnershipTransferred → ownership_transferred, sqrtPriceX96 →
// sqrt_price_x96, tokenID → token_id, _value → value. Leading and trailing
// underscores go; what is not a letter or digit becomes _.
func snake(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		switch {
		case unicode.IsUpper(r):
			if i > 0 {
				prev := rs[i-1]
				nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
				if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && nextLower {
					b.WriteByte('_')
				}
			}
			b.WriteRune(unicode.ToLower(r))
		case r < 0x80 && (unicode.IsLower(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	for strings.Contains(out, "__") {
		out = strings.ReplaceAll(out, "__", "_")
	}
	return strings.Trim(out, "_")
}
