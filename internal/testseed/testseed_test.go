package testseed

import (
	"errors"
	"strconv"
	"testing"
)

// A seed set in the environment gives the same draws again, a test's own
// stream (another name draws differently), and a value that is not a seed
// is refused by name.
func TestSeedReplays(t *testing.T) {
	t.Setenv(Env, "12345")
	draw := func(tb testing.TB) [4]int64 {
		r := New(tb)
		var d [4]int64
		for i := range d {
			d[i] = r.Int64N(1 << 40)
		}
		return d
	}
	first := draw(t)
	if again := draw(t); again != first {
		t.Fatalf("seed 12345 drew %v, then %v", first, again)
	}
	var other [4]int64
	t.Run("other", func(t *testing.T) { other = draw(t) })
	if other == first {
		t.Fatalf("another test drew the same stream %v", other)
	}
	t.Setenv(Env, "12346")
	if d := draw(t); d == first {
		t.Fatalf("seed 12346 drew seed 12345's %v", d)
	}

	t.Setenv(Env, "-3")
	_, err := Seed()
	var bad *BadSeedError
	if !errors.As(err, &bad) || bad.Value != "-3" {
		t.Fatalf("seed -3: %v, want a BadSeedError", err)
	}
	t.Setenv(Env, "")
	if s, err := Seed(); err != nil || strconv.FormatUint(s, 10) == "12345" {
		t.Fatalf("unset seed: %d, %v", s, err)
	}
}
