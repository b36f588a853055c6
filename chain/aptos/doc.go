// Package aptos is blockhaul's Aptos family: blocks of an Aptos fullnode's
// REST API (/v1), a record per block with every transaction of it, checked
// before it is staged, and decoded into tables after the Aptos indexer's
// default processors (blocks, transactions, user_transactions, events,
// write_set_changes). docs/aptos.md describes the source, the checks, the
// tables and their types.
//
// A record is JSON, {"block":…,"pages":[…],"parent":{…}}: "block" is the
// node's answer to /v1/blocks/by_height/{h}?with_transactions=true byte for
// byte; "pages" the answers to /v1/transactions?start=&limit= that carry
// the block's transactions the first answer did not (a node puts at most
// its max_block_transactions_page_size of them in a block's answer);
// "parent" the hash and last version of block h-1 as the node gave them
// (absent at height 0). The staged block hash is the block's hash and its
// parent hash the parent's, so the engines' parent links check, across
// every boundary, that each block's first version follows the last of the
// block before it.
package aptos
