package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/internal/syncbuf"
	"github.com/blockhaul/blockhaul/internal/testbin"
	"github.com/blockhaul/blockhaul/internal/testseed"
	"github.com/blockhaul/blockhaul/internal/testserver"
	"github.com/blockhaul/blockhaul/pipeline"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestManifestsRunAsKubernetesWould runs the pods of the fetch and export
// Jobs as the kubelet would start them: each container's args with $(VAR)
// expanded, its environment exactly what the manifests give it (the
// ConfigMap's keys, the Secrets', JOB_COMPLETION_INDEX), its volumes fresh
// directories, init containers before the main one. Only the servers differ
// from deploy/: the ConfigMap's range is cut short, the chain is the
// synthetic one, the snapshots go to a real S3 server (SeaweedFS) and the
// database is a fresh one.
//
// The export pod is created first, as kubectl apply -k creates both Jobs at
// once: its restore waits for the fetch's snapshots in the process (no exit,
// so no retry of the Job spent). It is killed while waiting and started
// again on a fresh emptyDir, as a Job replaces a lost pod. The shards then
// run one by one in a shuffled order; the export pod's restore merges each
// as it comes, and the export begins; it is killed after its first commit,
// and a third pod restores afresh and finishes the range. The tables must
// be identical to those of one plain run of the same range.
func TestManifestsRunAsKubernetesWould(t *testing.T) {
	weed := testserver.Weed(t)
	endpoint := testserver.SeaweedFS(t, weed, "snapshots")
	dsn, ref := pgtest.NewDatabase(t), pgtest.NewDatabase(t)

	m := load(t)
	cm := m.configMaps["blockhaul-range"]
	if cm == nil {
		t.Fatal("deploy/ has no ConfigMap blockhaul-range")
	}
	const from, to, chunk = 1, 800, 200
	shards, err := strconv.Atoi(cm.Data["BLOCKHAUL_SHARDS"])
	if err != nil || shards < 2 {
		t.Fatalf("BLOCKHAUL_SHARDS=%q: want a count of at least 2 (%v)", cm.Data["BLOCKHAUL_SHARDS"], err)
	}
	cm.Data["BLOCKHAUL_RPC"] = "" // the synthetic chain
	cm.Data["BLOCKHAUL_FROM_HEIGHT"] = strconv.Itoa(from)
	cm.Data["BLOCKHAUL_TO_HEIGHT"] = strconv.Itoa(to)
	cm.Data["BLOCKHAUL_SHARD_CHUNK"] = strconv.Itoa(chunk)
	cm.Data["SNAPSHOTS"] = "s3://snapshots?endpoint=" + endpoint + "&use_path_style=true&disable_https=true&region=us-east-1&prefix=deploy-run/"
	m.secrets["blockhaul-pg"].StringData = map[string]string{"dsn": dsn}
	m.secrets["blockhaul-s3"].StringData = map[string]string{
		"access-key-id": os.Getenv("AWS_ACCESS_KEY_ID"), "secret-access-key": os.Getenv("AWS_SECRET_ACCESS_KEY")}
	fetch, export := m.job(t, "blockhaul-fetch"), m.job(t, "blockhaul-export")
	if int(*fetch.Spec.Completions) != shards {
		t.Fatalf("fetch Job: %d completions for BLOCKHAUL_SHARDS=%d", *fetch.Spec.Completions, shards)
	}

	// Attempt 1 of the export pod: its restore waits; the pod is lost.
	first := startPod(t, m, "Job blockhaul-export", export, -1)
	r := first.start(t, first.spec.InitContainers[0])
	r.waitFor(t, "waiting for the fetch's snapshots")
	r.kill(t)
	if n := rowsOf(t, dsn); n != 0 {
		t.Fatalf("the export pod wrote %d blocks before any shard was fetched", n)
	}

	// Attempt 2, on a fresh emptyDir: it waits again while the shards run.
	second := startPod(t, m, "Job blockhaul-export", export, -1)
	restore := second.start(t, second.spec.InitContainers[0])
	restore.waitFor(t, "waiting for the fetch's snapshots")
	order := testseed.New(t).Perm(shards) // BLOCKHAUL_TEST_SEED replays it
	t.Logf("shards run in the order %v", order)
	// Shard 0's pod (the widest slice, two chunks) is killed after its
	// first staging commit (a lost node); the Job's next pod for index 0
	// resumes from the staging the claim kept: it plans fewer blocks than
	// the slice holds.
	for _, i := range order {
		if i != 0 {
			startPod(t, m, "Job blockhaul-fetch", fetch, i).run(t)
			continue
		}
		lost := startPod(t, m, "Job blockhaul-fetch", fetch, i)
		killedFetch := *lost.spec.InitContainers[0].DeepCopy()
		killedFetch.Env = append(killedFetch.Env, corev1.EnvVar{Name: "BLOCKHAUL_CRASHPOINT", Value: "stage-commit:2"})
		lost.start(t, killedFetch).killed(t)
		retried := startPod(t, m, "Job blockhaul-fetch", fetch, i)
		rf := retried.start(t, retried.spec.InitContainers[0])
		if err := rf.wait(); err != nil {
			t.Fatalf("retried shard %d: fetch: %v\n%s", i, err, rf.out.String())
		}
		sliceFrom, sliceTo, _ := pipeline.ShardRange(from, to, chunk, uint64(shards), uint64(i))
		if planned := plannedMissing(t, rf.out.String()); planned <= 0 || planned >= int(sliceTo-sliceFrom+1) {
			t.Errorf("retried shard %d planned %d missing blocks of its slice %d-%d: want some, fewer than all (it resumes)\n%s",
				i, planned, sliceFrom, sliceTo, rf.out.String())
		} else {
			t.Logf("retried shard %d resumed: %d of its %d blocks were left to fetch", i, planned, sliceTo-sliceFrom+1)
		}
		retried.runContainer(t, retried.spec.Containers[0])
	}
	if err := restore.wait(); err != nil {
		t.Fatalf("export pod: restore: %v\n%s", err, restore.out.String())
	}
	if n := strings.Count(restore.out.String(), "shard restored and merged"); n != shards {
		t.Errorf("export pod: restore merged %d shards, want %d:\n%s", n, shards, restore.out.String())
	}
	// The export is killed after its first commit (SIGKILL, as a lost node
	// does: the crash point stands in for the moment); the Job's next pod
	// restores afresh and the export resumes from PostgreSQL's checkpoint.
	crashing := *second.spec.Containers[0].DeepCopy()
	crashing.Env = append(crashing.Env, corev1.EnvVar{Name: "BLOCKHAUL_CRASHPOINT", Value: "after-commit:1"})
	second.start(t, crashing).killed(t)
	if n := rowsOf(t, dsn); n == 0 || n >= to-from+1 {
		t.Fatalf("the export killed after its first commit left %d blocks, want some of %d", n, to-from+1)
	} else {
		t.Logf("the export killed after its first commit left %d blocks", n)
	}
	third := startPod(t, m, "Job blockhaul-export", export, -1)
	third.run(t)

	// The reference: one plain run of the same range of the same chain.
	c := exec.Command(binary, "run", "--chain="+cm.Data["BLOCKHAUL_CHAIN"], "--staging="+filepath.Join(t.TempDir(), "ref"),
		"--pg="+ref, fmt.Sprintf("--from=%d", from), fmt.Sprintf("--to=%d", to))
	c.Env = testbin.CleanEnv()
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	if n := rowsOf(t, dsn); n != to-from+1 {
		t.Errorf("the export Job left %d blocks, want %d", n, to-from+1)
	}
	tables := map[string]string{"blocks": "height", "transactions": "height, tx_index", "events": "height, event_index"}
	got, want := pgtest.Fingerprint(t, dsn, "cometbft", tables), pgtest.Fingerprint(t, ref, "cometbft", tables)
	if !maps.Equal(got, want) {
		t.Errorf("the Jobs' tables differ from one run's:\n%v\nwant\n%v", got, want)
	}
	t.Logf("tables of the Jobs and of one run: %v", got)
}

// plannedMissing is the missing count of a fetch's "fetch planned" line.
func plannedMissing(t *testing.T, log string) int {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		var rec struct {
			Msg     string `json:"msg"`
			Missing *int   `json:"missing"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "fetch planned" && rec.Missing != nil {
			return *rec.Missing
		}
	}
	t.Fatalf("no \"fetch planned\" line with missing in:\n%s", log)
	return 0
}

// rowsOf is how many blocks the database's cometbft schema holds (0 when
// it has none yet).
func rowsOf(t *testing.T, dsn string) int {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, dsn)
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('cometbft.blocks') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatalf("count blocks: %v", err)
	}
	if !exists {
		return 0
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM cometbft.blocks`).Scan(&n); err != nil {
		t.Fatalf("count blocks: %v", err)
	}
	return n
}

// pod is one pod of a Job as the kubelet runs it: its volumes are
// directories of the test's (an emptyDir fresh for each pod), its
// containers processes of blockhaul.
type pod struct {
	m     *manifests
	where string
	spec  corev1.PodSpec
	index int               // the completion index of an Indexed Job's pod, else -1
	mount map[string]string // volume name -> directory
}

func startPod(t *testing.T, m *manifests, where string, j *batchv1.Job, index int) *pod {
	t.Helper()
	p := &pod{m: m, where: fmt.Sprintf("%s pod %d", where, index), spec: j.Spec.Template.Spec, index: index, mount: map[string]string{}}
	for _, v := range p.spec.Volumes {
		switch {
		case v.EmptyDir != nil:
			p.mount[v.Name] = t.TempDir()
		case v.PersistentVolumeClaim != nil:
			if m.claimDirs == nil {
				m.claimDirs = map[string]string{}
			}
			name := v.PersistentVolumeClaim.ClaimName
			if m.claimDirs[name] == "" {
				m.claimDirs[name] = t.TempDir()
			}
			p.mount[v.Name] = m.claimDirs[name]
		default:
			t.Fatalf("%s: volume %s is neither an emptyDir nor a claim; this test gives only those", where, v.Name)
		}
	}
	return p
}

// run runs the pod's init containers, then its main container, each to a
// successful exit.
func (p *pod) run(t *testing.T) {
	t.Helper()
	for _, c := range p.spec.InitContainers {
		p.runContainer(t, c)
	}
	if len(p.spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want one", p.where, len(p.spec.Containers))
	}
	p.runContainer(t, p.spec.Containers[0])
}

func (p *pod) runContainer(t *testing.T, c corev1.Container) {
	t.Helper()
	r := p.start(t, c)
	if err := r.wait(); err != nil {
		t.Fatalf("%s container %s: %v\n%s", p.where, c.Name, err, r.out.String())
	}
}

// start starts container c: args with $(VAR) expanded, the environment
// the manifests give it and nothing else, paths under its volume mounts
// moved to the pod's directories, and the --http port (the pod's own
// network on Kubernetes) a free one of 127.0.0.1.
func (p *pod) start(t *testing.T, c corev1.Container) *process {
	t.Helper()
	env := p.m.envOf(t, p.where, c, p.index)
	// Each mount's directory: the volume's, or its subPath (subPathExpr
	// with the container's $(VAR) expanded), made as the kubelet makes it.
	dirs := map[string]string{}
	for _, vm := range c.VolumeMounts {
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, env)
		}
		if strings.Contains(sub, "$(") || strings.Contains(sub, "..") {
			t.Fatalf("%s container %s: mount %s has subpath %q", p.where, c.Name, vm.MountPath, sub)
		}
		dirs[vm.MountPath] = filepath.Join(p.mount[vm.Name], sub)
		if err := os.MkdirAll(dirs[vm.MountPath], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	localPath := func(s string) string {
		for _, vm := range c.VolumeMounts {
			if s == vm.MountPath || strings.HasPrefix(s, vm.MountPath+"/") {
				return dirs[vm.MountPath] + strings.TrimPrefix(s, vm.MountPath)
			}
		}
		return s
	}
	var args []string
	for _, a := range c.Args {
		a = expand(a, env)
		if name, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
			if name == "--http" {
				value = fmt.Sprintf("127.0.0.1:%d", testserver.FreePorts(t, 1)[0])
			}
			a = name + "=" + localPath(value)
		}
		args = append(args, a)
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+localPath(v))
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = environ
	r := &process{cmd: cmd, out: &syncbuf.Buffer{}, lines: make(chan string, 1024), where: p.where + " container " + c.Name}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = r.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", r.where, err)
	}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			r.out.Write([]byte(sc.Text() + "\n"))
			select {
			case r.lines <- sc.Text():
			default: // nobody waits for lines now
			}
		}
	}()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			r.cmd.Process.Kill()
			r.wait()
		}
	})
	return r
}

// process is a running container.
type process struct {
	where string
	cmd   *exec.Cmd
	out   *syncbuf.Buffer
	lines chan string
}

// waitFor reads the process's log until a line contains s; the test fails
// when the process ends first.
func (r *process) waitFor(t *testing.T, s string) {
	t.Helper()
	for l := range r.lines {
		if strings.Contains(l, s) {
			return
		}
	}
	t.Fatalf("%s ended without logging %q: %v\n%s", r.where, s, r.wait(), r.out.String())
}

// kill kills the process as a lost node or a deleted pod does (SIGKILL);
// the test fails if it had ended by itself.
func (r *process) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("%s: kill: %v", r.where, err)
	}
	r.killed(t)
}

// killed waits for the process's end and fails the test unless a SIGKILL
// ended it.
func (r *process) killed(t *testing.T) {
	t.Helper()
	err := r.wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s was not killed: %v\n%s", r.where, err, r.out.String())
	}
}

// wait waits for the process's end (its log read to the end first).
func (r *process) wait() error {
	for range r.lines { // drain, so the reader reaches EOF
	}
	return r.cmd.Wait()
}
