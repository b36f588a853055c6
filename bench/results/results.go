// Package results holds the benchmark's results (bench.WriteFiles: one
// JSON, Markdown and SVG set per run; latest.* the newest). The newest
// result is embedded, so that estimate reads the rates the benchmark
// measured wherever the binary runs, not only in a checkout.
package results

import _ "embed"

// Latest is latest.json as it was when the binary was built.
//
//go:embed latest.json
var Latest []byte
