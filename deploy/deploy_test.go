// Package deploy_test checks the Kubernetes manifests of deploy/ against
// the Kubernetes API types (strict decoding: an unknown or misspelt field
// fails) and against blockhaul itself: the exit statuses of the
// podFailurePolicy, the flags in the containers' args, the --http port the
// probes and scrape annotations use, the Secret, the volumes, and the shard
// slices, the snapshots. It is its own package so the Kubernetes modules touch only this
// test's build.
package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/testbin"
	"github.com/blockhaul/blockhaul/pipeline"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// manifests is every object kustomize builds from deploy/ (as kubectl
// apply -k does: the kustomization's resources, labels, images and
// replacements applied), decoded into its API type.
type manifests struct {
	jobs        map[string]*batchv1.Job
	deployments map[string]*appsv1.Deployment
	secrets     map[string]*corev1.Secret
	configMaps  map[string]*corev1.ConfigMap
	claims      map[string]*corev1.PersistentVolumeClaim
	// claimDirs holds each claim's directory while a test runs its pods:
	// unlike an emptyDir, it outlives the pod.
	claimDirs map[string]string
}

func load(t *testing.T) *manifests {
	t.Helper()
	return build(t, ".")
}

// build runs kustomize (its Go library, kubectl's own) on the
// kustomization in dir and decodes each object it prints strictly: an
// unknown or misspelt field fails.
func build(t *testing.T, dir string) *manifests {
	t.Helper()
	m := &manifests{jobs: map[string]*batchv1.Job{}, deployments: map[string]*appsv1.Deployment{},
		secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{}, claims: map[string]*corev1.PersistentVolumeClaim{}}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	for i, r := range rm.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var obj interface{ GetName() string }
		switch r.GetApiVersion() + " " + r.GetKind() {
		case "batch/v1 Job":
			obj = &batchv1.Job{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 PersistentVolumeClaim":
			obj = &corev1.PersistentVolumeClaim{}
		default:
			t.Fatalf("object %d: unexpected %s %s", i, r.GetApiVersion(), r.GetKind())
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("object %d (%s %s): %v", i, r.GetKind(), r.GetName(), err)
		}
		name := obj.GetName()
		if name == "" {
			t.Fatalf("object %d (%s) has no name", i, r.GetKind())
		}
		switch o := obj.(type) {
		case *batchv1.Job:
			m.jobs[name] = o
		case *appsv1.Deployment:
			m.deployments[name] = o
		case *corev1.Secret:
			m.secrets[name] = o
		case *corev1.ConfigMap:
			m.configMaps[name] = o
		case *corev1.PersistentVolumeClaim:
			m.claims[name] = o
		}
	}
	// The Jobs carry range.yaml's RANGE in their names; the tests know
	// them by the name before it.
	if cm := m.configMaps["blockhaul-range"]; cm != nil && cm.Data["RANGE"] != "" {
		for name, j := range m.jobs {
			if base, ok := strings.CutSuffix(name, "-"+cm.Data["RANGE"]); ok {
				delete(m.jobs, name)
				m.jobs[base] = j
			}
		}
	}
	return m
}

// TestNamesCarryTheRange builds the manifests with range.yaml's RANGE
// changed: the Jobs' names and the fetch staging claim's carry it, and
// nothing else's changes, so a second range's Jobs stand beside the
// first's.
func TestNamesCarryTheRange(t *testing.T) {
	names := func(dir string) map[string]string {
		m := build(t, dir)
		rng := m.configMaps["blockhaul-range"].Data["RANGE"]
		got := map[string]string{}
		for base, j := range m.jobs {
			got["Job "+base] = j.Name
			if j.Name != base+"-"+rng || len(j.Name) > 63 {
				t.Errorf("Job %s: named %q, want %s-%s of at most 63 characters", base, j.Name, base, rng)
			}
			for _, v := range j.Spec.Template.Spec.Volumes {
				if c := v.PersistentVolumeClaim; c != nil && m.claims[c.ClaimName] == nil {
					t.Errorf("Job %s: volume %s claims %s, which the build does not hold", j.Name, v.Name, c.ClaimName)
				}
			}
		}
		for name := range m.claims {
			got["PersistentVolumeClaim "+name] = name
		}
		for name := range m.deployments {
			got["Deployment "+name] = name
		}
		return got
	}
	here := names(".")
	if _, ok := here["PersistentVolumeClaim blockhaul-fetch-staging-"+load(t).configMaps["blockhaul-range"].Data["RANGE"]]; !ok {
		t.Errorf("no fetch staging claim named with the range: %v", here)
	}

	dir := t.TempDir()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/*.yaml: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if f == "range.yaml" {
			re := regexp.MustCompile(`(?m)^  RANGE: .*$`)
			if !re.Match(b) {
				t.Fatal("range.yaml has no RANGE")
			}
			b = re.ReplaceAll(b, []byte("  RANGE: evm-5-9"))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	there := names(dir)
	t.Logf("names: %v; with RANGE evm-5-9: %v", here, there)
	for what, name := range here {
		other, ok := there[what]
		if !ok && strings.HasPrefix(what, "PersistentVolumeClaim blockhaul-fetch-staging-") {
			other, ok = there["PersistentVolumeClaim blockhaul-fetch-staging-evm-5-9"]
		}
		if !ok {
			t.Errorf("%s (%s) is not in the build with RANGE evm-5-9", what, name)
			continue
		}
		renamed := strings.HasPrefix(what, "Job ") || strings.HasPrefix(what, "PersistentVolumeClaim blockhaul-fetch-staging-")
		if renamed != (other != name) {
			t.Errorf("%s: %q with one RANGE, %q with another; want the Jobs and the fetch staging claim alone renamed", what, name, other)
		}
		if renamed && !strings.HasSuffix(other, "-evm-5-9") {
			t.Errorf("%s: %q with RANGE evm-5-9", what, other)
		}
	}
}

func (m *manifests) job(t *testing.T, name string) *batchv1.Job {
	t.Helper()
	j, ok := m.jobs[name]
	if !ok {
		t.Fatalf("no Job %s in deploy/", name)
	}
	return j
}

// pods is every pod template of the manifests, by the workload's name.
func (m *manifests) pods() map[string]*corev1.PodTemplateSpec {
	p := map[string]*corev1.PodTemplateSpec{}
	for n, j := range m.jobs {
		p["Job "+n] = &j.Spec.Template
	}
	for n, d := range m.deployments {
		p["Deployment "+n] = &d.Spec.Template
	}
	return p
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	for _, name := range []string{"blockhaul-fetch", "blockhaul-export"} {
		m.job(t, name)
	}
	if _, ok := m.deployments["blockhaul-follow"]; !ok {
		t.Fatal("no Deployment blockhaul-follow")
	}
	// Strict decoding is what catches a misspelt field: check it does.
	bad := []byte("apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  podFailurePolicy:\n    rules:\n      - action: FailJob\n        onExitCode: {operator: In, values: [2]}\n")
	if err := yaml.UnmarshalStrict(bad, &batchv1.Job{}); err == nil || !strings.Contains(err.Error(), "onExitCode") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
}

// TestKustomizationListsEveryManifest: kubectl apply -k deploy/ applies
// every file the tests check, and only those.
func TestKustomizationListsEveryManifest(t *testing.T) {
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type image struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	}
	var k struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Labels     []struct {
			Pairs map[string]string `json:"pairs"`
		} `json:"labels"`
		Resources    []string `json:"resources"`
		Images       []image  `json:"images"`
		Replacements []any    `json:"replacements"`
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatal(err)
	}
	if k.Kind != "Kustomization" {
		t.Fatalf("kind %q", k.Kind)
	}
	files, _ := filepath.Glob("*.yaml")
	files = slices.DeleteFunc(files, func(f string) bool { return f == "kustomization.yaml" })
	res := slices.Clone(k.Resources)
	slices.Sort(res)
	if !slices.Equal(res, files) {
		t.Fatalf("kustomization resources %v, files %v", res, files)
	}
	// Every container runs range.yaml's IMAGE with its IMAGE_PULL_POLICY
	// (before: blockhaul:dev, no registry, no pull policy, set in the
	// kustomization apart from the range).
	m := load(t)
	cm := m.configMaps["blockhaul-range"]
	if cm == nil {
		t.Fatal("no ConfigMap blockhaul-range")
	}
	img, policy := cm.Data["IMAGE"], corev1.PullPolicy(cm.Data["IMAGE_PULL_POLICY"])
	if host, _, ok := strings.Cut(img, "/"); !ok || !strings.ContainsAny(host, ".:") || !strings.Contains(img, ":") {
		t.Errorf("IMAGE %q: want a registry host, a name and a tag", img)
	}
	if !slices.Contains([]corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}, policy) {
		t.Errorf("IMAGE_PULL_POLICY %q is no pull policy", policy)
	}
	n := 0
	for where, p := range m.pods() {
		for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
			n++
			if c.Image != img || c.ImagePullPolicy != policy {
				t.Errorf("%s container %s: image %q pulled %q, want range.yaml's %q, %q", where, c.Name, c.Image, c.ImagePullPolicy, img, policy)
			}
		}
	}
	if n < 5 {
		t.Errorf("%d containers", n)
	}
}

// TestPodFailurePolicy: a Job fails at once on the statuses a retry cannot
// fix (bad configuration, wrong data), retries an interrupted pod without
// counting it, and counts a runtime failure and a disrupted pod against
// backoffLimit.
func TestPodFailurePolicy(t *testing.T) {
	m := load(t)
	if len(m.jobs) == 0 {
		t.Fatal("no Jobs")
	}
	want := map[batchv1.PodFailurePolicyAction][]int32{
		batchv1.PodFailurePolicyActionFailJob: {pipeline.ExitConfig, pipeline.ExitData},
		batchv1.PodFailurePolicyActionIgnore:  {pipeline.ExitInterrupted},
		batchv1.PodFailurePolicyActionCount:   {pipeline.ExitFailed},
	}
	for name, j := range m.jobs {
		pfp := j.Spec.PodFailurePolicy
		if pfp == nil {
			t.Errorf("Job %s: no podFailurePolicy", name)
			continue
		}
		if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("Job %s: restartPolicy %q; a podFailurePolicy needs Never", name, j.Spec.Template.Spec.RestartPolicy)
		}
		if j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit < 1 {
			t.Errorf("Job %s: backoffLimit %v, want at least 1 so status 1 is retried", name, j.Spec.BackoffLimit)
		}
		got := map[batchv1.PodFailurePolicyAction][]int32{}
		disruption := false
		for _, r := range pfp.Rules {
			if r.OnExitCodes != nil {
				if r.OnExitCodes.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn {
					t.Errorf("Job %s: rule %s uses %s, want In", name, r.Action, r.OnExitCodes.Operator)
				}
				if r.OnExitCodes.ContainerName != nil {
					t.Errorf("Job %s: rule %s is limited to container %s; the merges' statuses matter too", name, r.Action, *r.OnExitCodes.ContainerName)
				}
				got[r.Action] = append(got[r.Action], r.OnExitCodes.Values...)
			}
			for _, c := range r.OnPodConditions {
				if c.Type == corev1.DisruptionTarget && r.Action == batchv1.PodFailurePolicyActionCount {
					disruption = true
				}
			}
		}
		for a, codes := range want {
			g := slices.Clone(got[a])
			slices.Sort(g)
			if !slices.Equal(g, codes) {
				t.Errorf("Job %s: %s on exit codes %v, want %v", name, a, g, codes)
			}
		}
		// Counted, not ignored: a pod evicted for what it does (its
		// emptyDir or memory limit) would be retried forever.
		if !disruption {
			t.Errorf("Job %s: a disrupted pod (eviction, preemption) is not counted against backoffLimit", name)
		}
	}
}

// cliFlags are the flags the built blockhaul binary lists for cmd.
var (
	binary   string
	cliFlags = map[string]map[string]bool{}
)

func TestMain(m *testing.M) { testbin.Main(m, &binary) }

// flagsOf runs blockhaul CMD --help and returns the flag names it lists.
func flagsOf(t *testing.T, cmd string) map[string]bool {
	t.Helper()
	if f, ok := cliFlags[cmd]; ok {
		return f
	}
	out, err := exec.Command(binary, cmd, "--help").Output()
	if err != nil {
		t.Fatalf("blockhaul %s --help: %v", cmd, err)
	}
	f := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  --([a-z0-9-]+) `).FindAllSubmatch(out, -1) {
		f[string(m[1])] = true
	}
	// Every command takes --staging: a help without it was not parsed.
	// (--http is listed only by the commands that serve it; restore does
	// not.)
	if !f["staging"] {
		t.Fatalf("blockhaul %s --help lists no --staging: %s", cmd, out)
	}
	cliFlags[cmd] = f
	return f
}

// argsOf parses a container's args: the command, then --flag=value only
// (a value in a separate word could be read as a stray argument), but for
// the one DEST or SRC word of snapshot and restore.
func argsOf(t *testing.T, where string, c corev1.Container) (cmd string, flags map[string]string) {
	cmd, flags, _ = argsAndWord(t, where, c)
	return cmd, flags
}

func argsAndWord(t *testing.T, where string, c corev1.Container) (cmd string, flags map[string]string, word string) {
	t.Helper()
	if len(c.Command) > 0 {
		t.Errorf("%s container %s: command %v; the image's entrypoint is blockhaul, give args only", where, c.Name, c.Command)
	}
	if len(c.Args) == 0 || !slices.Contains(pipeline.Commands, c.Args[0]) {
		t.Fatalf("%s container %s: args %v do not start with a blockhaul command (%v)", where, c.Name, c.Args, pipeline.Commands)
	}
	known := flagsOf(t, c.Args[0])
	flags = map[string]string{}
	rest := c.Args[1:]
	if c.Args[0] == pipeline.CmdSnapshot || c.Args[0] == pipeline.CmdRestore {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			t.Fatalf("%s container %s: %s without its DEST or SRC word", where, c.Name, c.Args[0])
		}
		word, rest = rest[0], rest[1:]
	}
	for _, a := range rest {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Errorf("%s container %s: %q is not --flag=value", where, c.Name, a)
			continue
		}
		if !known[name] {
			t.Errorf("%s container %s: --%s is no flag of blockhaul %s", where, c.Name, name, c.Args[0])
		}
		if _, dup := flags[name]; dup {
			t.Errorf("%s container %s: --%s given twice", where, c.Name, name)
		}
		flags[name] = value
	}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "BLOCKHAUL_") {
			continue
		}
		ok := false
		for f := range known {
			ok = ok || pipeline.EnvName(f) == e.Name
		}
		if !ok {
			t.Errorf("%s container %s: %s sets no flag of blockhaul %s", where, c.Name, e.Name, c.Args[0])
		}
	}
	return c.Args[0], flags, word
}

func TestContainerArgsAreBlockhaulFlags(t *testing.T) {
	m := load(t)
	want := map[string][]string{ // init containers' commands (a pattern), then the main one's
		"Job blockhaul-fetch":         {"^fetch$", pipeline.CmdSnapshot},
		"Job blockhaul-export":        {"^restore$", pipeline.CmdExport},
		"Deployment blockhaul-follow": {"^$", pipeline.CmdFollow},
	}
	for where, p := range m.pods() {
		w, ok := want[where]
		if !ok {
			t.Errorf("%s: not a workload this test knows", where)
			continue
		}
		var inits []string
		for _, c := range p.Spec.InitContainers {
			cmd, _ := argsOf(t, where, c)
			inits = append(inits, cmd)
		}
		seq := strings.Join(inits, " ")
		if len(inits) > 1 {
			seq += " "
		}
		if !regexp.MustCompile(w[0]).MatchString(seq) {
			t.Errorf("%s: init containers run %q, want %s", where, seq, w[0])
		}
		if len(p.Spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", where, len(p.Spec.Containers))
		}
		if cmd, _ := argsOf(t, where, p.Spec.Containers[0]); cmd != w[1] {
			t.Errorf("%s runs %s, want %s", where, cmd, w[1])
		}
	}
	// The check itself refuses a flag blockhaul does not have.
	if flagsOf(t, pipeline.CmdFetch)["shard"] || !flagsOf(t, pipeline.CmdFetch)["shards"] {
		t.Fatal("the flag list of blockhaul fetch is wrong")
	}
}

// httpPort is the port of a container's --http flag.
func httpPort(t *testing.T, where string, c corev1.Container) int {
	t.Helper()
	_, flags := argsOf(t, where, c)
	addr, ok := flags["http"]
	if !ok {
		t.Fatalf("%s container %s: no --http, so no probes or metrics", where, c.Name)
	}
	i := strings.LastIndex(addr, ":")
	port, err := strconv.Atoi(addr[i+1:])
	if i < 0 || err != nil || port == 0 {
		t.Fatalf("%s container %s: --http=%s has no fixed port", where, c.Name, addr)
	}
	return port
}

// probePort resolves a probe's port, by name or number.
func probePort(c corev1.Container, p intstr.IntOrString) int {
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort)
		}
	}
	return -1
}

// TestProbesAndMetricsUseTheHTTPPort: one container of each pod serves
// --http; Prometheus scrapes that port, and every probe asks blockhaul's
// own endpoints on it (an init container takes no probes).
func TestProbesAndMetricsUseTheHTTPPort(t *testing.T) {
	m := load(t)
	for where, p := range m.pods() {
		var served []corev1.Container
		for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
			if _, flags := argsOf(t, where, c); flags["http"] != "" {
				served = append(served, c)
			}
		}
		if len(served) != 1 {
			t.Errorf("%s: %d containers serve --http, want 1", where, len(served))
			continue
		}
		port := httpPort(t, where, served[0])
		a := p.Annotations
		if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(port) || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: scrape annotations %v, want scrape true on port %d path /metrics", where, a, port)
		}
		if pc := probePort(served[0], intstr.FromString("http")); pc != port {
			t.Errorf("%s: container %s's port named http is %d, --http is on %d", where, served[0].Name, pc, port)
		}
		c := p.Spec.Containers[0]
		probes := map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe}
		paths := map[string]string{"liveness": "/healthz", "readiness": "/readyz", "startup": "/healthz"}
		for kind, pr := range probes {
			if pr == nil {
				continue
			}
			if c.Name != served[0].Name {
				t.Errorf("%s: %s probe on container %s, which serves no --http", where, kind, c.Name)
				continue
			}
			if pr.HTTPGet == nil {
				t.Errorf("%s: %s probe is not an HTTP GET", where, kind)
				continue
			}
			if got := probePort(c, pr.HTTPGet.Port); got != port {
				t.Errorf("%s: %s probe on port %d, --http is on %d", where, kind, got, port)
			}
			if pr.HTTPGet.Path != paths[kind] {
				t.Errorf("%s: %s probe asks %s, want %s", where, kind, pr.HTTPGet.Path, paths[kind])
			}
		}
		if c.Name == served[0].Name && c.LivenessProbe == nil {
			t.Errorf("%s: no liveness probe", where)
		}
	}
	f := m.deployments["blockhaul-follow"].Spec.Template.Spec.Containers[0]
	if f.ReadinessProbe == nil || f.LivenessProbe == nil {
		t.Error("follow has no readiness or liveness probe")
	}
}

// TestResourcesAndSecrets: every container has CPU and memory requests and
// limits, and every secretKeyRef names a Secret and key of deploy/; the DSN
// comes from BLOCKHAUL_PG, never from --pg in the args.
func TestResourcesAndSecrets(t *testing.T) {
	m := load(t)
	for where, p := range m.pods() {
		for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
					t.Errorf("%s container %s: no %s request", where, c.Name, r)
				}
				if q, ok := c.Resources.Limits[r]; !ok || q.IsZero() {
					t.Errorf("%s container %s: no %s limit", where, c.Name, r)
				}
			}
			cmd, flags := argsOf(t, where, c)
			if _, ok := flags["pg"]; ok {
				t.Errorf("%s container %s: --pg in the args (the process list shows it); use BLOCKHAUL_PG from the Secret", where, c.Name)
			}
			hasPG := false
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					if e.Name == "BLOCKHAUL_PG" {
						t.Errorf("%s container %s: BLOCKHAUL_PG is not from a Secret", where, c.Name)
					}
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				s, ok := m.secrets[ref.Name]
				_, inData := s.Data[ref.Key]
				_, inString := s.StringData[ref.Key]
				if !ok || !inData && !inString {
					t.Errorf("%s container %s: %s from Secret %s key %s, which deploy/ does not define", where, c.Name, e.Name, ref.Name, ref.Key)
				}
				hasPG = hasPG || e.Name == "BLOCKHAUL_PG"
			}
			fromSecret := map[string]bool{}
			for _, e := range c.Env {
				fromSecret[e.Name] = e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
			}
			if _, _, word := m.settings(t, where, c, 0); strings.HasPrefix(word, "s3://") && !(fromSecret["AWS_ACCESS_KEY_ID"] && fromSecret["AWS_SECRET_ACCESS_KEY"]) {
				t.Errorf("%s container %s: %s to %s without AWS credentials from a Secret", where, c.Name, cmd, word)
			}
			if needsPG := cmd == pipeline.CmdExport || cmd == pipeline.CmdFollow || cmd == pipeline.CmdRun; needsPG != hasPG {
				t.Errorf("%s container %s (%s): BLOCKHAUL_PG from a Secret %v, want %v", where, c.Name, cmd, hasPG, needsPG)
			}
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				if _, ok := m.claims[v.PersistentVolumeClaim.ClaimName]; !ok {
					t.Errorf("%s: volume %s claims %s, which deploy/ does not define", where, v.Name, v.PersistentVolumeClaim.ClaimName)
				}
			}
		}
	}
	if d := m.deployments["blockhaul-follow"]; d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Error("follow must run one replica replaced with Recreate: one process owns a staging directory and the head's checkpoint")
	}
}

func uintFlag(t *testing.T, flags map[string]string, name string, def uint64) uint64 {
	t.Helper()
	v, ok := flags[name]
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("--%s=%s: %v", name, v, err)
	}
	return n
}

// TestShardsLineUp: the fetch Indexed Job has one completion per shard,
// the count kustomize copies from the ConfigMap the pods read it from, each
// shard a non-empty slice; each pod fetches into a staging directory that
// its main container snapshots as its shard (the index from
// JOB_COMPLETION_INDEX) under the location the export Job's one init
// container restores every shard from, waiting for them, into the store
// the export reads; the range and chain are the same everywhere.
func TestShardsLineUp(t *testing.T) {
	m := load(t)
	fj, ej := m.job(t, "blockhaul-fetch"), m.job(t, "blockhaul-export")
	if fj.Spec.CompletionMode == nil || *fj.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Fatal("the fetch Job is not Indexed")
	}
	fs := fj.Spec.Template.Spec
	if len(fs.InitContainers) != 1 {
		t.Fatalf("fetch Job: %d init containers, want the fetch alone", len(fs.InitContainers))
	}
	fc, sc := fs.InitContainers[0], fs.Containers[0]
	_, ff, _ := m.settings(t, "Job blockhaul-fetch", fc, 0)
	shards := uintFlag(t, ff, "shards", 0)
	if fj.Spec.Completions == nil || uint64(*fj.Spec.Completions) != shards || shards == 0 {
		t.Fatalf("fetch Job: completions %s for --shards=%d", ptrString(fj.Spec.Completions), shards)
	}
	if fj.Spec.Parallelism == nil || uint64(*fj.Spec.Parallelism) != shards {
		t.Errorf("fetch Job: parallelism %s for --shards=%d", ptrString(fj.Spec.Parallelism), shards)
	}
	if _, ok := ff["shard-index"]; ok {
		t.Error("fetch Job sets --shard-index; each pod's comes from JOB_COMPLETION_INDEX")
	}
	if _, ok := ff["to"]; !ok {
		t.Fatal("fetch Job has no --to")
	}
	from, to := uintFlag(t, ff, "from", 1), uintFlag(t, ff, "to", 0)
	chunk := uintFlag(t, ff, "shard-chunk", pipeline.DefaultShardChunk)
	for i := uint64(0); i < shards; i++ {
		if _, _, ok := pipeline.ShardRange(from, to, chunk, shards, i); !ok {
			t.Errorf("shard %d of %d has no heights of %d..%d in chunks of %d; lower BLOCKHAUL_SHARDS", i, shards, from, to, chunk)
		}
	}

	// volumeOf names the volume and the directory of it mounted at dir.
	volumeOf := func(c corev1.Container, dir string) string {
		for _, vm := range c.VolumeMounts {
			if vm.MountPath == dir {
				return vm.Name + ":" + vm.SubPath + vm.SubPathExpr
			}
		}
		return ""
	}
	_, sf, dest := m.settings(t, "Job blockhaul-fetch", sc, 0)
	if sf["staging"] != ff["staging"] || volumeOf(fc, ff["staging"]) == "" || volumeOf(fc, ff["staging"]) != volumeOf(sc, sf["staging"]) {
		t.Errorf("fetch Job: snapshot of %s (volume %q), fetch into %s (volume %q)", sf["staging"], volumeOf(sc, sf["staging"]), ff["staging"], volumeOf(fc, ff["staging"]))
	}
	// A retried or evicted shard pod resumes from what it staged: its
	// staging is a claim's (an emptyDir or an ephemeral volume goes with
	// the pod), each shard in its own directory of it.
	for _, vm := range fc.VolumeMounts {
		if vm.MountPath != ff["staging"] {
			continue
		}
		if !strings.Contains(vm.SubPathExpr, "$(JOB_COMPLETION_INDEX)") {
			t.Errorf("fetch Job: staging mounted with subPathExpr %q; the shards share one claim, each needs its own directory", vm.SubPathExpr)
		}
		for _, v := range fs.Volumes {
			if v.Name == vm.Name && (v.PersistentVolumeClaim == nil || m.claims[v.PersistentVolumeClaim.ClaimName] == nil) {
				t.Errorf("fetch Job: staging volume %s is no claim of deploy/'s: a retried shard would fetch its slice again", v.Name)
			}
		}
	}
	if sf["shards"] != ff["shards"] {
		t.Errorf("fetch Job: snapshot --shards=%s, fetch --shards=%s", sf["shards"], ff["shards"])
	}
	if _, ok := sf["shard-index"]; ok {
		t.Error("fetch Job: snapshot sets --shard-index; each pod's comes from JOB_COMPLETION_INDEX")
	}
	if dest == "" || strings.Contains(dest, "$(") {
		t.Fatalf("fetch Job: snapshot DEST %q is not resolved", dest)
	}

	// The export Job: one restore of every shard, waiting for them.
	es := ej.Spec.Template.Spec
	if len(es.InitContainers) != 1 {
		t.Fatalf("export Job: %d init containers, want one restore of every shard", len(es.InitContainers))
	}
	_, rf, src := m.settings(t, "Job blockhaul-export", es.InitContainers[0], -1)
	if src != dest {
		t.Errorf("export Job restores from %s, the fetch Job's shards snapshot to %s", src, dest)
	}
	for _, f := range []string{"shards", "from", "to", "shard-chunk"} {
		if rf[f] != ff[f] {
			t.Errorf("export Job: restore --%s=%s, fetch --%s=%s", f, rf[f], f, ff[f])
		}
	}
	if w, err := time.ParseDuration(rf["wait"]); err != nil || w <= 0 {
		t.Errorf("export Job: restore --wait=%q: it must wait for the fetch (%v)", rf["wait"], err)
	}
	_, ef, _ := m.settings(t, "Job blockhaul-export", es.Containers[0], -1)
	if ef["staging"] != rf["staging"] || ef["staging"] == "" || volumeOf(es.InitContainers[0], "/stores") != volumeOf(es.Containers[0], "/stores") {
		t.Errorf("export reads --staging=%s, the restore wrote %s", ef["staging"], rf["staging"])
	}
	if ef["from"] != ff["from"] || ef["to"] != ff["to"] || ef["chain"] != ff["chain"] {
		t.Errorf("export range %s..%s (%s), fetch range %s..%s (%s)", ef["from"], ef["to"], ef["chain"], ff["from"], ff["to"], ff["chain"])
	}
	if ej.Spec.Completions != nil && *ej.Spec.Completions != 1 || ej.Spec.Parallelism != nil && *ej.Spec.Parallelism != 1 {
		t.Error("the export Job must run one pod: it checks every seam in one pass")
	}
}

// envOf resolves a container's environment as the kubelet does: literal
// values (with $(VAR) of those before), ConfigMap and Secret keys of the
// manifests, and the pod's annotations by fieldRef. An Indexed Job's pod
// (index >= 0) has JOB_COMPLETION_INDEX in every container and the index
// annotation, as the Job controller gives it.
func (m *manifests) envOf(t *testing.T, where string, c corev1.Container, index int) map[string]string {
	t.Helper()
	env, ann := map[string]string{}, map[string]string{}
	if index >= 0 {
		env["JOB_COMPLETION_INDEX"] = strconv.Itoa(index)
		ann["batch.kubernetes.io/job-completion-index"] = strconv.Itoa(index)
	}
	for _, e := range c.Env {
		v, ok := "", false
		switch src := e.ValueFrom; {
		case src == nil:
			v, ok = expand(e.Value, env), true
		case src.ConfigMapKeyRef != nil:
			if cm := m.configMaps[src.ConfigMapKeyRef.Name]; cm != nil {
				v, ok = cm.Data[src.ConfigMapKeyRef.Key]
			}
		case src.SecretKeyRef != nil:
			if s := m.secrets[src.SecretKeyRef.Name]; s != nil {
				if b, in := s.Data[src.SecretKeyRef.Key]; in {
					v, ok = string(b), true
				} else {
					v, ok = s.StringData[src.SecretKeyRef.Key]
				}
			}
		case src.FieldRef != nil:
			key, found := strings.CutPrefix(src.FieldRef.FieldPath, "metadata.annotations['")
			v, ok = ann[strings.TrimSuffix(key, "']")]
			ok = ok && found
		}
		if !ok {
			t.Fatalf("%s container %s: %s from %+v, which deploy/ does not define", where, c.Name, e.Name, e.ValueFrom)
		}
		env[e.Name] = v
	}
	return env
}

// expand replaces $(VAR) in s by VAR's value in env, as Kubernetes expands
// a container's args and env: an undefined VAR is left as it is, and $$ is
// a $.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			if v, ok := env[s[i+2:i+2+end]]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func TestExpandAsKubernetes(t *testing.T) {
	env := map[string]string{"A": "x", "B": "y"}
	for in, want := range map[string]string{
		"$(A)/shard": "x/shard", "$(A)$(B)": "xy", "$(C)": "$(C)", "$$(A)": "$(A)", "a$b": "a$b", "$(A": "$(A", "$": "$",
	} {
		if got := expand(in, env); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// settings is what blockhaul sees in container c as the kubelet starts it
// (index: the pod's completion index, or -1): its command, its flags from
// the args with $(VAR) expanded and then from its BLOCKHAUL_ variables (the
// args win), and its SRC or DEST word.
func (m *manifests) settings(t *testing.T, where string, c corev1.Container, index int) (cmd string, flags map[string]string, word string) {
	t.Helper()
	cmd, flags, word = argsAndWord(t, where, c)
	env := m.envOf(t, where, c, index)
	for k, v := range flags {
		flags[k] = expand(v, env)
	}
	for f := range flagsOf(t, cmd) {
		if v, ok := env[pipeline.EnvName(f)]; ok {
			if _, set := flags[f]; !set {
				flags[f] = v
			}
		}
	}
	return cmd, flags, expand(word, env)
}

func ptrString(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}
