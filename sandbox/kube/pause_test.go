package kube_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sandbox/kube"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// hostPathStorage makes a StorageClass without a provisioner (volumes
// bound when their first Pod is scheduled) and n hostPath
// PersistentVolumes of it under a temporary directory, as a cluster
// without a dynamic provisioner offers storage; the test's end deletes
// them and the directory. It returns the class's name.
func hostPathStorage(t *testing.T, cs kubernetes.Interface, n int) string {
	t.Helper()
	ctx := context.Background()
	name := "sbxt-" + randomHex(4)
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &wait,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var pvs []string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, pv := range pvs {
			_ = cs.CoreV1().PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{})
		}
		_ = cs.StorageV1().StorageClasses().Delete(ctx, name, metav1.DeleteOptions{})
	})
	for i := range n {
		path := filepath.Join(dir, "pv"+randomHex(2))
		// The sandbox's uid writes it (hostPath volumes get no fsGroup).
		if err := os.Mkdir(path, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o777); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + string(rune('a'+i))},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              name,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pvs = append(pvs, pv.Name)
	}
	return name
}

// scopePods lists the Pods of the namespace that are not being deleted.
func scopePods(t *testing.T, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: kube.LabelScope})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	return out
}

// TestPauseKeepsWorkspace pauses a sandbox whose workspace is a claim (its
// Pod deleted, shown by the API), with a command running, and resumes it:
// the command ends saying the sandbox was paused, List shows the paused
// sandbox with no Pod, and the file written before is there again, byte
// for byte, in the new Pod. Remove deletes the claim.
func TestPauseKeepsWorkspace(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	cfg := testConfig(kc, ns)
	cfg.Sandbox.Kubernetes.WorkspaceStorageClass = hostPathStorage(t, cs, 1)
	d := newDaemon(t, cfg, filepath.Join(t.TempDir(), "cursors.json"))
	const agent = "pauser"
	scope := kube.Scope{AgentID: agent}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	r, err := d.mgr.Exec(ctx, api.ExecParams{Host: "sandbox", AgentID: agent, Security: "full",
		Command: "head -c 65536 /dev/urandom > /workspace/data && printf 'a\\000b\\r\\n\\377' >> /workspace/data && echo written"})
	if err != nil || r.Details.Status != api.StatusCompleted {
		t.Fatalf("write: %v %+v", err, r)
	}
	dump := func() string {
		t.Helper()
		pod := d.e.PodOf(scope)
		out, code, err := d.e.Exec(ctx, pod, []string{"od", "-An", "-tx1", "-v", "/workspace/data"})
		if err != nil || code != 0 {
			t.Fatalf("od in %s: %v (exit %d) %q", pod, err, code, out)
		}
		return out
	}
	before := dump()
	if n := len(strings.Fields(before)); n != 65536+6 {
		t.Fatalf("the file has %d bytes, want %d", n, 65536+6)
	}
	first := d.e.PodOf(scope)
	id := startBackground(t, d, agent, "echo started; sleep 120", "started")

	if err := d.e.Pause(ctx, scope); err != nil {
		t.Fatal(err)
	}
	if pods := scopePods(t, cs, ns); len(pods) != 0 {
		t.Fatalf("after Pause the API still has the sandbox pods %v", pods)
	}
	res, _ := waitEnded(t, d, agent, id, 10*time.Second)
	if res.Details.Status != api.StatusFailed || !strings.Contains(res.Details.Reason+res.Content[0].Text, "paused") {
		t.Errorf("the running command: status %q reason %q text %q, want failed saying the sandbox was paused", res.Details.Status, res.Details.Reason, res.Content[0].Text)
	}
	list, err := d.e.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !list[0].Paused || list[0].Pod != "" || list[0].Claim == "" || list[0].AgentID != agent || list[0].PausedAt.IsZero() {
		t.Fatalf("List while paused: %+v, want one paused sandbox of %q with a claim and no pod", list, agent)
	}
	claim := list[0].Claim

	if err := d.e.Resume(ctx, scope); err != nil {
		t.Fatal(err)
	}
	second := d.e.PodOf(scope)
	if second == "" || second == first {
		t.Fatalf("after Resume the pod is %q (before: %q), want a new one", second, first)
	}
	if after := dump(); after != before {
		t.Fatalf("the workspace file changed across pause and resume (%d -> %d fields)", len(strings.Fields(before)), len(strings.Fields(after)))
	}
	list, err = d.e.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Paused || list[0].Pod != second || list[0].Claim != claim {
		t.Fatalf("List after Resume: %+v", list)
	}
	c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Annotations[kube.AnnotationPausedAt]; ok {
		t.Errorf("the claim is still marked paused after Resume: %v", c.Annotations)
	}
	// Paused again, the agent's next command resumes it, in the same
	// workspace.
	if err := d.e.Pause(ctx, scope); err != nil {
		t.Fatal(err)
	}
	if pods := scopePods(t, cs, ns); len(pods) != 0 {
		t.Fatalf("after the second Pause the API still has the sandbox pods %v", pods)
	}
	r, err = d.mgr.Exec(ctx, api.ExecParams{Host: "sandbox", AgentID: agent, Security: "full", Command: "wc -c < /workspace/data"})
	// (The first command of a new Pod carries the NetworkPolicy warning.)
	if err != nil || r.Details.Status != api.StatusCompleted || !strings.HasSuffix(strings.TrimSpace(r.Content[0].Text), "\n65542") {
		t.Fatalf("wc in the paused sandbox: %v %+v", err, r)
	}
	if list, err := d.e.List(ctx); err != nil || len(list) != 1 || list[0].Paused || list[0].Pod == "" {
		t.Fatalf("List after a command resumed it: %+v %v", list, err)
	}

	if err := d.e.Remove(ctx, scope); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claim %s is still there a minute after Remove (%v)", claim, err)
		}
	}
}

// TestPauseNeedsStorageClass: a sandbox whose workspace is an emptyDir is
// not paused (its files would go with the Pod): a clear
// FailedPrecondition, and the Pod still runs.
func TestPauseNeedsStorageClass(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	d := newDaemon(t, testConfig(kc, ns), filepath.Join(t.TempDir(), "cursors.json"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scope := kube.Scope{AgentID: "nopause"}
	sb, err := d.e.Ensure(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	err = d.e.Pause(ctx, scope)
	if !errors.Is(err, cerrdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "workspaceStorageClass") {
		t.Fatalf("Pause = %v, want a FailedPrecondition naming sandbox.kubernetes.workspaceStorageClass", err)
	}
	if p := d.e.PodOf(scope); p != sb.Pod {
		t.Fatalf("after the refused Pause the pod is %q, want %q still", p, sb.Pod)
	}
}

// engineGoroutines counts the goroutines running the Engine's code or
// client-go's watches and streams (the informers, the attach streams).
func engineGoroutines() (int, string) {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	var which []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sandboxctl/sandbox/kube.") || strings.Contains(g, "k8s.io/client-go/tools/cache.") ||
			strings.Contains(g, "sandboxctl/sandbox/supervisor.") || strings.Contains(g, "client-go/tools/remotecommand.") {
			n++
			which = append(which, g)
		}
	}
	return n, strings.Join(which, "\n\n")
}

// TestCloseEndsGoroutines: Close stops the Pod and Node watches, the warm
// pool and the supervisor connections, and every goroutine of theirs ends
// (a daemon that shuts down leaves none behind).
func TestCloseEndsGoroutines(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	cfg := testConfig(kc, ns)
	before, _ := engineGoroutines()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := kube.New(ctx, kube.Options{Config: cfg.Sandbox, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	e.StartPool(context.Background(), 1) // stopped by Close, not by its ctx
	st, err := e.Start(ctx, kube.StartSpec{Scope: kube.Scope{AgentID: "closer"}, OpenSpec: supervisor.OpenSpec{ID: "c1", Argv: []string{"sleep", "60"}}})
	if err != nil {
		t.Fatal(err)
	}
	if running, _ := engineGoroutines(); running <= before {
		t.Fatalf("%d engine goroutines with a watch, a pool and a command running (%d before): the check sees nothing", running, before)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	_ = st
	// 40 s: a supervisor connection Close cuts short while client-go is
	// still making its streams (the warm pool connecting ahead) leaves
	// client-go's goroutine waiting for the API server's reply, which
	// spdystream bounds at 30 s and no context reaches (seen in CI: one
	// goroutine in spdystream.(*Stream).WaitTimeout 15 s after Close). A
	// goroutine of ours that Close does not end is still caught.
	const grace = 40 * time.Second
	for deadline := time.Now().Add(grace); ; time.Sleep(100 * time.Millisecond) {
		n, which := engineGoroutines()
		if n <= before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d engine goroutines %s after Close (%d before):\n%s", n, grace, before, which)
		}
	}
}
