package events

import (
	"errors"
	"fmt"
	"slices"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/evm"
)

// Set is the event tables of every --abi value, compiled once (Compile).
// It is immutable and safe for concurrent use.
type Set struct {
	abis      []*abiTables
	all       []chain.Table
	byTopic   map[[32]byte][]*event // named events by topic0, over every ABI
	anonymous map[[20]byte][]*event // anonymous events by the addresses their ABI is read from
}

func (s *Set) add(a *abiTables) {
	s.abis = append(s.abis, a)
	for _, e := range a.events {
		e.pos = len(s.all)
		s.all = append(s.all, e.table)
		if e.ev.Anonymous {
			for _, ad := range a.spec.Addresses {
				s.anonymous[ad] = append(s.anonymous[ad], e)
			}
			continue
		}
		s.byTopic[e.id] = append(s.byTopic[e.id], e)
	}
	a.undecodedPos = len(s.all)
	s.all = append(s.all, a.undecoded)
}

// Tables returns the event tables, in the order of the --abi values and,
// within one, by table name, each ABI's undecoded table last.
func (s *Set) Tables() []chain.Table {
	if s == nil {
		return nil
	}
	return slices.Clone(s.all)
}

// baseDecoder is the family decoder whose logs rows a Decoder reads.
type baseDecoder interface {
	Family() chain.Family
	Tables() []chain.Table
	Decode(height uint64, raw []byte, rows *chain.Rows) error
}

// Decoder is the EVM family's decoder with the event tables of a Set after
// its own. It is safe for concurrent use, as its base is.
type Decoder struct {
	base   baseDecoder
	set    *Set
	nBase  int
	tables []chain.Table
}

// NewDecoder returns base with set's event tables after its own. base's
// tables must include evm's logs table at evm.TableLogs.
func NewDecoder(base baseDecoder, set *Set) *Decoder {
	bt := base.Tables()
	return &Decoder{base: base, set: set, nBase: len(bt), tables: append(bt, set.Tables()...)}
}

// Family is the base's.
func (d *Decoder) Family() chain.Family { return d.base.Family() }

// Tables returns the base's tables and then the event tables.
func (d *Decoder) Tables() []chain.Table { return slices.Clone(d.tables) }

// VerifyBlock is the base's, when it has one (export's blame of a batch).
func (d *Decoder) VerifyBlock(raw []byte) ([]byte, error) {
	if v, ok := d.base.(interface{ VerifyBlock([]byte) ([]byte, error) }); ok {
		return v.VerifyBlock(raw)
	}
	return nil, errors.New("events: the base decoder verifies nothing")
}

// Decode appends the base's rows of the block, then one row of an event
// table for each of the block's logs an event claims and that decodes as
// it, and one row of its ABI's undecoded table for each that does not.
func (d *Decoder) Decode(height uint64, raw []byte, rows *chain.Rows) error {
	first := rows.Len(evm.TableLogs)
	if err := d.base.Decode(height, raw, rows); err != nil {
		return err
	}
	for _, log := range rows.Table(evm.TableLogs)[first:] {
		d.decodeLog(log, rows)
	}
	return nil
}

// decodeLog writes the rows of one log: a log that does not decode as the
// event that claims it is a row of the undecoded table.
func (d *Decoder) decodeLog(log []any, rows *chain.Rows) {
	addr, _ := log[evm.LogColAddress].([]byte)
	var topics [4][]byte
	n := 0
	for i := range topics {
		t, _ := log[evm.LogColTopic0+i].([]byte)
		if t == nil {
			break
		}
		topics[i] = t
		n++
	}
	data, _ := log[evm.LogColData].([]byte)
	if n > 0 && len(topics[0]) == 32 {
		var id [32]byte
		copy(id[:], topics[0])
		for _, e := range d.set.byTopic[id] {
			if !e.abi.accepts(addr) {
				continue
			}
			if reason := d.write(e, log, topics[:n], data, rows, false); reason != "" {
				d.undecoded(e, log, reason, rows)
			}
		}
	}
	if len(d.set.anonymous) > 0 && len(addr) == 20 {
		var k [20]byte
		copy(k[:], addr)
		claimed := map[*abiTables]bool{}
		for _, e := range d.set.anonymous[k] {
			// An anonymous event has no signature to claim a log by: the
			// first of its ABI's anonymous events that decodes it takes it,
			// unless a named event of the ABI already did.
			if claimed[e.abi] || d.namedClaims(e.abi, topics[:n]) {
				continue
			}
			if d.write(e, log, topics[:n], data, rows, true) == "" {
				claimed[e.abi] = true
			}
		}
	}
}

// namedClaims reports whether a named event of a claims a log with topics.
func (d *Decoder) namedClaims(a *abiTables, topics [][]byte) bool {
	if len(topics) == 0 || len(topics[0]) != 32 {
		return false
	}
	var id [32]byte
	copy(id[:], topics[0])
	for _, e := range d.set.byTopic[id] {
		if e.abi == a {
			return true
		}
	}
	return false
}

// write appends e's row for the log, or returns why the log does not
// decode as e (appending nothing). tryOnly: do not build the reason.
func (d *Decoder) write(e *event, log []any, topics [][]byte, data []byte, rows *chain.Rows, tryOnly bool) string {
	if len(topics) != e.topics {
		if tryOnly {
			return "no"
		}
		return fmt.Sprintf("%d topics, the event has %d", len(topics), e.topics)
	}
	var values []any
	if len(e.nonIndexed) > 0 {
		var err error
		values, err = e.nonIndexed.UnpackValues(data)
		if err != nil {
			if tryOnly {
				return "no"
			}
			return fmt.Sprintf("data (%d bytes) does not decode: %v", len(data), err)
		}
	}
	lens := rows.Lens()
	row := rows.Row(d.nBase + e.pos)
	fixed(row, log)
	for i, c := range e.cols {
		v, err := c.value(topics, values, rows)
		if err != nil {
			rows.Truncate(lens)
			if tryOnly {
				return "no"
			}
			return fmt.Sprintf("argument %s: %v", c.arg.Name, err)
		}
		row[numFixedCols+i] = v
	}
	return ""
}

func fixed(row, log []any) {
	row[colBlockNumber] = log[evm.LogColBlockNumber]
	row[colBlockTime] = log[evm.LogColBlockTime]
	row[colTxHash] = log[evm.LogColTxHash]
	row[colLogIndex] = log[evm.LogColIndex]
	row[colAddress] = log[evm.LogColAddress]
}

func (d *Decoder) undecoded(e *event, log []any, reason string, rows *chain.Rows) {
	row := rows.Row(d.nBase + e.abi.undecodedPos)
	fixed(row, log)
	row[colUndecodedTable] = e.table.Name
	row[colUndecodedReason] = reason
}
