//go:build !unix

package bench

import "os"

// maxRSS is unknown where there is no rusage: the memory targets are then
// reported as not measured.
func maxRSS(*os.ProcessState) int64 { return 0 }
