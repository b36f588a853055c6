package archive

import (
	"fmt"
	"runtime"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/staging"
)

// Decoder is what a deep verify needs of a chain family's decoder.
type Decoder interface {
	Tables() []chain.Table
	Decode(height uint64, raw []byte, rows *chain.Rows) error
}

// VerifyConfig says what Verify checks.
type VerifyConfig struct {
	// From and To bound the heights checked (inclusive). A side not given
	// (FromSet, ToSet false) is the store's lowest or highest staged height.
	From, To       uint64
	FromSet, ToSet bool
	// Deep decompresses every record, recomputes its block hash from its
	// own header (Recompute) and decodes it into rows (Decoder).
	Deep bool
	// Recompute returns the block hash a raw record's own header gives, or
	// an error when the record's content does not match the hash it
	// carries (the family's VerifyBlock). Nil: not checked.
	Recompute func(raw []byte) ([]byte, error)
	// Decoder decodes records in a deep verify. Nil: not decoded.
	Decoder Decoder
	// MaxListed caps how many problems of each kind the report lists (the
	// counts are always exact). Default 1000.
	MaxListed int
	// Chunk is how many heights one digest chunk of VerifyPG's row
	// comparison covers, aligned as checksum's. Default DefaultChunk.
	Chunk uint64
	// Workers is how many goroutines read, decompress, rehash and decode
	// records at once, each over its own segment of heights; the report is
	// the same for any number. Default GOMAXPROCS.
	Workers int
}

// Problem is one height found wrong.
type Problem struct {
	Height uint64   `json:"height"`
	Reason string   `json:"reason"`
	Files  []string `json:"files,omitempty"` // the store's files holding it, where known
}

// Break is a block whose parent hash is not the hash of the block below.
type Break struct {
	Height     uint64 `json:"height"`
	ParentHash []byte `json:"parent_hash"` // as the block at Height says
	BelowHash  []byte `json:"below_hash"`  // the hash of the block at Height-1
	Where      string `json:"where"`       // "staging" or "postgresql"
}

// Gap is a run of heights that are missing.
type Gap struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// Len is the number of heights in g.
func (g Gap) Len() uint64 { return g.To - g.From + 1 }

// StagingReport is what Verify found in a staging store.
type StagingReport struct {
	Dir     string  `json:"dir"`
	Family  string  `json:"family"`
	ChainID string  `json:"chain_id"`
	From    *uint64 `json:"from"` // the range checked; nil for an empty store
	To      *uint64 `json:"to"`
	Deep    bool    `json:"deep"`
	Records uint64  `json:"records"` // records read

	Gaps        []Gap     `json:"gaps"`
	GapCount    int       `json:"gap_count"`
	GapHeights  uint64    `json:"gap_heights"`
	Corrupt     []Problem `json:"corrupt"`     // bad header, checksum, index, unreadable or not decompressing
	WrongHash   []Problem `json:"wrong_hash"`  // deep: content that does not hash to the staged hash
	Undecodable []Problem `json:"undecodable"` // deep: records the decoder refuses
	Breaks      []Break   `json:"breaks"`
	// Counts of each kind; the lists above stop at MaxListed.
	CorruptCount     int `json:"corrupt_count"`
	WrongHashCount   int `json:"wrong_hash_count"`
	UndecodableCount int `json:"undecodable_count"`
	BreakCount       int `json:"break_count"`
	// Unreadable is set when the store could not be read to the end (a
	// damaged file): the error, naming the last height read.
	Unreadable string        `json:"unreadable,omitempty"`
	Duration   time.Duration `json:"duration_ns"`
}

// Problems is the number of things found wrong.
func (r *StagingReport) Problems() int {
	n := r.GapCount + r.CorruptCount + r.WrongHashCount + r.UndecodableCount + r.BreakCount
	if r.Unreadable != "" {
		n++
	}
	return n
}

// Verify checks every staged record of the range: header and checksum,
// that the index entry agrees with it, contiguity (gaps are listed as
// ranges) and the parent-hash chain; a deep verify also decompresses each
// record, recomputes its block hash and decodes it. A plain verify never
// decompresses. A store that cannot be read to the end is reported, not
// returned as an error: the error return is for a verify that could not
// run.
func Verify(store *staging.Store, cfg VerifyConfig) (*StagingReport, error) {
	if cfg.MaxListed <= 0 {
		cfg.MaxListed = 1000
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	r := &StagingReport{Dir: store.Dir(), Deep: cfg.Deep, Gaps: []Gap{}, Corrupt: []Problem{}, WrongHash: []Problem{}, Undecodable: []Problem{}, Breaks: []Break{}}
	if id, ok := store.Identity(); ok {
		r.Family, r.ChainID = id.Family.String(), id.ChainID
	}
	lo, hi, ok, err := store.Bounds()
	if err != nil {
		return nil, fmt.Errorf("archive: verify: %w", err)
	}
	from, to := lo, hi
	if cfg.FromSet {
		from = cfg.From
	}
	if cfg.ToSet {
		to = cfg.To
	}
	if !ok && !(cfg.FromSet && cfg.ToSet) {
		r.Duration = time.Since(start)
		return r, nil // an empty store, no range asked: nothing to check
	}
	if to < from {
		return nil, fmt.Errorf("archive: verify: range end %d is below its start %d", to, from)
	}
	r.From, r.To = &from, &to

	w := &walker{r: r, cfg: cfg, next: from}
	if err := verifySegments(store, cfg, from, to, w.observe); err != nil {
		r.Unreadable = err.Error()
	} else if w.next <= to {
		r.addGap(w.next, to, cfg.MaxListed)
	}
	// Name the files that hold each corrupt height, where Pebble can say.
	for _, list := range [][]Problem{r.Corrupt, r.WrongHash} {
		for i := range list {
			if files, err := store.FilesOf(list[i].Height, list[i].Height); err == nil {
				list[i].Files = files
			}
		}
	}
	r.Duration = time.Since(start)
	return r, nil
}

func (r *StagingReport) addGap(from, to uint64, max int) {
	r.GapCount++
	r.GapHeights += to - from + 1
	if len(r.Gaps) < max {
		r.Gaps = append(r.Gaps, Gap{From: from, To: to})
	}
}
