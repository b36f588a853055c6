package pipeline

import (
	"errors"
	"testing"

	"github.com/blockhaul/blockhaul/family"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// mustJob resolves cfg (defaults applied) into its Job, failing the test
// on a refusal.
func mustJob(t testing.TB, cfg Config) *Job {
	t.Helper()
	j, err := Resolve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// bareJob is cfg as a Job without validation (defaults applied, the family
// looked up), for the unit tests of helpers that read a few fields.
func bareJob(cfg Config) *Job {
	cfg.EnsureDefaults()
	fam, _ := family.Lookup(cfg.Chain)
	return &Job{Config: cfg, Family: fam}
}
