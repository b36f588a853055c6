package trust_test

import (
	"fmt"
	"testing"

	"github.com/blockhaul/blockhaul/chain/cometbft/trust"
	"github.com/blockhaul/blockhaul/chain/cometbft/trust/trusttest"
)

// BenchmarkProve proves 64 heights of a chain of 4 and of 100 validators
// in each mode, one batch; it reports the cost a block and, for every,
// a signature checked.
func BenchmarkProve(b *testing.B) {
	for _, nv := range []int{4, 100} {
		c, err := trusttest.Build(65, trusttest.Options{Validators: nv, Txs: 5})
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []trust.Mode{trust.Changes, trust.Every} {
			b.Run(fmt.Sprintf("%s/validators=%d", mode, nv), func(b *testing.B) {
				st, err := trust.FromGenesis(c.Genesis)
				if err != nil {
					b.Fatal(err)
				}
				var sigs int64
				for b.Loop() {
					tc := trust.New(st, mode)
					if err := tc.Prove(c.Records[:64], c.Records[64]); err != nil {
						b.Fatal(err)
					}
					sigs += tc.Signatures
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/block")
				if mode == trust.Every {
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(sigs), "ns/sig")
				}
			})
		}
	}
}
