//go:build !faults

package faults

// campaign is true under the faults build tag: the long variants run.
const campaign = false
