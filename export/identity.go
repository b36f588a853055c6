package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// chainTable records which chain a schema holds, as staging's identity
// record does for a store: one row, written in the transaction of the first
// batch a blockhaul commits into the schema and checked by every writer
// before it writes anything, so that another chain's rows are refused
// rather than mixed in among the rows of the chain the schema holds.
const chainTable = "blockhaul_chain"

func chainTableSQL(qs string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
	one         boolean PRIMARY KEY DEFAULT true CHECK (one),
	family      text NOT NULL,
	chain_id    text NOT NULL,
	height      bigint NOT NULL,
	hash        bytea NOT NULL,
	recorded_at timestamptz NOT NULL DEFAULT now()
)`, qs, chainTable)
}

// ChainRecord is the chain a schema holds, as its chain table records it:
// the family's name, the chain id, and a block of the chain (the first
// block the schema was written with, or the block a reorg rolled it back
// to).
type ChainRecord struct {
	Family  string // the family's name (chain.Family's String), as written
	ChainID string
	Height  uint64
	Hash    []byte
}

func (r ChainRecord) String() string {
	return fmt.Sprintf("%s chain %q (its block %d has hash %X)", r.Family, r.ChainID, r.Height, r.Hash)
}

// Claim is the chain a writer is about to write into a schema: its family
// and chain id, and the hashes of the blocks it can tell.
type Claim struct {
	Family  chain.Family
	ChainID string
	// Where names what the claim was read from, for errors ("staging
	// /data/s2", "the source").
	Where string
	// Lo and Hi bound the heights whose hashes Hash may tell; Hi == 0 when
	// it has none to compare with the schema's rows.
	Lo, Hi uint64
	// Hash returns the hash of the claimed chain's block h, when it can
	// tell it.
	Hash func(ctx context.Context, h uint64) (hash []byte, ok bool, err error)
}

func (c Claim) String() string {
	return fmt.Sprintf("%s chain %q of %s", c.Family, c.ChainID, c.Where)
}

// StagedClaim is the chain store holds, as its identity records it, with
// the hashes of the blocks it stages (a block's hash, or its parent's as
// the block after it names it). ok is false for a store that holds no
// chain yet.
func StagedClaim(store *staging.Store) (Claim, bool, error) {
	id, ok := store.Identity()
	if !ok {
		return Claim{}, false, nil
	}
	c := Claim{Family: id.Family, ChainID: id.ChainID, Where: "staging " + store.Dir(), Hash: StagedHash(store)}
	lo, hi, any, err := store.Bounds()
	if err != nil {
		return Claim{}, false, err
	}
	if any {
		c.Lo, c.Hi = lo, hi
	}
	return c, true, nil
}

// StagedHash returns a Claim's Hash over store: the hash of a staged block,
// or of the block below a staged one, as its parent hash.
func StagedHash(store *staging.Store) func(ctx context.Context, h uint64) ([]byte, bool, error) {
	return func(_ context.Context, h uint64) ([]byte, bool, error) {
		hash, _, err := store.Header(h)
		if err == nil {
			return hash, true, nil
		}
		if !errors.Is(err, staging.ErrNotFound) {
			return nil, false, err
		}
		if h == ^uint64(0) {
			return nil, false, nil
		}
		_, parent, err := store.Header(h + 1)
		if errors.Is(err, staging.ErrNotFound) || err == nil && len(parent) == 0 {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		return parent, true, nil
	}
}

// rowsQuerier is a connection or a transaction.
type rowsQuerier interface {
	querier
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// WrongChainError reports a writer of another chain than the one a schema
// holds. Nothing was written: not a row, a checkpoint, a backfill row nor
// an index.
type WrongChainError struct {
	Schema      string
	Have, Given string
}

func (e *WrongChainError) Error() string {
	return fmt.Sprintf("export: schema %s holds %s, refusing %s (another chain's rows would mix with its own: use another --schema or database)",
		e.Schema, e.Have, e.Given)
}

// Fault marks the error as data that is wrong (exit 4): another chain's
// rows.
func (e *WrongChainError) Fault() fault.Class { return fault.Data }

// ReadChainRecord reads the chain schema's chain table records. ok is
// false when it records none: a new schema, or one an older blockhaul
// wrote.
func ReadChainRecord(ctx context.Context, q querier, schema string) (ChainRecord, bool, error) {
	name := chain.QuoteIdent(schema) + "." + chainTable
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
		return ChainRecord{}, false, fmt.Errorf("export: look for %s: %w", name, err)
	}
	if !exists {
		return ChainRecord{}, false, nil
	}
	var r ChainRecord
	var h int64
	err := q.QueryRow(ctx, "SELECT family, chain_id, height, hash FROM "+name).Scan(&r.Family, &r.ChainID, &h, &r.Hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return ChainRecord{}, false, nil
	}
	if err != nil {
		return ChainRecord{}, false, fmt.Errorf("export: read %s: %w", name, err)
	}
	r.Height = uint64(h)
	return r, true, nil
}

// CheckChain refuses, as *WrongChainError, a writer of claim's chain into a
// schema that holds another: one whose record names another family or
// chain id, or a block whose hash the claimed chain tells otherwise. A
// schema without a record (an older blockhaul's) is checked against its own
// rows: the hash of a block its blocks table holds and the claimed chain
// can tell (tables are the family's, every one of them: AllTables). It only
// reads; the record is written with the first batch (see confirmChain).
func CheckChain(ctx context.Context, q rowsQuerier, schema string, tables []chain.Table, claim Claim) error {
	rec, ok, err := ReadChainRecord(ctx, q, schema)
	if err != nil {
		return err
	}
	if ok {
		known, err := checkRecord(ctx, schema, rec, claim)
		if err != nil || known {
			return err
		}
	}
	// No record, or a recorded block the claimed chain cannot tell (it
	// stages other heights): the rows themselves.
	return checkRows(ctx, q, schema, tables, claim)
}

// checkRecord compares rec with claim. known reports that claim could tell
// the recorded block's hash.
func checkRecord(ctx context.Context, schema string, rec ChainRecord, claim Claim) (known bool, err error) {
	if rec.Family != claim.Family.String() || rec.ChainID != claim.ChainID {
		return false, &WrongChainError{Schema: schema, Have: rec.String(), Given: claim.String()}
	}
	if claim.Hash == nil {
		return false, nil
	}
	hash, known, err := claim.Hash(ctx, rec.Height)
	if err != nil {
		return false, fmt.Errorf("export: check the chain of schema %s: read block %d of %s: %w", schema, rec.Height, claim.Where, err)
	}
	if known && !bytes.Equal(hash, rec.Hash) {
		return true, &WrongChainError{Schema: schema, Have: rec.String(),
			Given: fmt.Sprintf("%s, whose block %d has hash %X", claim, rec.Height, hash)}
	}
	return known, nil
}

// rowsToCompare bounds the blocks rows checkRows reads looking for one the
// claimed chain can tell: enough to step over the gaps of a partly staged
// store, few enough that a source asked for each stays cheap.
const rowsToCompare = 16

// checkRows compares the hash of a block the schema's blocks table holds
// with the claimed chain's, for the lowest rows within the heights the
// claim can tell, until one can be compared.
func checkRows(ctx context.Context, q rowsQuerier, schema string, tables []chain.Table, claim Claim) error {
	if claim.Hash == nil || claim.Hi == 0 {
		return nil
	}
	bt, ok := blocksTable(tables)
	if !ok {
		return nil
	}
	qs := chain.QuoteIdent(schema)
	name := qs + "." + chain.QuoteIdent(bt.Name)
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
		return fmt.Errorf("export: look for %s: %w", name, err)
	}
	if !exists {
		return nil
	}
	lo := claim.Lo
	if lo > 0 {
		lo-- // the parent of the claim's lowest block
	}
	rows, err := q.Query(ctx, fmt.Sprintf("SELECT %[1]s, hash FROM %[2]s WHERE %[1]s BETWEEN $1 AND $2 ORDER BY %[1]s LIMIT %[3]d",
		chain.QuoteIdent(bt.HeightColumn), name, rowsToCompare), int64(min(lo, 1<<63-1)), int64(min(claim.Hi, 1<<63-1)))
	if err != nil {
		return fmt.Errorf("export: read %s: %w", name, err)
	}
	type row struct {
		h    uint64
		hash []byte
	}
	var have []row
	for rows.Next() {
		var h int64
		var hash []byte
		if err := rows.Scan(&h, &hash); err != nil {
			rows.Close()
			return fmt.Errorf("export: read %s: %w", name, err)
		}
		have = append(have, row{uint64(h), hash})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export: read %s: %w", name, err)
	}
	for _, r := range have {
		hash, known, err := claim.Hash(ctx, r.h)
		if err != nil {
			return fmt.Errorf("export: check the chain of schema %s: read block %d of %s: %w", schema, r.h, claim.Where, err)
		}
		if !known {
			continue
		}
		if !bytes.Equal(hash, r.hash) {
			return &WrongChainError{Schema: schema,
				Have:  fmt.Sprintf("rows of another chain (its blocks table's block %d has hash %X)", r.h, r.hash),
				Given: fmt.Sprintf("%s, whose block %d has hash %X", claim, r.h, hash)}
		}
		return nil
	}
	return nil
}

// blocksTable is the family's table of blocks: named "blocks", with a
// "hash" column.
func blocksTable(tables []chain.Table) (chain.Table, bool) {
	for _, t := range tables {
		if t.Name == "blocks" && slices.Contains(t.ColumnNames(), "hash") {
			return t, true
		}
	}
	return chain.Table{}, false
}

// chainCheck is a writer's check of the schema's chain against its staging
// store, made once per attempt inside the transaction of its first batch:
// the record is written there when the schema has none (its first rows, or
// the first a blockhaul that records chains writes into an older schema),
// and compared with staging when another writer's is there.
type chainCheck struct {
	store *staging.Store
	done  bool // a batch of this attempt committed with the record checked
}

// confirm records the chain of staging in schema, inside tx, unless the
// schema records one already; then checks that the record is staging's
// chain. b is the batch about to be committed: its first block is the one
// recorded.
func (c *chainCheck) confirm(ctx context.Context, tx pgx.Tx, schema string, b batch) error {
	if c == nil || c.done {
		return nil
	}
	claim, ok, err := StagedClaim(c.store)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("export: staging %s records no chain: cannot write its blocks into schema %s", c.store.Dir(), schema)
	}
	_, err = tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.%s (family, chain_id, height, hash) VALUES ($1, $2, $3, $4) ON CONFLICT (one) DO NOTHING`,
		chain.QuoteIdent(schema), chainTable), claim.Family.String(), claim.ChainID, int64(b.from), b.firstHash)
	if err != nil {
		return fmt.Errorf("export: record the chain of schema %s: %w", schema, err)
	}
	rec, ok, err := ReadChainRecord(ctx, tx, schema)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("export: schema %s: the chain record written is not there", schema)
	}
	_, err = checkRecord(ctx, schema, rec, claim)
	return err
}

// committed marks the check made: a batch checked by confirm committed.
func (c *chainCheck) committed() {
	if c != nil {
		c.done = true
	}
}

// checkStaged is CheckChain of the chain store holds, if it holds one yet
// (run's store may be bound only once its fetch starts: the first batch's
// confirm checks it then).
func checkStaged(ctx context.Context, q rowsQuerier, schema string, dec Decoder, store *staging.Store) error {
	claim, ok, err := StagedClaim(store)
	if err != nil || !ok {
		return err
	}
	return CheckChain(ctx, q, schema, AllTables(dec), claim)
}
