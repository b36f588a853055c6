// Package testseed seeds the random inputs of the tests that choose them
// at random — the moment a kill test sends SIGKILL, the order shards run
// in — and prints the seed, so that a failing run can be replayed: set
// BLOCKHAUL_TEST_SEED to the seed its log printed and run the same test.
//
// A seed replays the choices (the same delays, the same order); it cannot
// replay the machine's timing, so a kill lands at the same moment after the
// start, not necessarily at the same point of the job.
package testseed

import (
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// Env names the variable that replays a seed.
const Env = "BLOCKHAUL_TEST_SEED"

// New returns t's random source: seeded from Env when it is set, else from
// the clock, and logged either way (go test prints the log of a failed
// test). Each test draws its own stream of the seed, so one seed replays
// every test of a run.
func New(t testing.TB) *rand.Rand {
	t.Helper()
	seed, err := Seed()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("random seed %d (replay: %s=%d go test -run '^%s$')", seed, Env, seed, t.Name())
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// Seed is the seed Env sets, or one from the clock when it is unset.
func Seed() (uint64, error) {
	v, ok := os.LookupEnv(Env)
	if !ok || v == "" {
		return uint64(time.Now().UnixNano()), nil
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, &BadSeedError{Value: v, Err: err}
	}
	return seed, nil
}

// BadSeedError is an Env that is not a seed.
type BadSeedError struct {
	Value string
	Err   error
}

func (e *BadSeedError) Error() string {
	return Env + "=" + strconv.Quote(e.Value) + ": not a seed (a decimal uint64, as a test's log prints it): " + e.Err.Error()
}

func (e *BadSeedError) Unwrap() error { return e.Err }
