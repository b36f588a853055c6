package archive

import (
	"fmt"

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
