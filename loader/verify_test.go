package loader

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
)

// verifyFake recomputes the fake chain's hashes from its records, except
// that the record of height bad hashes to something else (a node that
// sends a header whose hash is not the one it claims).
func verifyFake(bad uint64) func([]byte) ([]byte, error) {
	return func(raw []byte) ([]byte, error) {
		var h uint64
		if _, err := fmt.Sscanf(string(raw), `{"h":%d}`, &h); err != nil {
			return nil, err
		}
		if h == bad {
			return nil, &chain.HashMismatchError{Height: h, What: "block hash", Claimed: hashOf(h), Computed: hashOf(h + 7)}
		}
		return hashOf(h), nil
	}
}

// Every block goes through Config.Verify before it is staged: a span with
// a block that fails it is retried, then the fetch fails with the
// mismatch, and that block is not staged.
func TestFetchRefusesBlocksThatFailVerification(t *testing.T) {
	store := openStore(t)
	src := newFake()
	cfg := fast
	cfg.Verify = verifyFake(10) // the last height of the span 6..10
	cfg.MaxRetries = 2
	_, err := Fetch(context.Background(), src, store, 1, 20, cfg, nil)
	var hm *chain.HashMismatchError
	if !errors.As(err, &hm) || hm.Height != 10 {
		t.Fatalf("err = %v, want a hash mismatch at 10", err)
	}
	if src.asked[10] != 3 {
		t.Fatalf("height 10 asked %d times, want 3 (retried twice)", src.asked[10])
	}
	if _, err := store.Get(10); err == nil {
		t.Fatal("block 10 was staged")
	}
}

// A block whose record verifies but whose reported Hash is another is
// refused too: the staged header must be the record's own hash.
func TestFetchRefusesAHashOtherThanTheRecords(t *testing.T) {
	store := openStore(t)
	src := newFake()
	cfg := fast
	cfg.Verify = func(raw []byte) ([]byte, error) { return hashOf(999), nil }
	_, err := Fetch(context.Background(), src, store, 1, 5, cfg, nil)
	var hm *chain.HashMismatchError
	if !errors.As(err, &hm) {
		t.Fatalf("err = %v, want a hash mismatch", err)
	}
	if m, _ := store.Missing(1, 5); len(m) != 1 || m[0].From != 1 || m[0].To != 5 {
		t.Fatalf("missing %v, want all of 1-5", m)
	}
}
