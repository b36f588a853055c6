// Package faults is blockhaul's fault suite: tests that run the built
// binary against crashes (SIGKILL at random moments and in index builds),
// database faults on a throwaway cluster, a lying or failing RPC node
// (internal/faultproxy), damaged staging files, a full disk and concurrent
// starts, and check that nothing is lost, duplicated or left wrong.
//
// The fast variants run in `go test ./...`; the campaign, with more kills,
// longer ranges and every fault class, runs with `go test -tags faults
// ./faults/` (`make faults`). Each scenario prints one line of figures,
// prefixed "faults:".
package faults
