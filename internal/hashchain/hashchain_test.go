package hashchain

import (
	"context"
	"crypto/sha256"
	"testing"
)

func TestWaitReturnsOnceTheClaimIsReleased(t *testing.T) {
	c := New()
	release := c.Claim(10, 20)
	if !c.Pending(15) || c.Pending(21) {
		t.Fatal("claim does not cover exactly 10..20")
	}
	done := make(chan bool)
	go func() {
		_, err := c.Wait(context.Background(), 20)
		if err != nil {
			t.Error(err)
		}
		_, ok := c.Get(20)
		done <- ok
	}()
	c.Put(20, [32]byte{20})
	release()
	if !<-done {
		t.Fatal("waiter did not see the hash put before release")
	}
	if waited, _ := c.Wait(context.Background(), 20); waited {
		t.Fatal("released height still pending")
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	c := New()
	release := c.Claim(1, 1)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Wait(ctx, 1); err == nil {
		t.Fatal("wait on a canceled context returned no error")
	}
}

func TestNearestFindsRingThenMarks(t *testing.T) {
	c := New()
	if _, _, ok := c.Nearest(0, 100); ok {
		t.Fatal("empty chain has a nearest hash")
	}
	c.Put(90, [32]byte{90})
	if k, v, ok := c.Nearest(0, 100); !ok || k != 90 || v[0] != 90 {
		t.Fatalf("nearest = %d %v %v, want 90", k, v[0], ok)
	}
	// Far above the ring: only marks count.
	c.Put(Stride*3, [32]byte{3})
	h := uint64(Stride*3 + Ring + 500)
	if k, _, ok := c.Nearest(0, h); !ok || k != Stride*3 {
		t.Fatalf("nearest below %d = %d %v, want the mark %d", h, k, ok, Stride*3)
	}
	// A height overwritten in the ring is no longer known, its mark is.
	c.Put(Stride*3+Ring, [32]byte{4})
	if _, ok := c.Get(Stride * 3); !ok {
		t.Fatal("mark lost when the ring slot was reused")
	}
	if _, ok := c.Get(90 + Ring); ok {
		t.Fatal("unknown height reported known")
	}
}

func TestSeed(t *testing.T) {
	defaults := []uint64{4, 0}
	if got := Seed("f", 7, []uint64{4, 0}, defaults); got != 7 {
		t.Fatalf("defaults: seed %d, want the configured 7", got)
	}
	a := Seed("f", 7, []uint64{5, 0}, defaults)
	b := Seed("f", 7, []uint64{4, 1}, defaults)
	c := Seed("g", 7, []uint64{5, 0}, defaults)
	d := Seed("f", 8, []uint64{5, 0}, defaults)
	for _, v := range []uint64{a, b, c, d} {
		if v == 7 || v == 8 {
			t.Fatalf("a changed parameter kept the configured seed: %d %d %d %d", a, b, c, d)
		}
	}
	if a == b || a == c || a == d || b == c || b == d || c == d {
		t.Fatalf("different parameters, one seed: %d %d %d %d", a, b, c, d)
	}
	if Seed("f", 7, []uint64{5, 0}, defaults) != a {
		t.Fatal("Seed is not deterministic")
	}
}

// TestWalk: a walk chains each block's hash from its parent's, from the
// chain's base; a second walk starts from the highest known height; a
// height below the first is the base; a canceled walk stops with its error.
func TestWalk(t *testing.T) {
	step := func(steps *[]uint64) func(uint64, [32]byte) [32]byte {
		return func(k uint64, parent [32]byte) [32]byte {
			*steps = append(*steps, k)
			return sha256.Sum256(append(parent[:], byte(k)))
		}
	}
	want := func(first, h uint64, base [32]byte) [32]byte {
		for k := first; k <= h; k++ {
			base = sha256.Sum256(append(base[:], byte(k)))
		}
		return base
	}
	base := [32]byte{7}
	c := New()
	var steps []uint64
	got, err := c.Walk(context.Background(), 5, 2, base, 4, step(&steps))
	if err != nil || got != want(2, 5, base) || len(steps) != 4 {
		t.Fatalf("walk to 5: %x, %v after steps %v; want %x after 2..5", got, err, steps, want(2, 5, base))
	}
	steps = nil
	if got, err := c.Walk(context.Background(), 8, 2, base, 4, step(&steps)); err != nil || got != want(2, 8, base) || len(steps) != 3 || steps[0] != 6 {
		t.Fatalf("walk to 8: %x, %v after steps %v; want 6..8 walked", got, err, steps)
	}
	steps = nil
	if got, err := c.Walk(context.Background(), 1, 2, base, 4, step(&steps)); err != nil || got != base || len(steps) != 0 {
		t.Fatalf("walk below the first height: %x, %v after steps %v; want the base", got, err, steps)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	steps = nil
	if _, err := New().Walk(ctx, 100, 0, base, 4, step(&steps)); err != context.Canceled || len(steps) != 3 {
		t.Fatalf("canceled walk: %v after %d steps; want context.Canceled after 3", err, len(steps))
	}
}

// A walk to a height far above the produced chain starts from the highest
// mark at a cost bounded by the marks held, so a cancelled walk ends after
// its first checkEvery steps; it once looped over every Stride-th height
// down to the first (10^11 of them at 10^14) under the lock, deaf to ctx.
func TestWalkFarAboveEndsWithContext(t *testing.T) {
	c := New()
	for h := uint64(0); h <= 4*Stride; h += Stride {
		c.Put(h, [32]byte{byte(h / Stride), 1})
	}
	const far = 99_999_999_999_990
	if k, v, ok := c.Nearest(1, far); !ok || k != 4*Stride || v != [32]byte{4, 1} {
		t.Fatalf("Nearest(1, 10^14) = %d, %x, %v; want the highest mark %d", k, v, ok, 4*Stride)
	}
	if _, _, ok := c.Nearest(5*Stride, far); ok {
		t.Fatalf("Nearest above every mark found one")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var steps []uint64
	_, err := c.Walk(ctx, far, 1, [32]byte{}, 4, func(k uint64, parent [32]byte) [32]byte {
		steps = append(steps, k)
		return parent
	})
	if err != context.Canceled || len(steps) != 3 || steps[0] != 4*Stride+1 {
		t.Fatalf("cancelled walk to 10^14: %v after steps %v; want context.Canceled after 3 from %d", err, steps, 4*Stride+1)
	}
}
