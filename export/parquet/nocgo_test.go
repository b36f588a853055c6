//go:build !cgo

package parquet_test

import (
	"os"
	"testing"
)

// DuckDB, the independent reader the tests read the files back with, is
// C++ behind cgo: without cgo its tests are not built, and under CI that is
// a failure, not a skip.
func TestDuckDBNeedsCgo(t *testing.T) {
	if os.Getenv("CI") == "true" {
		t.Fatal("the DuckDB read-back tests need cgo (CGO_ENABLED=1 and a C compiler)")
	}
	t.Skip("the DuckDB read-back tests need cgo")
}
