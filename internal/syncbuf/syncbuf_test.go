package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("ab"))
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("ab", 800) {
		t.Fatalf("got %d bytes, want 1600 of \"ab\" pairs", len(got))
	}
}
