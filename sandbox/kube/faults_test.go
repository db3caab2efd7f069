package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sandbox/kube"
)

func ptr[T any](v T) *T { return &v }

// startBackground starts command in agent's sandbox and waits until its
// output shows want; it returns the session id.
func startBackground(t *testing.T, d daemon, agent, command, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := d.mgr.Exec(ctx, api.ExecParams{Host: "sandbox", AgentID: agent, Security: "full", Command: command, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Details.SessionID
	if r.Details.Status != api.StatusRunning || id == "" {
		t.Fatalf("exec: %+v", r)
	}
	var out strings.Builder
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), want); {
		r, err := d.mgr.Process(ctx, api.ProcessParams{Action: "poll", SessionID: id, AgentID: agent, TimeoutMs: ptr(1000.0)})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Content) > 0 {
			out.WriteString(r.Content[0].Text)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %q", want, out.String())
		}
	}
	return id
}

// waitEnded polls session id until it is no longer running and returns
// the last result and when it ended.
func waitEnded(t *testing.T, d daemon, agent, id string, within time.Duration) (api.Result, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within+time.Minute)
	defer cancel()
	deadline := time.Now().Add(within)
	for {
		r, err := d.mgr.Process(ctx, api.ProcessParams{Action: "poll", SessionID: id, AgentID: agent, TimeoutMs: ptr(50.0)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Details.Status != api.StatusRunning {
			return r, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s still running %v later: %+v", id, within, r.Details)
		}
	}
}

// TestPodDeletedFailsSession deletes a sandbox Pod while its command runs:
// the Pod watch fails the session within 2 s, saying why.
func TestPodDeletedFailsSession(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	d := newDaemon(t, testConfig(kc, ns), filepath.Join(t.TempDir(), "cursors.json"))
	const agent = "deleted"
	id := startBackground(t, d, agent, "echo started; sleep 120", "started")
	pod := d.e.PodOf(kube.Scope{AgentID: agent})
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	r, ended := waitEnded(t, d, agent, id, 10*time.Second)
	if took := ended.Sub(at); took > 2*time.Second {
		t.Errorf("the session ended %v after the pod was deleted, want <= 2 s", took)
	}
	if r.Details.Status != api.StatusFailed || !strings.Contains(r.Details.Reason+r.Content[0].Text, "deleted") {
		t.Errorf("status %q reason %q text %q: want failed, saying the pod was deleted", r.Details.Status, r.Details.Reason, r.Content[0].Text)
	}
}

// TestPodEvictedFailsSession evicts a sandbox Pod (the Eviction API, as
// a node drain does) while its command runs: the session fails within
// 2 s, saying the Pod was evicted.
func TestPodEvictedFailsSession(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	d := newDaemon(t, testConfig(kc, ns), filepath.Join(t.TempDir(), "cursors.json"))
	const agent = "evicted"
	id := startBackground(t, d, agent, "echo started; sleep 120", "started")
	pod := d.e.PodOf(kube.Scope{AgentID: agent})
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}}
	if err := cs.PolicyV1().Evictions(ns).Evict(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	r, ended := waitEnded(t, d, agent, id, 10*time.Second)
	if took := ended.Sub(at); took > 2*time.Second {
		t.Errorf("the session ended %v after the eviction, want <= 2 s", took)
	}
	if r.Details.Status != api.StatusFailed || !strings.Contains(r.Details.Reason+r.Content[0].Text, "evicted") {
		t.Errorf("status %q reason %q text %q: want failed, saying the pod was evicted", r.Details.Status, r.Details.Reason, r.Content[0].Text)
	}
}

// TestKubeletRestartWhileRunning kills the node's kubelet (SIGKILL) while a
// command runs and starts it again (scripts/k8s/up.sh restarts what
// died): the attach stream breaks and comes back, and the session goes on
// to its end with every line once.
func TestKubeletRestartWhileRunning(t *testing.T) {
	kc := cluster(t)
	dir, bin := os.Getenv("SANDBOXCTL_TEST_K8S_DIR"), os.Getenv("SANDBOXCTL_TEST_K8S_BIN")
	if dir == "" || bin == "" {
		t.Skip("SANDBOXCTL_TEST_K8S_DIR/BIN unset: the kubelet of this cluster is not ours to restart")
	}
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	d := newDaemon(t, testConfig(kc, ns), filepath.Join(t.TempDir(), "cursors.json"))
	const agent = "kubelet"
	id := startBackground(t, d, agent, "echo before; while [ ! -e /workspace/GATE ]; do sleep 0.05; done; echo after", "before")
	pidFile := filepath.Join(dir, "state", "run", "kubelet.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubelet %d killed", pid)
	// The attach stream goes through the kubelet: it is down now.
	time.Sleep(500 * time.Millisecond)
	up := exec.Command(filepath.Join(repoRoot(t), "scripts", "k8s", "up.sh"))
	up.Env = append(os.Environ(), "K8S_DIR="+dir, "K8S_BIN="+bin)
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("up.sh after the kubelet's death: %v\n%s", err, out)
	}
	t.Logf("kubelet back")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The restarted kubelet knows the Pod again after its first sync.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, code, err := d.e.Exec(ctx, d.e.PodOf(kube.Scope{AgentID: agent}), []string{"touch", "/workspace/GATE"})
		if err == nil && code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("touch GATE: %v (exit %d)", err, code)
		}
	}
	r, _ := waitEnded(t, d, agent, id, 30*time.Second)
	if r.Details.Status != api.StatusCompleted {
		t.Fatalf("after the kubelet restart: %+v %q", r.Details, r.Content[0].Text)
	}
	log, err := d.mgr.Process(ctx, api.ProcessParams{Action: "log", SessionID: id, AgentID: agent})
	if err != nil {
		t.Fatal(err)
	}
	text := log.Content[0].Text
	if strings.Count(text, "before") != 1 || strings.Count(text, "after") != 1 {
		t.Errorf("log %q: want each line once", text)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..")
}

// TestNetworkPolicyRequireRefuses: the test cluster's bridge CNI does not
// enforce NetworkPolicy, and the probe cannot show enforcement (a
// connection to a sandbox Pod is answered, or Pods do not reach each
// other at all, e.g. a host firewall drops bridged traffic): networkPolicy
// require refuses.
func TestNetworkPolicyRequireRefuses(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	cfg := testConfig(kc, ns)
	cfg.Sandbox.Kubernetes.NetworkPolicy = "require"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := kube.New(ctx, kube.Options{Config: cfg.Sandbox, Logf: t.Logf})
	if err == nil {
		_ = e.Close()
		t.Fatal("New succeeded on a cluster whose network plugin enforces no NetworkPolicy")
	}
	if !errors.Is(err, kube.ErrNetworkPolicyUnverified) {
		t.Fatalf("err = %v, want ErrNetworkPolicyUnverified", err)
	}
	t.Logf("refused: %v", err)
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, kube.PolicyName, metav1.GetOptions{}); err != nil {
		t.Errorf("the deny-all policy is not there: %v", err)
	}
}

// TestPodHardening checks, from inside a running sandbox Pod, what its
// spec promises: not root, no capabilities, no new privileges, seccomp
// filtering, a read-only root, memory-backed /tmp, no service account
// token, limits equal to requests.
func TestPodHardening(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	d := newDaemon(t, testConfig(kc, ns), filepath.Join(t.TempDir(), "cursors.json"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.e.Ensure(ctx, kube.Scope{AgentID: "hardening"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) (string, int) {
		out, code, err := d.e.Exec(ctx, sb.Pod, []string{"sh", "-c", cmd})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return strings.TrimSpace(out), code
	}
	if out, _ := run("id -u"); out == "0" || out == "" {
		t.Errorf("id -u = %q, want a non-root uid", out)
	}
	status, _ := run("cat /proc/1/status")
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(status, want) {
			t.Errorf("pid 1 (the supervisor): no %q in\n%s", want, status)
		}
	}
	if out, code := run("touch /rootfs-write 2>&1"); code == 0 {
		t.Errorf("the root filesystem is writable (touch: %q)", out)
	}
	if out, _ := run("grep ' /tmp ' /proc/mounts"); !strings.HasPrefix(out, "tmpfs ") {
		t.Errorf("/tmp is %q, want a tmpfs", out)
	}
	if _, code := run("ls /var/run/secrets/kubernetes.io/serviceaccount 2>/dev/null"); code == 0 {
		t.Errorf("a service account token is mounted")
	}
	if out, code := run("touch /workspace/w && echo ok"); code != 0 || out != "ok" {
		t.Errorf("/workspace is not writable: %q", out)
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, sb.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.QOSClass != "Guaranteed" {
		t.Errorf("QoS class %q, want Guaranteed (limits = requests)", p.Status.QOSClass)
	}
}

// setNodeReady writes the Ready condition of node through the status
// subresource (what the node lifecycle controller and the kubelet write).
func setNodeReady(ctx context.Context, cs kubernetes.Interface, node string, status corev1.ConditionStatus, reason, message string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		for i, c := range n.Status.Conditions {
			if c.Type != corev1.NodeReady {
				continue
			}
			if c.Status != status {
				n.Status.Conditions[i].LastTransitionTime = now
			}
			n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason, n.Status.Conditions[i].Message = status, reason, message
			n.Status.Conditions[i].LastHeartbeatTime = now
		}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// TestNodeLostFailsSession loses the node of a sandbox Pod while its
// command runs: its Ready condition goes Unknown, written through the
// status subresource exactly as the node lifecycle controller writes it
// when the kubelet stops posting status (the controller's 50 s grace
// period is what this skips; stopping the kubelet for that long, or
// deleting the Node, whose Pods the pod GC then deletes, would take down
// every Pod of this shared node). The session fails within 2 s naming the
// lost node, the node is given back its Ready condition at once (its
// kubelet would rewrite it within 10 s anyway), and the agent's next
// command runs in a new Pod.
func TestNodeLostFailsSession(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	d := newDaemon(t, testConfig(kc, ns), filepath.Join(t.TempDir(), "cursors.json"))
	const agent = "nodelost"
	id := startBackground(t, d, agent, "echo started; sleep 120", "started")
	pod := d.e.PodOf(kube.Scope{AgentID: agent})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := p.Spec.NodeName
	restore := func() {
		if err := setNodeReady(context.Background(), cs, node, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"); err != nil {
			t.Errorf("give node %s its Ready condition back: %v", node, err)
		}
	}
	if err := setNodeReady(ctx, cs, node, corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	r, ended := func() (api.Result, time.Time) {
		defer restore()
		return waitEnded(t, d, agent, id, 10*time.Second)
	}()
	if took := ended.Sub(at); took > 2*time.Second {
		t.Errorf("the session ended %v after the node was lost, want <= 2 s", took)
	}
	if text := r.Details.Reason + r.Content[0].Text; r.Details.Status != api.StatusFailed || !strings.Contains(text, "node "+node+" was lost") {
		t.Errorf("status %q reason %q text %q: want failed, saying node %s was lost", r.Details.Status, r.Details.Reason, r.Content[0].Text, node)
	}
	r, err = d.mgr.Exec(ctx, api.ExecParams{Host: "sandbox", AgentID: agent, Security: "full", Command: "echo again"})
	if err != nil || r.Details.Status != api.StatusCompleted {
		t.Fatalf("the next command: %v %+v", err, r)
	}
	if now := d.e.PodOf(kube.Scope{AgentID: agent}); now == pod || now == "" {
		t.Errorf("the next command ran in pod %q, want a new one (not %s, on the lost node)", now, pod)
	}
}

// logLines collects an Engine's log lines, with when each was said (and
// passes them to t.Logf).
type logLines struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
	at    []time.Time
}

func (l *logLines) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.t.Log(line)
	l.mu.Lock()
	l.lines, l.at = append(l.lines, line), append(l.at, time.Now())
	l.mu.Unlock()
}

// find waits up to within for a line holding all of want and returns
// when it was said (zero: never).
func (l *logLines) find(within time.Duration, want ...string) time.Time {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		l.mu.Lock()
		for i, line := range l.lines {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				l.mu.Unlock()
				return l.at[i]
			}
		}
		l.mu.Unlock()
	}
	return time.Time{}
}

// TestPodOOMKilledFailsSession runs a sandbox Pod out of memory for real
// (32 MiB, and both memory-backed volumes, /tmp and /run, filled through
// the exec API: tmpfs pages that no process kill frees, so the kernel ends
// up killing the container) while a command runs. The container ends
// OOMKilled and the Pod watch fails the Pod's supervisor connection within
// 2 s, naming OOMKilled. Where the kubelet kills a container's processes
// together on OOM (cgroup v2, memory.oom.group) the running session fails
// with that reason. On cgroup v1 (this test cluster) the kernel kills the
// processes one by one, the command first (the supervisor raises its
// commands' OOM score to outlive them), so the session may end with the
// SIGKILL the supervisor reported before it was killed in turn: the test
// accepts that there, and only there.
func TestPodOOMKilledFailsSession(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	cfg := testConfig(kc, ns)
	cfg.Sandbox.Docker.Memory, cfg.Sandbox.Docker.MemorySwap = "32m", "32m"
	cfg.Sandbox.Docker.Tmpfs = []string{"/tmp:size=16m", "/run:size=16m"}
	log := &logLines{t: t}
	d := newDaemonLogf(t, cfg, filepath.Join(t.TempDir(), "cursors.json"), log.logf)
	const agent = "oom"
	id := startBackground(t, d, agent, "echo started; sleep 120", "started")
	pod := d.e.PodOf(kube.Scope{AgentID: agent})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, v2, err := d.e.Exec(ctx, pod, []string{"test", "-e", "/sys/fs/cgroup/memory.oom.group"})
	if err != nil {
		t.Fatal(err)
	}
	groupKill := v2 == 0
	out, code, err := d.e.Exec(ctx, pod, []string{"sh", "-c", "cat /dev/zero > /tmp/fill; cat /dev/zero > /run/fill; echo survived"})
	at := time.Now()
	t.Logf("the memory hog: %q, exit %d, %v (memory.oom.group: %v)", out, code, err, groupKill)
	r, ended := waitEnded(t, d, agent, id, 10*time.Second)
	if took := ended.Sub(at); took > 2*time.Second {
		t.Errorf("the session ended %v after the hog was killed, want <= 2 s", took)
	}
	t.Logf("the session: %s %q", r.Details.Status, r.Content[0].Text)
	if said := log.find(10*time.Second, pod, "OOMKilled"); said.IsZero() || said.Sub(at) > 2*time.Second {
		t.Errorf("the engine said that pod %s was OOMKilled at %v, %v after the hog was killed; want <= 2 s", pod, said, said.Sub(at))
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var term *corev1.ContainerStateTerminated
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == kube.ContainerName {
			term = st.State.Terminated
		}
	}
	if term == nil || term.Reason != "OOMKilled" {
		t.Fatalf("the sandbox container is %+v, want terminated OOMKilled (the test did not run it out of memory)", p.Status.ContainerStatuses)
	}
	text := r.Details.Reason + r.Content[0].Text
	switch {
	case r.Details.Status != api.StatusFailed:
		t.Errorf("status %q, want failed", r.Details.Status)
	case strings.Contains(text, "OOMKilled"):
	case !groupKill && strings.Contains(text, "SIGKILL"):
		t.Logf("cgroup v1: the kernel killed the command before the supervisor, which reported it")
	default:
		t.Errorf("reason %q text %q: want it to name OOMKilled", r.Details.Reason, r.Content[0].Text)
	}
}
