package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/pipeline"
)

// Markdown renders r as the tables docs/benchmarks.md shows. When images is not
// empty, the plots are linked as images+"throughput-<density>.svg" and
// images+"scaling.svg" (the names WriteFiles gives them).
func Markdown(r Result, images string) string {
	var b strings.Builder
	writeHeader(&b, r)
	if len(r.Densities) > 0 {
		writeDensities(&b, r, images)
	}
	if len(r.Decoding) > 0 {
		writeDecoding(&b, r)
	}
	if len(r.Limits) > 0 {
		writeLimits(&b, r)
	}
	if st := r.Streams; st != nil {
		writeStreams(&b, r, st)
	}
	if f := r.Fetch; f != nil {
		writeFetch(&b, f)
	}
	if h := r.HeadBackfill; h != nil {
		writeHeadBackfill(&b, r, h)
	}
	if len(r.Processes) > 0 {
		writeProcesses(&b, r, images)
	}
	return b.String()
}

// writeHeader writes the machine, the CPU over the run and the targets.
func writeHeader(b *strings.Builder, r Result) {
	m := r.Machine
	fmt.Fprintf(b, "## blockhaul benchmark, %s\n\n", r.Date.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(b, "Machine `%s`: %d × %s, %s RAM, %s %s, %s, PostgreSQL %s (local). The run took %s.\n\n",
		m.Host, m.CPUs, orDash(m.CPUModel), fmtBytes(m.MemoryBytes), m.OS, m.Kernel, m.GoVersion, m.PostgreSQL,
		(time.Duration(r.Seconds) * time.Second).Round(time.Second))

	if u := r.CPU; u.Known {
		fmt.Fprintf(b, "CPU over the run: benchmark and blockhaul %s s, PostgreSQL %s s, other processes %s s of %s CPU-seconds (%.0f%%).\n\n",
			fmtNum(u.Bench), fmtNum(u.Postgres), fmtNum(u.Other), fmtNum(u.Capacity), 100*u.OtherShare())
		if u.Busy() {
			b.WriteString("**The machine was busy**: other processes took more than a tenth of its CPU during the run, and its figures are not representative.\n\n")
		}
	}
	b.WriteString("### Targets\n\n| target | measured | goal | |\n|---|---:|---:|---|\n")
	for _, t := range r.Targets {
		if !t.Measured {
			fmt.Fprintf(b, "| %s | – | %s %s%s | not measured |\n", t.Name, opSign(t.Op), fmtNum(t.Limit), t.Unit)
			continue
		}
		verdict := "**FAIL**"
		if t.Pass {
			verdict = "ok"
		}
		fmt.Fprintf(b, "| %s | %s%s | %s %s%s | %s |\n", t.Name, fmtNum(t.Value), t.Unit, opSign(t.Op), fmtNum(t.Limit), t.Unit, verdict)
	}
}

// writeDensities writes the staging ingest and the export against raw COPY.
func writeDensities(b *strings.Builder, r Result, images string) {
	b.WriteString("\n### Staging ingest (loader → staging, flush included)\n\n")
	b.WriteString("The synthetic records are rendered in memory before the clock starts; the last column is the synthetic generator's own rate, for scale.\n\n")
	b.WriteString("| density | blocks | blocks/s | raw MB/s | stored MB/s | raw / stored | generator alone, blocks/s |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range r.Densities {
		in := d.Ingest
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", densityLabel(d.Name), fmtNum(float64(d.Blocks)),
			fmtNum(in.BlocksPerSec), fmtNum(in.RawMBPerSec), fmtNum(in.StoredMBPerSec), fmtNum(in.Ratio), fmtNum(in.SourceBlocksPerSec))
	}
	b.WriteString("\n### Export vs raw COPY (staging → PostgreSQL)\n\n")
	b.WriteString("The baseline COPYs the same rows, decoded before its clock starts, with pgx binary COPY into identical empty tables of a fresh database, in the same batches and transactions.")
	if r.Settings.Rounds > 1 {
		fmt.Fprintf(b, " Each side ran %d times, alternating which went first; the best run of each counts.", r.Settings.Rounds)
	}
	b.WriteString("\n\n")
	b.WriteString("| density | rows | rows/block | export blocks/s | export rows/s | baseline blocks/s | baseline rows/s | export / baseline |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range r.Densities {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | **%s** |\n", densityLabel(d.Name), fmtNum(float64(d.Export.Rows)), fmtNum(d.RowsPerBlock),
			fmtNum(d.Export.BlocksPerSec), fmtNum(d.Export.RowsPerSec), fmtNum(d.Baseline.BlocksPerSec), fmtNum(d.Baseline.RowsPerSec), fmtNum(d.Ratio))
	}
	if slices.ContainsFunc(r.Densities, func(d DensityResult) bool { return d.ExportCPU.Known && d.BaselineCPU.Known }) {
		b.WriteString("\nCPU per row, in µs (the best run of each): this process (blockhaul's export, or the baseline's COPY of rows decoded beforehand), the load's PostgreSQL backend, PostgreSQL's WAL writer, checkpointer and background writer; and the share of one core the backend used. These depend far less on other work on the machine than the rates do.\n\n")
		b.WriteString("| density | load | blockhaul µs/row | backend µs/row | PG writers µs/row | backend busy |\n|---|---|---:|---:|---:|---:|\n")
		for _, d := range r.Densities {
			for _, l := range []struct {
				name string
				run  CopyRun
				cpu  LoadCPU
			}{{"export", d.Export, d.ExportCPU}, {"baseline", d.Baseline, d.BaselineCPU}} {
				if !l.cpu.Known || l.run.Rows == 0 {
					continue
				}
				per := func(s float64) string { return fmtNum(1e6 * s / float64(l.run.Rows)) }
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %.0f%% |\n", d.Name, l.name, per(l.cpu.Blockhaul), per(l.cpu.Backends), per(l.cpu.Writers), 100*l.cpu.BackendBusy())
			}
		}
	}
	if images != "" {
		b.WriteString("\n")
		for _, d := range r.Densities {
			fmt.Fprintf(b, "![export and baseline throughput, %s](%sthroughput-%s.svg)\n", d.Name, images, d.Name)
		}
	}
}

// writeFetch writes the fetch against a local server.
func writeFetch(b *strings.Builder, f *FetchResult) {
	fmt.Fprintf(b, "\n### Fetch vs a local server (%s, %d workers, %d heights per request)\n\n", f.Chain, f.Workers, f.Span)
	b.WriteString("| client | blocks | blocks/s | MB/s received | requests |\n|---|---:|---:|---:|---:|\n")
	row := func(name string, x FetchRun) {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", name, fmtNum(float64(x.Blocks)), fmtNum(x.BlocksPerSec), fmtNum(x.MBPerSec), fmtNum(float64(x.Requests)))
	}
	row("minimal (net/http, read and discard)", f.Minimal)
	if f.Blockhaul != nil {
		row("blockhaul fetch (source → loader → staging)", *f.Blockhaul)
		if f.Client != nil {
			row("blockhaul RPC source alone (request, split, check; nothing staged)", *f.Client)
		}
		fmt.Fprintf(b, "\nblockhaul fetch / minimal client: **%s**", fmtNum(f.Ratio))
		if f.Client != nil {
			fmt.Fprintf(b, "; RPC source alone / minimal client: %s", fmtNum(f.ClientRatio))
		}
		b.WriteString("\n")
	} else {
		fmt.Fprintf(b, "| blockhaul | %s | | | |\n", f.Note)
	}
}

// writeHeadBackfill writes the head and a backfill, one process against two.
func writeHeadBackfill(b *strings.Builder, r Result, h *HeadBackfillResult) {
	fmt.Fprintf(b, "\n### The head and a backfill: one process vs two (CometBFT, %s blocks, %s rows)\n\n", fmtNum(float64(h.Blocks)), fmtNum(float64(h.Rows)))
	fmt.Fprintf(b, "The head stream exports [%s, %s], the backfill [1, %s], into one fresh database with its indexes in place: `follow --backfill-from 1` (one staging store) against `follow` and `run` at once (a staging directory each). Each way ran %d times, alternating; the fastest counts.\n\n",
		fmtNum(float64(h.HeadFrom)), fmtNum(float64(h.Blocks)), fmtNum(float64(h.HeadFrom-1)), r.Settings.Rounds)
	b.WriteString("| way | processes | seconds | CPU seconds | peak RSS (sum) |\n|---|---:|---:|---:|---:|\n")
	for _, w := range []struct {
		name string
		run  HeadBackfillRun
	}{{"one process (`follow --backfill-from`)", h.OneProcess}, {"two processes (`follow` + `run`)", h.TwoProcesses}} {
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |\n", w.name, w.run.Processes, fmtNum(w.run.Seconds), fmtNum(w.run.CPUSeconds), fmtBytes(uint64(w.run.PeakRSSBytes)))
	}
	fmt.Fprintf(b, "\nTwo processes / one process, time: **%s**\n", fmtNum(h.TwoOverOne))
}

// writeProcesses writes memory and scaling by range size.
func writeProcesses(b *strings.Builder, r Result, images string) {
	b.WriteString("\n### Memory and scaling (`blockhaul run`, CometBFT density, a process of its own)\n\n")
	fmt.Fprintf(b, "Each size is a prefix of one steady-density chain (`--synthetic-steady`: no quiet stretches or bursts, so every range has the same rows per block), run with the defaults into a fresh database: secondary indexes are deferred and built at the end, inside the time shown. Each size ran %d times, the sizes taking turns; the fastest run counts, with the highest peak RSS of its runs.\n\n", r.Settings.Rounds)
	b.WriteString("| blocks | rows | seconds | µs/block | µs/row | peak RSS |\n|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Processes {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", fmtNum(float64(p.Blocks)), fmtNum(float64(p.Rows)), fmtNum(p.Seconds), fmtNum(p.MicrosPerBlock), fmtNum(p.MicrosPerRow), fmtBytes(uint64(p.PeakRSSBytes)))
	}
	if images != "" {
		fmt.Fprintf(b, "\n![time per block by range size](%sscaling.svg)\n", images)
	}
}

// densityLabel names a density section (a family's name) with its
// workload's density.
func densityLabel(name string) string {
	if f, err := family.Lookup(name); err == nil && f.SyntheticDensity != "" {
		return name + " (" + f.SyntheticDensity + ")"
	}
	return name
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// fmtNum prints a figure with the precision a table needs: integers with
// thousands separators from 100 up, fewer decimals as values grow.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case math.IsInf(v, 0) || math.IsNaN(v) || a >= 1e15:
		return "∞"
	case a >= 100:
		return groupThousands(strconv.FormatFloat(math.Round(v), 'f', 0, 64))
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtBytes(n uint64) string {
	switch {
	case n == 0:
		return "–"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	default:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
}

// writeStreams renders the streams section: the rates, where the CPU went,
// what the backends waited on, and the projection.
func writeStreams(b *strings.Builder, r Result, st *StreamsResult) {
	fmt.Fprintf(b, "\n### Export streams (%s, %s blocks, %s rows, one staged range)\n\n", densityLabel(st.Chain), fmtNum(float64(st.Blocks)), fmtNum(float64(st.Rows)))
	b.WriteString("N streams split the range into N contiguous sub-ranges exported at once over N connections (`export.RunStreams`, as `blockhaul export --export-streams N`), each into a fresh database; the baseline COPYs the same rows, decoded beforehand, over one connection.")
	if r.Settings.Rounds > 1 {
		fmt.Fprintf(b, " Each load ran %d times, the order rotating; the best run of each counts, with its CPU.", r.Settings.Rounds)
	}
	b.WriteString(" CPU is in cores (CPU-seconds over the load's wall time): blockhaul's process, each stream's PostgreSQL backend, PostgreSQL's WAL writer, checkpointer and background writer, and everything else on the machine.\n\n")
	b.WriteString("| load | seconds | rows/s | × 1 stream | × baseline | blockhaul | each backend | PG writers | other | idle |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, run CopyRun, overOne, overBase string, c LoadCPU) {
		if !c.Known {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | – | – | – | – | – |\n", name, fmtNum(run.Seconds), fmtNum(run.RowsPerSec), overOne, overBase)
			return
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f%% |\n", name, fmtNum(run.Seconds), fmtNum(run.RowsPerSec), overOne, overBase,
			fmtNum(c.BlockhaulCores()), fmtNum(c.BackendBusy()), fmtNum(c.Writers/c.Seconds), fmtNum(c.Other/c.Seconds), 100*c.Idle())
	}
	row("raw COPY baseline", st.Baseline, "", "1.00", st.BaselineCPU)
	for _, x := range st.Runs {
		row(fmt.Sprintf("export, %d stream%s", x.Streams, plural(x.Streams)), x.Export, "**"+fmtNum(x.OverOne)+"**", fmtNum(x.OverBaseline), x.CPU)
	}
	b.WriteString("\nWhat the backends were doing (pg_stat_activity")
	if r.Settings.StateMillis > 0 {
		fmt.Fprintf(b, " every %d ms", r.Settings.StateMillis)
	}
	b.WriteString("; `CPU`: running, `Client:ClientRead`: waiting for blockhaul's next rows or statement):\n\n")
	states := func(name string, c LoadCPU) {
		if c.StateSamples == 0 {
			return
		}
		var parts []string
		for _, k := range c.TopStates() {
			if c.States[k] < 0.005 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*c.States[k]))
		}
		fmt.Fprintf(b, "- %s: %s\n", name, strings.Join(parts, ", "))
	}
	states("raw COPY baseline", st.BaselineCPU)
	for _, x := range st.Runs {
		states(fmt.Sprintf("%d stream%s", x.Streams, plural(x.Streams)), x.CPU)
	}
	if p := st.Projection; p != nil {
		fmt.Fprintf(b, "\nProjection for a %d-core database server running %d streams, blockhaul on machines of its own: at the one-stream rate measured here, %d × %s = **%s rows/s**; at the server's CPU, each backend on a core of its own, %d cores / %s µs of PostgreSQL CPU per row (backend %s, writers %s, measured with %d streams) = **%s rows/s** (%s× one stream here), which takes %s cores of blockhaul CPU (%s µs per row). The first is a floor where this machine is busy; the second ignores the server's disks and WAL bandwidth (the WAL waits above grow with the streams).\n",
			p.Cores, p.Streams, p.Streams, fmtNum(p.PerStreamRowsPerSec), fmtNum(p.StreamsRowsPerSec),
			p.Cores, fmtNum(p.BackendCPUPerRowMicros+p.WritersCPUPerRowMicros), fmtNum(p.BackendCPUPerRowMicros), fmtNum(p.WritersCPUPerRowMicros), p.FromStreams,
			fmtNum(p.CPURowsPerSec), fmtNum(p.CPUOverOneStream), fmtNum(p.BlockhaulCores), fmtNum(p.BlockhaulCPUPerRowMicros))
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// writeIntro writes a section's heading and its paragraph: intro, how many
// times each load ran (when more than once), then rest.
func writeIntro(b *strings.Builder, r Result, title, intro, rest string) {
	fmt.Fprintf(b, "\n### %s\n\n%s", title, intro)
	if r.Settings.Rounds > 1 {
		fmt.Fprintf(b, " Each load ran %d times, the order rotating; the fastest counts.", r.Settings.Rounds)
	}
	b.WriteString(rest + "\n\n")
}

// writeDecoding renders the decoding section: each family's export plain
// and decoded, each against raw COPY of its own rows.
func writeDecoding(b *strings.Builder, r Result) {
	writeIntro(b, r, "Decoding: export with and without, each against raw COPY of its rows",
		"One staged range per family, exported plain (Cosmos messages kept raw, no ABI) and decoded, each into a fresh database with its tables in place; each baseline decodes the range with the same decoder before its clock starts and COPYs those rows in the same batches.",
		" CPU per row is this process's: blockhaul's export, or the baseline's COPY of rows decoded beforehand.")
	b.WriteString("| chain | blocks | load | rows | export rows/s | COPY rows/s | export / COPY | blockhaul µs/row, export | µs/row, COPY |\n|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range r.Decoding {
		for i, l := range []DecodingLoad{d.Plain, d.Decoded} {
			chain, blocks := "", ""
			if i == 0 {
				chain, blocks = d.Chain, groupThousands(strconv.FormatUint(d.Blocks, 10))
			}
			us := func(v float64) string {
				if v == 0 {
					return "–"
				}
				return fmtNum(v)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | **%s** | %s | %s |\n", chain, blocks, l.Name, fmtNum(float64(l.Export.Rows)),
				fmtNum(l.Export.RowsPerSec), fmtNum(l.Baseline.RowsPerSec), fmtNum(l.Ratio), us(l.BlockhaulMicrosPerRow(true)), us(l.BlockhaulMicrosPerRow(false)))
		}
	}
	b.WriteString("\nWhat decoding fills, counted in the first batch of each range:\n\n")
	for _, d := range r.Decoding {
		var parts []string
		for _, f := range d.Filled {
			if f.Column == "" {
				parts = append(parts, fmt.Sprintf("%s %s rows", f.Table, fmtNum(float64(f.Values))))
			} else {
				parts = append(parts, fmt.Sprintf("%s.%s %s of %s rows", f.Table, f.Column, fmtNum(float64(f.Values)), fmtNum(float64(f.Rows))))
			}
		}
		if len(parts) == 0 {
			parts = []string{"nothing"}
		}
		fmt.Fprintf(b, "- %s, %s: %s\n", d.Chain, d.Decoding, strings.Join(parts, ", "))
	}
}

// limitBuildMemory says the maintenance_work_mem of export's deferred
// builds in the limit section (Config.IndexMemoryMiB: -1 export's default)
// against the restore's, which keeps the server's.
func limitBuildMemory(mib int64) string {
	switch {
	case mib < 0:
		return fmt.Sprintf("Export's builds ran with maintenance_work_mem %d MiB (--index-memory, export's default), the limit's with the server's.", pipeline.DefaultIndexMemoryMiB)
	case mib == 0:
		return "Export's builds ran with the server's maintenance_work_mem, as the limit's did."
	}
	return fmt.Sprintf("Export's builds ran with maintenance_work_mem %d MiB (--index-memory), the limit's with the server's.", mib)
}

// exportWorkers says how many deferred builds the limit section's
// one-stream exports ran at once, and why.
func exportWorkers(limits []LimitResult) string {
	var says, chains []string
	for _, l := range limits {
		if w := l.Export.IndexWorkers; w > 0 {
			says = append(says, fmt.Sprintf("%d at once (%s)", w, l.Export.IndexWorkersWhy))
			chains = append(chains, l.Chain)
		}
	}
	switch {
	case len(says) == 0:
		return "export's run at once, up to its index workers"
	case len(slices.Compact(slices.Clone(says))) == 1:
		return "export's built " + says[0]
	}
	for i := range says {
		says[i] = chains[i] + "'s " + says[i]
	}
	return "export's built " + strings.Join(says, ", ")
}

// writeLimits renders the limit section: the whole export against
// PostgreSQL's restore of the same end state, phase by phase, and the
// slowest builds of each.
func writeLimits(b *strings.Builder, r Result) {
	writeIntro(b, r, "Whole export vs PostgreSQL's restore, like for like",
		"Export is `blockhaul export` in this process (secondary indexes deferred, the fill, the deferred builds, ANALYZE of the tables filled) with 1 and 2 streams, each into a fresh database. The limit is the same end state the way PostgreSQL restores it: the export's rows dumped with binary COPY (untimed), the tables recreated as pg_dump's pre-data section has them (no key, no index), every file COPYed back in one transaction, the post-data section (primary keys, then every secondary index) built on one connection with the server's settings, as pg_restore does, and ANALYZE of every table.",
		" Seconds: whole (fill + indexes + ANALYZE). Export's fill runs without primary keys (a fresh database: they are deferred with the secondary indexes and built after the fill, the GIN and GiST indexes first, then the keys, then the rest), as the limit's COPY does; its index phase is the rest of its time, and holds the ANALYZEs it ran beside the builds (each table's once its indexes were built; their time in brackets); its ANALYZE column is what ran after the builds. "+limitBuildMemory(r.Settings.IndexMemoryMiB))
	b.WriteString("| chain | blocks | rows | load | seconds | fill | indexes | ANALYZE |\n|---|---:|---:|---|---:|---:|---:|---:|\n")
	for _, l := range r.Limits {
		for i, x := range []struct {
			name string
			run  PhaseRun
		}{{"export, 1 stream", l.Export}, {"export, 2 streams", l.Export2}, {"limit (restore)", l.Limit}} {
			chain, blocks, rows := "", "", ""
			if i == 0 {
				chain, blocks, rows = l.Chain, fmtNum(float64(l.Blocks)), fmtNum(float64(l.Rows))
			}
			an := fmtNum(x.run.Analyze)
			if x.run.AnalyzeBeside > 0 {
				an += " (+" + fmtNum(x.run.AnalyzeBeside) + " beside the builds)"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", chain, blocks, rows, x.name, fmtNum(x.run.Seconds), fmtNum(x.run.Fill), fmtNum(x.run.Indexes), an)
		}
	}
	b.WriteString("\n| chain | export / limit, like for like | fill only | 2 streams / 1 stream |\n|---|---:|---:|---:|\n")
	for _, l := range r.Limits {
		fmt.Fprintf(b, "| %s | **%s** | %s | **%s** |\n", l.Chain, fmtNum(l.Ratio), fmtNum(l.FillRatio), fmtNum(l.TwoOverOne))
	}
	b.WriteString("\nThe slowest builds, in seconds (" + exportWorkers(r.Limits) + "; the limit's one after another):\n\n")
	for _, l := range r.Limits {
		for _, x := range []struct {
			name string
			run  PhaseRun
		}{{"export, 1 stream", l.Export}, {"limit", l.Limit}} {
			var parts []string
			for i, bd := range sortedBuilds(x.run.Builds) {
				if i == 4 {
					break
				}
				parts = append(parts, fmt.Sprintf("%s %s", bd.Name, fmtNum(bd.Seconds)))
			}
			fmt.Fprintf(b, "- %s, %s: %s\n", l.Chain, x.name, strings.Join(parts, ", "))
		}
	}
}
