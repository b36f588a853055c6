package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Rates are the per-family figures an estimate uses where the store or the
// database has not measured them (each family's are in its family.Family).
type Rates struct {
	StagingBytesPerBlock float64 // compressed record, index and Pebble overhead
	DBBytesPerBlock      float64 // rows and indexes of every table
	FetchBlocksPerSec    float64 // from a local node or the synthetic chain
	ExportBlocksPerSec   float64
	// AfterFillPerFill is the time of the builds a fill defers (keys and
	// indexes) and of the ANALYZE of its tables, as a share of the fill's
	// own time (docs/benchmarks.md's limit section: the index phase beside
	// the fill's COPY).
	AfterFillPerFill float64
}

// EstimateReport is what a job over a range would do and need.
type EstimateReport struct {
	Family        string  `json:"family"`
	From          uint64  `json:"from"`
	To            uint64  `json:"to"`
	ToFetch       uint64  `json:"to_fetch"`  // heights not staged
	ToExport      uint64  `json:"to_export"` // heights not in PostgreSQL (all, without --pg)
	StagingBytes  float64 `json:"staging_bytes"`
	DBBytes       float64 `json:"db_bytes"`
	FetchSeconds  float64 `json:"fetch_seconds"`
	ExportSeconds float64 `json:"export_seconds"`
	Rates         Rates   `json:"rates"`
	StagingSource string  `json:"staging_source"` // "measured" or "default"
	TimeSource    string  `json:"time_source"`    // where the export rate (and the fetch rate, unless FetchSource says) comes from
	// FetchSource says where the fetch rate comes from when it is not
	// TimeSource: "measured: …" from a probe of the --rpc node.
	FetchSource   string `json:"fetch_source,omitempty"`
	FetchMeasured bool   `json:"fetch_measured"`
	// AfterFill is what follows the fill when it defers the keys and
	// indexes (into empty tables): the builds and the ANALYZEs, counted,
	// and their time at Rates.AfterFillPerFill of the fill's.
	AfterFill      AfterFill `json:"after_fill"`
	TotalSeconds   float64   `json:"total_seconds"` // fetch, export and after the fill, one after another (run overlaps the first two)
	DBSource       string    `json:"db_source"`
	DBBlocks       int64     `json:"db_blocks"` // blocks the --pg database holds, of any height
	StagingFree    uint64    `json:"staging_free"`
	StagingHasRoom bool      `json:"staging_has_room"`
	// DBDisk is the database's own disk, where it can be seen from here.
	DBDisk DBDisk `json:"db_disk"`
}

// AfterFill is the work after a fill that deferred its keys and indexes.
type AfterFill struct {
	Builds   int     `json:"builds"`   // keys and indexes built after the fill
	Analyzes int     `json:"analyzes"` // tables analyzed
	Seconds  float64 `json:"seconds"`
	Why      string  `json:"why"` // what the time rests on, or why there is none
}

// DBDisk is the filesystem of the directory the database's tables are
// written to (its tablespace, by default the server's data directory), when
// the server runs on this machine and says where that is.
type DBDisk struct {
	Checked bool   `json:"checked"`
	Dir     string `json:"dir,omitempty"`
	Free    uint64 `json:"free,omitempty"`
	// Shared: the staging directory is on the same filesystem, so the two
	// stores' growth is weighed together against Free.
	Shared  bool   `json:"shared,omitempty"`
	HasRoom bool   `json:"has_room"`
	Why     string `json:"why,omitempty"` // why it was not checked
	Dev     uint64 `json:"-"`
}

// NoRoomError is an estimate whose bytes exceed the free space of a
// filesystem: the staging directory's or the database's.
type NoRoomError struct {
	What       string // "staging" or "database"
	Dir        string
	Need, Free uint64
}

func (e *NoRoomError) Error() string {
	what := e.What
	if what == "" {
		what = "staging"
	}
	return fmt.Sprintf("archive: estimate: %s %s needs about %s more and its filesystem has %s free", what, e.Dir, bytesText(float64(e.Need)), bytesText(float64(e.Free)))
}

// Fault marks the error as a configuration error (exit 2).
func (e *NoRoomError) Fault() fault.Class { return fault.Config }

// Estimate says, before anything is fetched or written, how many heights
// of [from, to] are to fetch (not in store; nil store: all) and to export
// (not in the blocks table on conn; nil conn: all), the bytes each store
// will grow by and the time each phase takes — from this store's and this
// database's own bytes per block where they hold at least 1,000 blocks,
// else from defaults, the family's rates; times at the rates of times (BenchTimeRates: a
// benchmark of this machine, else the defaults; nil: the defaults) — and
// whether the staging filesystem has room (*NoRoomError when not).
func Estimate(ctx context.Context, fam string, defaults Rates, store *staging.Store, dir string, conn *pgx.Conn, schema string, blocks chain.Table, tables []chain.Table, from, to uint64, times *TimeRates) (*EstimateReport, error) {
	if to < from {
		return nil, fmt.Errorf("archive: estimate: range end %d is below its start %d", to, from)
	}
	n := to - from + 1
	rates := defaults
	r := &EstimateReport{Family: fam, From: from, To: to, ToFetch: n, ToExport: n, StagingSource: "default", DBSource: "default"}
	if store != nil {
		missing, err := store.Missing(from, to)
		if err != nil {
			return nil, err
		}
		r.ToFetch = 0
		for _, m := range missing {
			r.ToFetch += m.Len()
		}
		// What the store takes on disk for each block it holds (the
		// records, their tables and indexes), not its logs nor files
		// awaiting deletion: those do not grow with the store. The same
		// measure status and the summaries print. Records not flushed
		// yet are in the log only: then the records themselves.
		size, err := store.Size()
		if err != nil {
			return nil, err
		}
		if size.Blocks >= 1000 {
			held := max(size.Records, size.Disk-size.WAL-size.AwaitingDeletion)
			rates.StagingBytesPerBlock, r.StagingSource = float64(held)/float64(size.Blocks), "measured"
		}
	}
	if conn != nil {
		qs := chain.QuoteIdent(schema)
		qt := qs + "." + chain.QuoteIdent(blocks.Name)
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qt).Scan(&exists); err != nil {
			return nil, fmt.Errorf("archive: estimate: %w", err)
		}
		if exists {
			hc := chain.QuoteIdent(blocks.HeightColumn)
			var have, total int64
			if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FILTER (WHERE %[2]s BETWEEN $1 AND $2), count(*) FROM %[1]s", qt, hc), int64(from), int64(to)).Scan(&have, &total); err != nil {
				return nil, fmt.Errorf("archive: estimate: %w", err)
			}
			r.ToExport = n - uint64(have)
			r.DBBlocks = total
			var bytes int64
			for _, t := range tables {
				var b int64
				if err := conn.QueryRow(ctx, "SELECT coalesce(pg_total_relation_size(to_regclass($1)), 0)", qs+"."+chain.QuoteIdent(t.Name)).Scan(&b); err != nil {
					return nil, fmt.Errorf("archive: estimate: %w", err)
				}
				bytes += b
			}
			if total >= 1000 {
				rates.DBBytesPerBlock, r.DBSource = float64(bytes)/float64(total), "measured"
			}
		}
	}
	if times == nil {
		times = &TimeRates{FetchBlocksPerSec: rates.FetchBlocksPerSec, ExportBlocksPerSec: rates.ExportBlocksPerSec, Source: "default rates"}
	}
	rates.FetchBlocksPerSec, rates.ExportBlocksPerSec, r.TimeSource = times.FetchBlocksPerSec, times.ExportBlocksPerSec, times.Source
	if times.Fetch != nil {
		rates.FetchBlocksPerSec, r.FetchSource, r.FetchMeasured = times.Fetch.BlocksPerSec, times.Fetch.Source, true
	}
	r.Rates = rates
	r.StagingBytes = float64(r.ToFetch) * rates.StagingBytesPerBlock
	r.DBBytes = float64(r.ToExport) * rates.DBBytesPerBlock
	r.FetchSeconds = float64(r.ToFetch) / rates.FetchBlocksPerSec
	r.ExportSeconds = float64(r.ToExport) / rates.ExportBlocksPerSec
	r.AfterFill = afterFill(times.Deferred, r.DBBlocks, r.ToExport, r.ExportSeconds, rates.AfterFillPerFill)
	r.TotalSeconds = r.FetchSeconds + r.ExportSeconds + r.AfterFill.Seconds
	free, dev, err := statFree(dir)
	if err != nil {
		return nil, fmt.Errorf("archive: estimate: free space of %s: %w", dir, err)
	}
	r.StagingFree = free
	r.StagingHasRoom = r.StagingBytes <= float64(free)
	if conn != nil {
		r.DBDisk = dbDisk(ctx, conn)
	} else {
		r.DBDisk.Why = "no --pg"
	}
	if d := &r.DBDisk; d.Checked {
		need := r.DBBytes
		if d.Shared = d.Dev == dev; d.Shared {
			need += r.StagingBytes
			r.StagingHasRoom = need <= float64(free)
		}
		d.HasRoom = need <= float64(d.Free)
		if !d.HasRoom {
			what := "database"
			if d.Shared {
				what = "staging and database"
			}
			return r, &NoRoomError{What: what, Dir: d.Dir, Need: uint64(need), Free: d.Free}
		}
	}
	if !r.StagingHasRoom {
		return r, &NoRoomError{What: "staging", Dir: dir, Need: uint64(r.StagingBytes), Free: free}
	}
	return r, nil
}

// afterFill is the work after a fill of toExport heights taking fill
// seconds into tables holding dbBlocks blocks: the deferred builds and
// ANALYZEs of d when the fill defers them (d given, tables empty, or d.Always).
func afterFill(d *Deferred, dbBlocks int64, toExport uint64, fill, perFill float64) AfterFill {
	switch {
	case d == nil:
		return AfterFill{Why: "not counted"}
	case toExport == 0:
		return AfterFill{Why: "nothing to export"}
	case d.Never:
		return AfterFill{Why: "--defer-indexes never: the indexes are kept up during the fill"}
	case dbBlocks > 0 && !d.Always:
		return AfterFill{Why: "the tables hold rows: --defer-indexes auto keeps their indexes up during the fill"}
	}
	return AfterFill{Builds: d.Builds, Analyzes: d.Analyzes, Seconds: fill * perFill,
		Why: fmt.Sprintf("assumed: %.2f of the fill's time, the index phase against the fill in docs/benchmarks.md's limit section", perFill)}
}

// Deferred is what a fill into empty tables defers: its keys' and indexes'
// builds and its tables' ANALYZEs; Always and Never are --defer-indexes'.
type Deferred struct {
	Builds, Analyzes int
	Always, Never    bool
}

// FetchProbe is a fetch rate measured from the source itself.
type FetchProbe struct {
	BlocksPerSec float64
	Source       string // what was measured, how, and what capped it
}

// dbDisk finds the filesystem the database on conn writes its tables to,
// when it can be seen from here: the server reached through a Unix socket
// or a loopback address, a role allowed to read where its data directory
// is (a superuser, or pg_read_all_settings), and that directory present on
// this machine (a server in a container is reached on 127.0.0.1 too, with
// its directories inside the container). Otherwise Why says which of
// these failed.
func dbDisk(ctx context.Context, conn *pgx.Conn) (d DBDisk) {
	var addr *string
	if err := conn.QueryRow(ctx, "SELECT host(inet_server_addr())").Scan(&addr); err != nil {
		d.Why = fmt.Sprintf("the server's address: %v", err)
		return d
	}
	if addr != nil {
		if ip := net.ParseIP(*addr); ip == nil || !ip.IsLoopback() {
			d.Why = fmt.Sprintf("the server (%s) is not on this machine", *addr)
			return d
		}
	}
	var dir string
	err := conn.QueryRow(ctx, `SELECT coalesce(nullif(pg_tablespace_location(d.dattablespace), ''), current_setting('data_directory'))
FROM pg_database d WHERE d.datname = current_database()`).Scan(&dir)
	if err != nil {
		d.Why = fmt.Sprintf("where the server keeps its data: %v", pgMessage(err))
		return d
	}
	if _, err := os.Stat(dir); err != nil {
		d.Why = fmt.Sprintf("the server's data directory %s is not on this machine's filesystem (%v)", dir, err)
		return d
	}
	free, dev, err := statFree(dir)
	if err != nil {
		d.Why = fmt.Sprintf("free space of %s: %v", dir, err)
		return d
	}
	d.Checked, d.Dir, d.Free, d.Dev = true, dir, free, dev
	return d
}

// pgMessage is a server error's message alone.
func pgMessage(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

// statFree is the space available on the filesystem of dir, or of its
// nearest existing parent, and that filesystem's device number. A variable:
// tests give a filesystem less room.
var statFree = func(dir string) (free, dev uint64, err error) {
	d := filepath.Clean(dir)
	for {
		if _, err := os.Stat(d); err == nil {
			break
		}
		p := filepath.Dir(d)
		if p == d {
			break
		}
		d = p
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(d, &st); err != nil {
		return 0, 0, err
	}
	var fi syscall.Stat_t
	if err := syscall.Stat(d, &fi); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), uint64(fi.Dev), nil
}

// WriteText writes the estimate for a terminal.
func (r *EstimateReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "estimate %s heights %d-%d\n", r.Family, r.From, r.To)
	fetchHow := "assumed"
	if r.FetchMeasured {
		fetchHow = "measured"
	}
	fmt.Fprintf(w, "  fetch:   %d heights, ~%s staged (%s/block, %s), ~%s at %.0f blocks/s (%s)\n",
		r.ToFetch, bytesText(r.StagingBytes), bytesText(r.Rates.StagingBytesPerBlock), r.StagingSource, durationText(r.FetchSeconds), r.Rates.FetchBlocksPerSec, fetchHow)
	fmt.Fprintf(w, "  export:  %d heights, ~%s in PostgreSQL (%s/block, %s), ~%s at %.0f blocks/s (assumed)\n",
		r.ToExport, bytesText(r.DBBytes), bytesText(r.Rates.DBBytesPerBlock), r.DBSource, durationText(r.ExportSeconds), r.Rates.ExportBlocksPerSec)
	if a := r.AfterFill; a.Builds > 0 || a.Analyzes > 0 {
		fmt.Fprintf(w, "  after:   %d deferred key and index builds, %d tables analyzed, ~%s (%s)\n", a.Builds, a.Analyzes, durationText(a.Seconds), a.Why)
	} else {
		fmt.Fprintf(w, "  after:   no deferred builds (%s)\n", a.Why)
	}
	fmt.Fprintf(w, "  total:   ~%s (fetch, export and after, one after another; run overlaps fetch and export)\n", durationText(r.TotalSeconds))
	if r.FetchMeasured {
		fmt.Fprintf(w, "  fetch rate: %s\n", r.FetchSource)
		fmt.Fprintf(w, "  export rate: %s\n", r.TimeSource)
	} else {
		fmt.Fprintf(w, "  times:   %s\n", r.TimeSource)
	}
	room := "room enough"
	if !r.StagingHasRoom {
		room = "NOT ENOUGH ROOM"
	}
	d := r.DBDisk
	switch {
	case d.Shared:
		room = "room enough"
		if !d.HasRoom {
			room = "NOT ENOUGH ROOM"
		}
		fmt.Fprintf(w, "  disk:    staging and database (%s) share a filesystem, %s free, ~%s needed: %s\n",
			d.Dir, bytesText(float64(d.Free)), bytesText(r.StagingBytes+r.DBBytes), room)
	case d.Checked:
		dbRoom := "room enough"
		if !d.HasRoom {
			dbRoom = "NOT ENOUGH ROOM"
		}
		fmt.Fprintf(w, "  disk:    staging filesystem %s free: %s; database (%s) %s free: %s\n",
			bytesText(float64(r.StagingFree)), room, d.Dir, bytesText(float64(d.Free)), dbRoom)
	default:
		fmt.Fprintf(w, "  disk:    staging filesystem %s free: %s; the database's disk is not checked: %s\n", bytesText(float64(r.StagingFree)), room, d.Why)
	}
	fmt.Fprintln(w, "           (the database's write-ahead log needs up to max_wal_size more while it loads)")
}
