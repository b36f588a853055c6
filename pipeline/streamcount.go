package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/blockhaul/blockhaul/export"
	"github.com/jackc/pgx/v5"
)

// streamFacts is what --export-streams auto is chosen from.
type streamFacts struct {
	CPUs int // this process's (GOMAXPROCS: the CPUs it may use)
	// Local: the server runs on this machine (a Unix socket, a loopback
	// address or one of this machine's), so its backends share the CPUs.
	Local bool
	// FreeConns is max_connections less the reserved connections and the
	// client connections open now; negative when unknown.
	FreeConns   int
	Blocks      uint64 // in the range to split
	BatchBlocks int
	// BRIN names the BRIN indexes of the job's --indexes, which a split
	// leaves reading most of their table (their selectivity rests on the
	// heap being in height order).
	BRIN []string
}

// Most streams auto chooses for a server elsewhere: its cores are not
// known, and the projection of the streams benchmark of docs/benchmarks.md goes to 16.
const maxAutoStreams = 16

// autoStreams is --export-streams auto: how many export streams the range
// of f is split into, and why, from the measurements of docs/benchmarks.md's
// "Export streams" (2 cores: 2 streams 1.21× one, 4 streams 1.05×). A
// stream is one backend, which runs on one core; feeding it costs blockhaul
// about a third of a core (≈2.2 µs of blockhaul CPU per row against ≈6 µs
// of backend CPU). On a local server the two share the CPUs, so a stream
// takes ≈1.35 of them: three quarters of the CPUs, rounded up (2 of 2: the
// best measured; 4, on 2 cores, gave back most of the gain, though that
// was before the heap limit per stream and not re-decided since: the
// docs/benchmarks.md's later run was too busy to rank them). On a server
// elsewhere blockhaul's CPUs only decode: two streams per CPU, at most
// maxAutoStreams. Either way at most half the free connections (other
// clients, and the index builds at the end, need theirs), and no more
// streams than the range has batches (each stream at least one whole
// --batch-blocks transaction); at least one.
//
// With the server on this machine and BRIN indexes among the job's, auto
// keeps one stream: the split's gain there is small (1.06–1.14× measured on
// 2 cores, the bound being the CPUs both sides share) and its cost lasting
// (the BRIN indexes on block time read 77,824 heap pages for a 10-minute
// range of events after 2 streams against 384 after 1, until the table is
// CLUSTERed; docs/querying.md#indexes). Trading query speed for load speed
// is the user's to ask for, with --export-streams N. With the server
// elsewhere its cores are its own and the gain is the point of it; the job
// logs which BRIN indexes lose their selectivity.
func autoStreams(f streamFacts) (int, string) {
	cpus := max(f.CPUs, 1)
	var n int
	var why []string
	if f.Local && len(f.BRIN) > 0 {
		return 1, fmt.Sprintf("auto: PostgreSQL on this machine (%d CPUs shared) and BRIN indexes (%s): one stream keeps the rows in height order, which those indexes need; a split gains little here (1.06-1.14x on 2 cores); --export-streams N splits anyway",
			cpus, strings.Join(f.BRIN, ","))
	}
	if f.Local {
		n = (3*cpus + 3) / 4
		why = append(why, fmt.Sprintf("%d CPUs shared with a PostgreSQL server on this machine: 3/4 of them, rounded up", cpus))
	} else {
		n = min(2*cpus, maxAutoStreams)
		why = append(why, fmt.Sprintf("%d CPUs, PostgreSQL on another machine: 2 a CPU, at most %d", cpus, maxAutoStreams))
	}
	if f.FreeConns >= 0 && n > f.FreeConns/2 {
		n = max(f.FreeConns/2, 1)
		why = append(why, fmt.Sprintf("fewer: %d free connections, half of them", f.FreeConns))
	}
	if batches := f.Blocks / uint64(max(f.BatchBlocks, 1)); uint64(n) > batches {
		n = int(max(batches, 1))
		why = append(why, "fewer: "+batchesText(f.Blocks, batches, f.BatchBlocks))
	}
	n = min(n, MaxExportStreams)
	return n, "auto: " + strings.Join(why, "; ")
}

// batchesText says how many whole export batches a range fills, each
// stream's least: "50 blocks are less than one batch of 500", "999 blocks
// fill 1 whole batch of 500", "120 blocks fill 2 whole batches of 50".
func batchesText(blocks, batches uint64, batchBlocks int) string {
	switch batches {
	case 0:
		return fmt.Sprintf("%d blocks are less than one batch of %d", blocks, batchBlocks)
	case 1:
		return fmt.Sprintf("%d blocks fill 1 whole batch of %d", blocks, batchBlocks)
	}
	return fmt.Sprintf("%d blocks fill %d whole batches of %d", blocks, batches, batchBlocks)
}

// machineCPUs is the CPUs this process may use (a variable for tests).
var machineCPUs = func() int { return runtime.GOMAXPROCS(0) }

// readStreamFacts learns from the server what autoStreams needs.
func readStreamFacts(ctx context.Context, conn *pgx.Conn, cfg *Job, blocks uint64) (streamFacts, error) {
	f := streamFacts{CPUs: machineCPUs(), Blocks: blocks, BatchBlocks: cfg.BatchBlocks, FreeConns: -1}
	var maxConns, reserved, inUse int
	var addr *string
	err := conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int,
	current_setting('superuser_reserved_connections')::int + coalesce(nullif(current_setting('reserved_connections', true), ''), '0')::int,
	(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int,
	host(inet_server_addr())`).Scan(&maxConns, &reserved, &inUse, &addr)
	if err != nil {
		return f, fmt.Errorf("read the server's connections and address: %w", err)
	}
	f.FreeConns = max(maxConns-reserved-inUse, 0)
	f.Local = serverLocal(addr)
	return f, nil
}

// serverLocal reports whether a server whose inet_server_addr() is addr
// runs on this machine: a Unix socket (NULL) or a local address.
func serverLocal(addr *string) bool { return addr == nil || isLocalAddr(*addr) }

// isLocalAddr reports whether ip is a loopback address or one of this
// machine's interfaces'.
func isLocalAddr(s string) bool {
	ip := net.ParseIP(s)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// planStreams decides how many export streams split the backfill s: the
// layout an earlier run recorded for it, when there is one (a resumed job
// carries on with its sub-ranges, whatever this machine would choose);
// else --export-streams; else autoStreams. An --export-streams that names
// another count than the recorded one is refused: the recorded sub-ranges'
// checkpoints would be left behind and the range exported again. The
// choice and its reason are logged.
//
// beside is the other streams the process runs (follow's head), for the
// heap limit: with cfg.MemoryLimitPerStream set, it becomes that times
// n + beside.
func planStreams(ctx context.Context, cfg *Job, db *export.Session, s export.Stream, beside int, log *slog.Logger) (n int, why string, err error) {
	var recorded int
	var ok bool
	var f streamFacts
	err = db.Do(ctx, "plan export streams of "+s.Name(), func(ctx context.Context, conn *pgx.Conn) (err error) {
		if recorded, ok, err = export.RecordedStreams(ctx, conn, cfg.Schema, s); err != nil || ok || cfg.ExportStreams > 0 {
			return err
		}
		f, err = readStreamFacts(ctx, conn, cfg, s.To-s.From+1)
		return err
	})
	switch {
	case err != nil:
		return 0, "", err
	case ok && cfg.ExportStreams > 0 && cfg.ExportStreams != recorded:
		return 0, "", &ConfigError{Fields: []*FieldError{{Flag: "export-streams", Env: EnvName("export-streams"),
			Msg: fmt.Sprintf("%d, but backfill %s was split into %d by an earlier run and resumes with them (give %d or auto; another --alias starts over)", cfg.ExportStreams, s.Alias, recorded, recorded)}}}
	case ok:
		n, why = recorded, fmt.Sprintf("resuming the layout an earlier run recorded for %s", s.Alias)
	case cfg.ExportStreams > 0:
		n, why = cfg.ExportStreams, "--export-streams"
	default:
		f.BRIN = brinIndexes(cfg)
		n, why = autoStreams(f)
	}
	log.Info("export streams", "streams", n, "reason", why, "alias", s.Alias, "from", s.From, "to", s.To)
	if brin := brinIndexes(cfg); n > 1 && len(brin) > 0 {
		log.Info("the export streams interleave their sub-ranges' rows in each table, out of height order: the BRIN indexes lose their selectivity (a short time range reads most of the table); --export-streams 1 keeps height order (docs/querying.md#indexes)",
			"streams", n, "brin_indexes", strings.Join(brin, ","))
	}
	if per := cfg.MemoryLimitPerStream; per > 0 && n > 1 {
		// One stream's batch is its working set: under one stream's limit
		// N of them keep the collector running (docs/benchmarks.md's profile: 4
		// streams under 128 MiB spent half their CPU in it). Within a
		// container's memory limit, though: a soft limit above it is an
		// OOM kill rather than more collections.
		limit := per * int64(n+beside)
		if ceiling, ok := memoryCeiling(); ok && limit > ceiling {
			limit = max(ceiling, per)
			log.Warn("heap limit of the export streams held at 3/4 of the container's memory limit: the collector may run often", "limit_mib", limit>>20, "streams", n+beside, "per_stream_mib", per>>20)
		}
		debug.SetMemoryLimit(limit)
		log.Info("heap limit raised for the export streams", "limit_mib", limit>>20, "streams", n+beside)
	}
	return n, why, nil
}

// brinIndexes names the BRIN indexes the job's tables have (--indexes),
// whose selectivity rests on the rows' order in the heap.
func brinIndexes(cfg *Job) []string {
	if cfg.Family == nil {
		return nil
	}
	var out []string
	for _, t := range cfg.Indexes.Select(cfg.Family.Tables()) {
		for _, ix := range t.Indexes {
			if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(ix.Columns)), "USING BRIN") {
				out = append(out, ix.Name)
			}
		}
	}
	return out
}

// cgroupMemoryFiles hold the memory limit of the process's cgroup (v2, v1);
// a variable for tests.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryCeiling is 3/4 of the memory limit of the container blockhaul runs
// in, if it has one (the rest is Pebble's, the COPY buffers' and the
// runtime's), in bytes.
func memoryCeiling() (int64, bool) {
	for _, p := range cgroupMemoryFiles {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v <= 0 || v >= 1<<60 { // "max", or v1's "no limit"
			return 0, false
		}
		return v / 4 * 3, true
	}
	return 0, false
}

// autoIndexWorkers is --index-workers auto: how many deferred indexes are
// built at once, and why. Each build is one backend on one core (a GIN
// build always, before PostgreSQL 18; a B-tree unless the server adds
// parallel workers to it). On a server elsewhere its cores are not known
// here: export.DefaultIndexWorkers. On this machine more builds than CPUs
// share them, and the longest build, which bounds the phase, is slowed by
// the others beside it: at 60,000 CometBFT blocks on 2 CPUs the GIN build
// on events.attributes took 15.3 s beside 3 others and 11.5 s beside 1,
// the index phase 15.8 s against 12.1 s (docs/benchmarks.md). So at most
// one build a CPU.
func autoIndexWorkers(cpus int, local bool) (int, string) {
	if !local {
		return export.DefaultIndexWorkers, fmt.Sprintf("auto: PostgreSQL on another machine, %d", export.DefaultIndexWorkers)
	}
	n := min(export.DefaultIndexWorkers, max(cpus, 1))
	return n, fmt.Sprintf("auto: PostgreSQL on this machine, one build a CPU of its %d, at most %d", cpus, export.DefaultIndexWorkers)
}

// resolveIndexWorkers is --index-workers, auto (0) resolved from the
// machine and where the server is, and why that many.
func resolveIndexWorkers(ctx context.Context, cfg *Job, conn *pgx.Conn, log *slog.Logger) (int, string, error) {
	if cfg.IndexWorkers > 0 {
		return cfg.IndexWorkers, "--index-workers", nil
	}
	var addr *string
	if err := conn.QueryRow(ctx, `SELECT host(inet_server_addr())`).Scan(&addr); err != nil {
		return 0, "", fmt.Errorf("read the server's address: %w", err)
	}
	n, why := autoIndexWorkers(machineCPUs(), serverLocal(addr))
	log.Info("index workers", "workers", n, "reason", why)
	return n, why, nil
}
