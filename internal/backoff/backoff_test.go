package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	for _, tc := range []struct {
		base, limit time.Duration
		n           int
		want        time.Duration
	}{
		{100 * time.Millisecond, 10 * time.Second, -1, 100 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Second, 0, 100 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Second, 3, 800 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Second, 7, 10 * time.Second},
		{100 * time.Millisecond, 10 * time.Second, 200, 10 * time.Second},
		{time.Second, 10 * time.Second, 62, 10 * time.Second},
		{time.Second, 500 * time.Millisecond, 0, 500 * time.Millisecond},
		{time.Second, 500 * time.Millisecond, 4, 500 * time.Millisecond},
		{0, time.Second, 5, 0},
	} {
		if got := (Policy{Base: tc.base, Max: tc.limit}).Ceiling(tc.n); got != tc.want {
			t.Errorf("Policy{%v, %v}.Ceiling(%d) = %v, want %v", tc.base, tc.limit, tc.n, got, tc.want)
		}
	}
}

// The jitter covers the upper half of the ceiling, all of it, and never
// leaves it.
func TestDelayJittersOverTheUpperHalf(t *testing.T) {
	p := Policy{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	var sawLow, sawHigh bool
	for range 2000 {
		d := p.Delay(3) // ceiling 50ms
		if d < 25*time.Millisecond || d > 50*time.Millisecond {
			t.Fatalf("delay %v outside [25ms, 50ms]", d)
		}
		sawLow = sawLow || d < 30*time.Millisecond
		sawHigh = sawHigh || d > 45*time.Millisecond
	}
	if !sawLow || !sawHigh {
		t.Error("delay is not jittered over the whole upper half")
	}
	if d := (Policy{}).Delay(4); d != 0 {
		t.Errorf("zero policy waits %v", d)
	}
	if d := Jitter(1); d != 1 && d != 0 {
		t.Errorf("Jitter(1ns) = %v", d)
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := Sleep(ctx, time.Nanosecond); err != nil {
		t.Fatalf("sleep: %v", err)
	}
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep after cancel: %v, want context.Canceled", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("zero sleep after cancel: %v, want context.Canceled", err)
	}
}
