package evmsynth

// DecodingABI is a JSON ABI (--abi) of three of the events the synthetic
// chain emits — ERC-20 Approval, Uniswap V2 Sync and Uniswap V3 Swap — with
// the topic0s, topic counts and data words of its logs, so that each of
// those logs decodes as its event: about 29% of the chain's logs, the
// others (Transfer, V2 Swap, Deposit, Withdrawal, ERC-721 Transfer) not
// claimed. It is what the benchmark's decoding section and
// chain/evm/events' BenchmarkDecode decode with (docs/evm-events.md).
const DecodingABI = `[
  {"anonymous": false, "type": "event", "name": "Approval", "inputs": [
    {"indexed": true, "name": "owner", "type": "address"},
    {"indexed": true, "name": "spender", "type": "address"},
    {"indexed": false, "name": "value", "type": "uint256"}]},
  {"anonymous": false, "type": "event", "name": "Sync", "inputs": [
    {"indexed": false, "name": "reserve0", "type": "uint112"},
    {"indexed": false, "name": "reserve1", "type": "uint112"}]},
  {"anonymous": false, "type": "event", "name": "Swap", "inputs": [
    {"indexed": true, "name": "sender", "type": "address"},
    {"indexed": true, "name": "recipient", "type": "address"},
    {"indexed": false, "name": "amount0", "type": "int256"},
    {"indexed": false, "name": "amount1", "type": "int256"},
    {"indexed": false, "name": "sqrtPriceX96", "type": "uint160"},
    {"indexed": false, "name": "liquidity", "type": "uint128"},
    {"indexed": false, "name": "tick", "type": "int24"}]}
]
`
