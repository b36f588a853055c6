// Package jsonrpc is blockhaul's JSON-RPC 2.0 client over HTTP, shared by the
// chain families' RPC sources (CometBFT, EVM). It knows no chain: it moves
// calls and raw result bytes, and leaves their meaning to the source.
//
// It is built to be a good citizen of fetch at full speed against nodes and
// paid providers: several endpoints with health tracking, failover and
// probing; per-endpoint rate limits and in-flight caps; retries with
// exponential backoff (internal/backoff) for what is transient; honouring
// Retry-After and provider throttling; batches that are split, shrunk when
// an endpoint finds them too large and replaced by single calls where an
// endpoint refuses them. Application errors come back at once as *RPCError.
//
// Endpoint URLs often carry credentials (userinfo, API keys in the path or
// query). Every log line, error and status string uses Redact's form of them.
package jsonrpc
