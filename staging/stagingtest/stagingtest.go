// Package stagingtest holds what the engines' tests share for opening
// staging stores.
package stagingtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/blockhaul/blockhaul/staging"
	"github.com/cockroachdb/pebble/v2"
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

// FlipRecordBytes flips one byte of the compressed payload of each
// height's staged value (xor x, a third of the value from its end),
// through Pebble itself: the store's checksum then fails and Pebble's does
// not, a record corrupt as a bad write would leave it.
func FlipRecordBytes(t testing.TB, dir string, x byte, heights ...uint64) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range heights {
		key := make([]byte, 9)
		key[0] = 'b' // a staged value's key: 'b', then the height big-endian (staging/keys.go)
		binary.BigEndian.PutUint64(key[1:], h)
		v, closer, err := db.Get(key)
		if err != nil {
			t.Fatalf("staged value of %d: %v", h, err)
		}
		v = bytes.Clone(v)
		closer.Close()
		v[len(v)-len(v)/3] ^= x
		if err := db.Set(key, v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// quietPebble drops Pebble's log lines (WAL replay notices); a failure is
// still the test's.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)         {}
func (quietPebble) Errorf(string, ...any)        {}
func (quietPebble) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
