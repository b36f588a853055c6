package nodehome

import (
	"context"
	"testing"

	"github.com/blockhaul/blockhaul/internal/nodefixture"
)

// BenchmarkFetch reads every height of the recorded 0.38.26 home in spans
// of 16, as one loader worker does; b.N passes over the whole range.
func BenchmarkFetch(b *testing.B) {
	fx := nodefixture.Load(b, "home-0.38")
	src := openHome(b, fx.Unpack(b))
	ctx := context.Background()
	tip := fx.Tip()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for from := uint64(1); from <= tip; from += 16 {
			if _, err := src.Fetch(ctx, from, min(from+15, tip)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)*float64(tip)/b.Elapsed().Seconds(), "blocks/s")
}
