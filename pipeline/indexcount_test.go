package pipeline

import "github.com/blockhaul/blockhaul/chain/cometbft"

// cometbftIndexes is the number of secondary indexes of the CometBFT tables.
var cometbftIndexes = func() (n int) {
	for _, tb := range cometbft.NewDecoder().Tables() {
		n += len(tb.Indexes)
	}
	return n
}()
