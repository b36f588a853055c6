package pipeline

import (
	"reflect"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
	"github.com/blockhaul/blockhaul/export"
)

// Export reuses one buffer for every staged record, so no decoded value may
// alias the raw record: scribbling over it after Decode must change nothing.
func TestDecodersKeepNoSliceOfRaw(t *testing.T) {
	type family struct {
		dec   export.Decoder
		block func(h uint64) chain.Block
	}
	cs := cometbftsynth.NewSynthetic(cometbftsynth.SyntheticConfig{Seed: 5})
	es := evmsynth.NewSynthetic(evmsynth.SyntheticConfig{Seed: 5, TxPerBlock: 20, LogsPerBlock: 50})
	for name, f := range map[string]family{
		"cometbft": {cometbft.NewDecoder(), cs.Block},
		"evm":      {evm.NewDecoder(), es.Block},
	} {
		for h := uint64(1); h <= 40; h++ {
			b := f.block(h)
			want := chain.NewRows(f.dec.Tables())
			if err := f.dec.Decode(h, append([]byte(nil), b.Raw...), want); err != nil {
				t.Fatalf("%s %d: %v", name, h, err)
			}
			got := chain.NewRows(f.dec.Tables())
			if err := f.dec.Decode(h, b.Raw, got); err != nil {
				t.Fatal(err)
			}
			for i := range b.Raw {
				b.Raw[i] = 'x'
			}
			for i := range f.dec.Tables() {
				if !reflect.DeepEqual(got.Table(i), want.Table(i)) {
					t.Fatalf("%s block %d: rows of table %d changed when the raw record was overwritten", name, h, i)
				}
			}
		}
	}
}
