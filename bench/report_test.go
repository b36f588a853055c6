package bench

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNiceTicks(t *testing.T) {
	tests := []struct {
		top   float64
		ticks []float64
	}{
		{1, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{9.5, []float64{0, 2, 4, 6, 8, 10}},
		{100, []float64{0, 20, 40, 60, 80, 100}},
		{101, []float64{0, 50, 100, 150}},
		{3470, []float64{0, 1000, 2000, 3000, 4000}},
		{0, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{math.Inf(1), []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
	}
	for _, tc := range tests {
		ticks, end := niceTicks(tc.top)
		if !reflect.DeepEqual(ticks, tc.ticks) || end != ticks[len(ticks)-1] {
			t.Errorf("niceTicks(%v) = %v, %v; want %v", tc.top, ticks, end, tc.ticks)
		}
		if tc.top > 0 && !math.IsInf(tc.top, 0) && end < tc.top {
			t.Errorf("niceTicks(%v) ends at %v, below the data", tc.top, end)
		}
	}
}

func TestBatchRatesAreSteps(t *testing.T) {
	commits := []Sample{{Seconds: 0.5, Rows: 1000}, {Seconds: 1.5, Rows: 4000}, {Seconds: 1.5, Rows: 4000}, {Seconds: 2, Rows: 5000}}
	x, y := batchRates(commits)
	wantX := []float64{0, 0.5, 0.5, 1.5, 1.5, 2}
	wantY := []float64{2000, 2000, 3000, 3000, 2000, 2000}
	if !reflect.DeepEqual(x, wantX) || !reflect.DeepEqual(y, wantY) {
		t.Fatalf("batchRates = %v %v, want %v %v", x, y, wantX, wantY)
	}
	if x, y := batchRates(nil); x != nil || y != nil {
		t.Errorf("no commits give no line, got %v %v", x, y)
	}
}

func TestFmtNum(t *testing.T) {
	tests := map[float64]string{
		0: "0.00", 0.904: "0.90", 9.999: "10.00", 12.34: "12.3", 99.94: "99.9",
		100: "100", 3000: "3,000", 1234567.8: "1,234,568", -4321: "-4,321",
		math.Inf(1): "∞", math.MaxFloat64: "∞",
	}
	for v, want := range tests {
		if got := fmtNum(v); got != want {
			t.Errorf("fmtNum(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestCPUModelAndMemTotal(t *testing.T) {
	cpu := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R)  Xeon(R) Processor @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: other\n"
	if got := cpuModel(cpu); got != "Intel(R) Xeon(R) Processor @ 2.20GHz" {
		t.Errorf("cpuModel = %q", got)
	}
	if got := cpuModel("processor\t: 0\nHardware\t: BCM2835\n"); got != "BCM2835" {
		t.Errorf("cpuModel without model name = %q", got)
	}
	if got := cpuModel(""); got != "" {
		t.Errorf("cpuModel of nothing = %q", got)
	}
	mem := "MemFree:          100 kB\nMemTotal:       24684136 kB\n"
	if got := memTotal(mem); got != 24684136*1024 {
		t.Errorf("memTotal = %d", got)
	}
	if got := memTotal("MemTotal: x kB\n"); got != 0 {
		t.Errorf("memTotal of garbage = %d", got)
	}
}

func sampleResult() Result {
	samples := []Sample{{0, 0, 0}, {0.25, 100, 9000}, {0.5, 300, 27000}, {0.6, 400, 36000}}
	commits := []Sample{{0.2, 100, 9000}, {0.45, 300, 27000}, {0.6, 400, 36000}}
	return Result{
		Date:    time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Machine: Machine{Host: "box/1", CPUs: 2, CPUModel: "Test CPU", MemoryBytes: 8 << 30, GoVersion: "go1.26", PostgreSQL: "15.20", OS: "linux"},
		Densities: []DensityResult{{
			Name: SectionCometBFT, Blocks: 400, RowsPerBlock: 90,
			Ingest:   IngestResult{BlocksPerSec: 20000, Ratio: 4.2},
			Export:   CopyRun{Blocks: 400, Rows: 36000, Seconds: 0.6, BlocksPerSec: 3100, RowsPerSec: 60000, Samples: samples, Commits: commits},
			Baseline: CopyRun{Blocks: 400, Rows: 36000, Seconds: 0.5, BlocksPerSec: 3300, RowsPerSec: 72000, Samples: samples, Commits: commits},
			Ratio:    0.95,
		}},
		Fetch:     &FetchResult{Chain: "cometbft", Workers: 8, Span: 16, Minimal: FetchRun{Blocks: 100, BlocksPerSec: 10000}, Note: "not available: no source"},
		Processes: []ProcessRun{{Blocks: 10000, Rows: 700000, MicrosPerBlock: 400, MicrosPerRow: 5.7, PeakRSSBytes: 200 << 20}, {Blocks: 100000, Rows: 8000000, MicrosPerBlock: 420, MicrosPerRow: 5.25, PeakRSSBytes: 230 << 20}},
	}
}

func TestEvaluateTargets(t *testing.T) {
	r := sampleResult()
	got := map[string]Target{}
	for _, tg := range evaluateTargets(&r) {
		got[tg.Name] = tg
	}
	check := func(name string, measured, pass bool) {
		t.Helper()
		tg, ok := got[name]
		if !ok {
			t.Fatalf("no target %q in %v", name, got)
		}
		if tg.Measured != measured || tg.Pass != pass {
			t.Errorf("%s: %+v, want measured=%v pass=%v", name, tg, measured, pass)
		}
	}
	check("export / COPY baseline, cometbft", true, true)
	check("export / COPY baseline, evm", false, false)
	check("export rate, cometbft", true, true)
	check("staging ingest / export, cometbft", true, true)
	check("fetch / minimal client", false, false)
	check("peak RSS, every run", true, true)
	check("peak RSS change, 10000 → 100000 blocks", true, false) // 15% growth
	check("time per block spread across sizes", true, true)      // 5%

	r.Processes[1].PeakRSSBytes = 600 << 20
	r.Processes[1].MicrosPerBlock = 480
	r.Densities[0].Ratio = 0.89
	got = map[string]Target{}
	for _, tg := range evaluateTargets(&r) {
		got[tg.Name] = tg
	}
	check("export / COPY baseline, cometbft", true, false)
	check("peak RSS, every run", true, false)
	check("time per block spread across sizes", true, false)
	check("export, 2 streams / 1 stream", false, false)

	for _, tc := range []struct {
		ratio float64
		pass  bool
	}{{0.85, true}, {0.79, false}} {
		r.Decoding = []DecodingResult{{Chain: "evm", Plain: DecodingLoad{Ratio: 0.5}, Decoded: DecodingLoad{Ratio: tc.ratio}}}
		got = map[string]Target{}
		for _, tg := range evaluateTargets(&r) {
			got[tg.Name] = tg
		}
		check("export / COPY baseline, decoded, evm", true, tc.pass)
		check("export / COPY baseline, decoded, cometbft", false, false)
	}

	for _, tc := range []struct {
		over float64
		pass bool
	}{{1.31, true}, {1.19, false}} {
		r.Streams = &StreamsResult{Chain: "cometbft", Runs: []StreamsRun{{Streams: 1, OverOne: 1}, {Streams: 2, OverOne: tc.over}}}
		got = map[string]Target{}
		for _, tg := range evaluateTargets(&r) {
			got[tg.Name] = tg
		}
		check("export, 2 streams / 1 stream, cometbft", true, tc.pass)
		if v := got["export, 2 streams / 1 stream, cometbft"].Value; v != tc.over {
			t.Errorf("2 streams / 1 stream = %v, want %v", v, tc.over)
		}
	}
}

func TestSVGIsWellFormed(t *testing.T) {
	r := sampleResult()
	for name, p := range map[string]plot{"throughput": throughputPlot(r.Densities[0]), "scaling": scalingPlot(r.Processes)} {
		svg := p.svg()
		d := xml.NewDecoder(strings.NewReader(string(svg)))
		var lines int
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: not well-formed XML: %v\n%s", name, err, svg)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
				lines++
			}
		}
		if lines != len(p.series) {
			t.Errorf("%s: %d polylines for %d series", name, lines, len(p.series))
		}
	}
	// Text from results is escaped.
	svg := string(plot{title: `a<b & "c"`}.svg())
	if !strings.Contains(svg, "a&lt;b &amp; &#34;c&#34;") {
		t.Errorf("title not escaped: %s", svg)
	}
}

func TestMarkdownAndFileNames(t *testing.T) {
	r := sampleResult()
	r.Targets = evaluateTargets(&r)
	md := Markdown(r, "x-")
	for _, want := range []string{
		"Machine `box/1`: 2 × Test CPU, 8.0 GiB RAM",
		"| cometbft (≈4.5 tx/block) | 36,000 | 90.0 | 3,100 | 60,000 | 3,300 | 72,000 | **0.95** |",
		"| blockhaul | not available: no source | | | |",
		"| 100,000 | 8,000,000 | 0.00 | 420 | 5.25 | 230 MiB |",
		"![export and baseline throughput, cometbft](x-throughput-cometbft.svg)",
		"(x-scaling.svg)",
		"| export / COPY baseline, evm | – | ≥ 0.90 | not measured |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "busy") {
		t.Error("a quiet machine reported busy")
	}
	r.CPU = CPUUsage{Known: true, Capacity: 200, Bench: 120, Postgres: 50, Other: 30}
	md = Markdown(r, "")
	if !strings.Contains(md, "other processes 30.0 s of 200 CPU-seconds (15%)") || !strings.Contains(md, "**The machine was busy**") {
		t.Errorf("a busy machine not reported:\n%s", md)
	}
	if got := filesPrefix(r); got != "2026-11-29-box_1" {
		t.Errorf("filesPrefix = %q", got)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("result does not marshal: %v", err)
	}
}

func TestWithDatabase(t *testing.T) {
	tests := map[string]string{
		"postgres://u:p@h:5432/postgres?sslmode=disable": "postgres://u:p@h:5432/x?sslmode=disable",
		"postgresql://h/db": "postgresql://h/x",
		"host=h user=u":     "host=h user=u dbname=x",
	}
	for in, want := range tests {
		if got := withDatabase(in, "x"); got != want {
			t.Errorf("withDatabase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPeakRSS(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		kernel, spawner, polled, want int64
	}{
		{300 * mib, 40 * mib, 290 * mib, 300 * mib},  // the kernel's figure is the child's own
		{300 * mib, 40 * mib, 301 * mib, 301 * mib},  // and lags the last pages touched
		{900 * mib, 900 * mib, 250 * mib, 250 * mib}, // the spawner's peak masks the child's
		{900 * mib, 1000 * mib, 250 * mib, 250 * mib},
		{0, 0, 0, 0}, // nothing known
	}
	for _, tc := range tests {
		if got := peakRSS(tc.kernel, tc.spawner, tc.polled); got != tc.want {
			t.Errorf("peakRSS(%d, %d, %d) = %d, want %d", tc.kernel, tc.spawner, tc.polled, got, tc.want)
		}
	}
	if hwm("self") < mib {
		t.Errorf("VmHWM of this process = %d", hwm("self"))
	}
	if hwm("no-such-process") != 0 {
		t.Error("VmHWM of a missing process is not 0")
	}
}

func TestCPUUsage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := cpuSnapshot{at: t0, machine: 500, self: 10, postgres: 40, ok: true}
	b := cpuSnapshot{at: t0.Add(100 * time.Second), machine: 690, self: 110, postgres: 110, ok: true}
	u := cpuUsage(a, b, 2)
	want := CPUUsage{Known: true, Capacity: 200, Bench: 100, Postgres: 70, Other: 20}
	if u != want || u.Busy() || math.Abs(u.OtherShare()-0.1) > 1e-9 {
		t.Errorf("cpuUsage = %+v (share %v), want %+v", u, u.OtherShare(), want)
	}
	b.machine = 700
	if u := cpuUsage(a, b, 2); !u.Busy() {
		t.Errorf("15%% other work not busy: %+v", u)
	}
	if u := cpuUsage(cpuSnapshot{}, b, 2); u.Known || u.Busy() {
		t.Errorf("unknown usage: %+v", u)
	}
}

func TestWriteDatedFilesLeavesLatestAlone(t *testing.T) {
	dir := t.TempDir()
	r := sampleResult()
	r.Targets = evaluateTargets(&r)
	if _, err := WriteFiles(dir, r); err != nil {
		t.Fatal(err)
	}
	latest, err := os.ReadFile(filepath.Join(dir, "latest.md"))
	if err != nil {
		t.Fatal(err)
	}
	part := r
	part.Date = r.Date.AddDate(0, 0, 1)
	part.Processes = nil
	paths, err := WriteDatedFiles(dir, part)
	if err != nil {
		t.Fatal(err)
	}
	prefix := filesPrefix(part)
	for _, p := range paths {
		if !strings.HasPrefix(filepath.Base(p), prefix) {
			t.Errorf("WriteDatedFiles wrote %s", p)
		}
	}
	if len(paths) < 3 {
		t.Errorf("WriteDatedFiles wrote %v", paths)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "latest.md")); string(now) != string(latest) {
		t.Error("WriteDatedFiles changed latest.md")
	}
	if _, err := os.Stat(filepath.Join(dir, "latest-scaling.svg")); err != nil {
		t.Errorf("WriteDatedFiles removed the latest plots: %v", err)
	}
}

// The limit section says what export's builds were given against the
// restore's server settings (export's default is not the server's since
// --index-memory 16 became it), and the order they ran in.
func TestLimitSectionSaysItsBuilds(t *testing.T) {
	r := sampleResult()
	r.Limits = []LimitResult{{Chain: "cometbft", Blocks: 200, Rows: 9000}}
	for mib, want := range map[int64]string{
		-1:  "Export's builds ran with maintenance_work_mem 16 MiB (--index-memory, export's default), the limit's with the server's.",
		0:   "Export's builds ran with the server's maintenance_work_mem, as the limit's did.",
		256: "Export's builds ran with maintenance_work_mem 256 MiB (--index-memory), the limit's with the server's.",
	} {
		r.Settings.IndexMemoryMiB = mib
		md := Markdown(r, "")
		if !strings.Contains(md, want) {
			t.Errorf("index memory %d: the limit section lacks %q:\n%s", mib, want, md)
		}
		if !strings.Contains(md, "built after the fill, the GIN and GiST indexes first, then the keys") {
			t.Errorf("the limit section does not say export's build order:\n%s", md)
		}
	}
}

// The limit section says how many builds export ran at once and why, as
// its export resolved --index-workers; once when the chains agree.
func TestLimitSectionSaysItsIndexWorkers(t *testing.T) {
	auto := "auto: PostgreSQL on this machine, one build a CPU of its 2, at most 4"
	for _, c := range []struct {
		workers []int
		whys    []string
		want    string
	}{
		{[]int{2, 2}, []string{auto, auto}, "export's built 2 at once (" + auto + "); the limit's one after another"},
		{[]int{2, 3}, []string{auto, "--index-workers"}, "export's built cometbft's 2 at once (" + auto + "), evm's 3 at once (--index-workers); the limit's"},
		{[]int{0, 0}, []string{"", ""}, "export's run at once, up to its index workers; the limit's"},
	} {
		r := sampleResult()
		r.Limits = nil
		for i, ch := range []string{"cometbft", "evm"} {
			l := LimitResult{Chain: ch, Blocks: 200, Rows: 9000}
			l.Export.IndexWorkers, l.Export.IndexWorkersWhy = c.workers[i], c.whys[i]
			r.Limits = append(r.Limits, l)
		}
		if md := Markdown(r, ""); !strings.Contains(md, c.want) {
			t.Errorf("workers %v: the limit section lacks %q:\n%s", c.workers, c.want, md)
		}
	}
}
