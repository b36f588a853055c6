// Package stagingtest holds what the engines' tests share for opening
// staging stores.
package stagingtest

import (
	"testing"

	"github.com/blockhaul/blockhaul/staging"
)

// Open opens the staging store in dir with opts or fails the test; the
// caller closes it.
func Open(t testing.TB, dir string, opts staging.Options) *staging.Store {
	t.Helper()
	s, err := staging.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
