// Package archive holds the operator tools that treat staging and the
// exported database as an archive to be trusted: checksum (an
// order-independent digest of every exported row, and the parity gate
// between two databases), verify (every staged record, the chain it forms,
// and what PostgreSQL holds against it), prune and the reports they print.
//
// Its functions take open stores and connections; pipeline opens them from
// a Config and cmd/blockhaul only binds flags. Nothing here writes to
// PostgreSQL, and only Prune writes to staging.
package archive
