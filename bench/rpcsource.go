package bench

import (
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/loader"
)

// RPCSource returns a Config.FetchSource that builds fam's RPC source as
// `blockhaul fetch --rpc` does: one JSON-RPC client per endpoint with
// concurrency requests in flight (the fetch workers), the family's source on
// top. The source it returns has a Close that releases the client.
func RPCSource(fam chain.Family, concurrency int) func(endpoint string) (loader.Source, error) {
	return func(endpoint string) (loader.Source, error) {
		client, err := jsonrpc.New(jsonrpc.Config{Endpoints: []string{endpoint}, Concurrency: concurrency})
		if err != nil {
			return nil, fmt.Errorf("bench: rpc client: %w", err)
		}
		var src loader.Source
		if f := family.Of(fam); f == nil {
			err = fmt.Errorf("bench: no RPC source for chain %s", fam)
		} else {
			src, err = f.Source(family.SourceRPC, family.SourceOptions{Client: client})
		}
		if err != nil {
			client.Close()
			return nil, err
		}
		return closingSource{src, client.Close}, nil
	}
}

// closingSource is a source that owns the client under it.
type closingSource struct {
	loader.Source
	close func()
}

func (s closingSource) Close() { s.close() }
