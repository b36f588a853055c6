package archive

import (
	"fmt"
	"strings"

	"github.com/blockhaul/blockhaul/internal/fault"
)

// DataError reports that a check ran to its end and found the data wrong:
// differences between two databases, corrupt or missing records, broken
// links. The report has the details; the command exits 4.
type DataError struct {
	Check    string // checksum, verify, …
	Problems int
}

func (e *DataError) Error() string {
	return fmt.Sprintf("archive: %s found %s", e.Check, Quantity(e.Problems, "problem"))
}

// Fault marks the error as data that is wrong (exit 4).
func (e *DataError) Fault() fault.Class { return fault.Data }

// IncompleteError is a check that found nothing wrong in what it compared
// but left tables of the schema out of the comparison: not clean.
type IncompleteError struct {
	Check  string // checksum, verify
	Tables []string
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("archive: %s is not clean: %s of the schema not compared (%s): no decoder of this check makes them; give the --abi they were exported with, or export them with a blockhaul that records its decoders",
		e.Check, Quantity(len(e.Tables), "table"), strings.Join(e.Tables, ", "))
}

// Fault marks the error as data (exit 4): the check cannot say the data is
// right.
func (e *IncompleteError) Fault() fault.Class { return fault.Data }
