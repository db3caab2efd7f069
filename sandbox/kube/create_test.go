package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sandbox/kube"
	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// missingImage is an image no registry serves: its pull fails at once
// (nothing listens on port 1), so the Pod is stuck in ErrImagePull.
const missingImage = "127.0.0.1:1/sbxt/missing:0"

// liveClaims are the workspace claims of namespace ns not being deleted.
func liveClaims(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	list, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range list.Items {
		if c.DeletionTimestamp == nil {
			out = append(out, c.Name)
		}
	}
	return out
}

// TestKubeCreateFailureLeavesNoClaim: a sandbox whose Pod cannot start (its
// image cannot be pulled) fails its Create and its first command, and
// leaves nothing: no Pod, no workspace claim (which List would show as a
// paused sandbox), the claim gone from the API server.
func TestKubeCreateFailureLeavesNoClaim(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	sc := hostPathStorage(t, cs, 2)
	m, _ := newKubeManager(t, kc, ns, func(c *config.File) {
		c.Sandbox.Kubernetes.WorkspaceStorageClass = sc
		c.Sandbox.Docker.Image = missingImage
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	check := func(what string, err error) {
		t.Helper()
		if !cerrdefs.IsFailedPrecondition(err) {
			t.Fatalf("%s with an image that cannot be pulled: %v, want failed precondition (the pod cannot start)", what, err)
		}
		if c := liveClaims(ctx, t, cs, ns); len(c) != 0 {
			t.Fatalf("workspace claims left after a failed %s: %v", what, c)
		}
		// Its Pod may still be terminating (listed as removing); then
		// nothing: no sandbox listed, no claim on the API server (it goes
		// once its Pod is gone: pvc-protection).
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			list, err := m.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range list {
				if in.State != "removing" {
					t.Fatalf("List after a failed %s: %+v", what, in)
				}
			}
			claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) == 0 && len(claims.Items) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("2 min after a failed %s: listed %+v, claims %d", what, list, len(claims.Items))
			}
		}
	}
	_, err := m.Create(ctx, sandbox.Scope{AgentID: "broken"}, sandbox.CreateOptions{})
	check("Create", err)
	_, err = m.Ensure(ctx, sandbox.Scope{AgentID: "broken-exec"})
	check("Ensure", err)
}

// TestKubeCreateConflicts: Create of a scope whose sandbox is paused (its
// workspace claim, no Pod) is a conflict and leaves it paused. A failed
// resume does not delete the claim of the paused sandbox (its files).
func TestKubeCreateConflicts(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	sc := hostPathStorage(t, cs, 1)
	withClaims := func(c *config.File) { c.Sandbox.Kubernetes.WorkspaceStorageClass = sc }
	m, _ := newKubeManager(t, kc, ns, withClaims)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	s := sandbox.Scope{AgentID: "napper"}
	in, err := m.Create(ctx, s, sandbox.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := m.Pause(ctx, in.Name); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if _, err := m.Create(ctx, s, sandbox.CreateOptions{}); !cerrdefs.IsConflict(err) {
		t.Fatalf("Create of a paused sandbox's scope: %v, want a conflict", err)
	}
	if list, err := m.List(ctx); err != nil || len(list) != 1 || list[0].State != "paused" {
		t.Fatalf("List after the refused Create: %+v %v (want the sandbox still paused)", list, err)
	}
	if pods := scopePods(t, cs, ns); len(pods) != 0 {
		t.Fatalf("the refused Create made pods %v", pods)
	}

	// Another daemon of the namespace whose image cannot be pulled fails
	// to resume it: the claim (the sandbox's files) stays.
	m2, _ := newKubeManager(t, kc, ns, withClaims, func(c *config.File) { c.Sandbox.Docker.Image = missingImage })
	if _, err := m2.Resume(ctx, in.Name); err == nil {
		t.Fatal("Resume with an image that cannot be pulled succeeded")
	}
	if c := liveClaims(ctx, t, cs, ns); len(c) != 1 {
		t.Fatalf("claims after a failed resume: %v, want the paused sandbox's", c)
	}
	// The failed attempt's Pod is deleted: until the watch sees it go, List
	// shows it too, "removing" and not current; nothing else may appear.
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := m.List(ctx)
		if err != nil {
			t.Fatalf("List after a failed resume: %v", err)
		}
		var paused, removing int
		for _, sb := range list {
			switch {
			case sb.State == "paused":
				paused++
			case sb.State == "removing" && !sb.Current:
				removing++
			default:
				t.Fatalf("List after a failed resume: %+v (want the sandbox still paused)", list)
			}
		}
		if paused == 1 && removing == 0 {
			break
		}
		if paused != 1 || time.Now().After(deadline) {
			t.Fatalf("List after a failed resume: %+v (want the sandbox still paused, alone within a minute)", list)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKubeCreateRacesEnsure: a Create racing a command's Ensure of one new
// scope either makes the sandbox (the command then uses it) or is a
// conflict (the command made it), never a success on a sandbox it did not
// make.
func TestKubeCreateRacesEnsure(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	m, _ := newKubeManager(t, kc, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type ensured struct {
		res sandbox.EnsureResult
		err error
	}
	// Rounds on new scopes: the race is a window, not a certainty.
	for i := range 4 {
		r := sandbox.Scope{AgentID: fmt.Sprintf("racer-%d", i)}
		created, ens := make(chan error, 1), make(chan ensured, 1)
		go func() { _, err := m.Create(ctx, r, sandbox.CreateOptions{}); created <- err }()
		go func() { res, err := m.Ensure(ctx, r); ens <- ensured{res, err} }()
		cerr, e := <-created, <-ens
		if e.err != nil {
			t.Fatalf("Ensure racing a Create: %v", e.err)
		}
		switch {
		case cerr == nil && e.res.Created:
			t.Fatalf("round %d: Create succeeded on the sandbox the command's Ensure made", i)
		case cerrdefs.IsConflict(cerr) && !e.res.Created:
			t.Fatalf("round %d: Create was refused and the Ensure did not make the sandbox either", i)
		case cerr != nil && !cerrdefs.IsConflict(cerr):
			t.Fatalf("round %d: Create racing an Ensure: %v", i, cerr)
		}
		t.Logf("round %d: Create: %v; Ensure made it: %v", i, cerr, e.res.Created)
	}
	if pods := scopePods(t, cs, ns); len(pods) != 4 {
		t.Fatalf("pods of the 4 scopes: %v, want one each", pods)
	}
}

// TestKubeRemoveClaimedWarmPod: removing a warm Pod listed before a scope
// claimed it (a Prune acting on an older list) is a conflict and leaves
// the claimed sandbox running; a warm Pod still warm is removed.
func TestKubeRemoveClaimedWarmPod(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	m, b := newKubeManager(t, kc, ns, func(c *config.File) { c.Sandbox.Pool.Size = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	warm := func() sandbox.Info {
		t.Helper()
		if err := m.WaitPool(ctx); err != nil {
			t.Fatal(err)
		}
		list, err := m.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range list {
			if in.Pool == sandbox.PoolReady {
				return in
			}
		}
		t.Fatalf("no warm pod listed: %+v", list)
		return sandbox.Info{}
	}
	stale := warm()
	res, err := m.Ensure(ctx, sandbox.Scope{AgentID: "claimer"})
	if err != nil || res.ID != stale.ID {
		t.Fatalf("Ensure did not claim the warm pod %s: %+v %v", stale.ID, res, err)
	}
	if err := b.Remove(ctx, stale); !cerrdefs.IsConflict(err) {
		t.Fatalf("Remove of the warm pod a scope just claimed: %v, want a conflict", err)
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, stale.ID, metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil || p.Labels[kube.LabelScope] == "" {
		t.Fatalf("the claimed sandbox's pod after the refused Remove: %v (deleting: %v)", err, err == nil && p.DeletionTimestamp != nil)
	}
	if out, code := run(ctx, t, m, sandbox.Scope{AgentID: "claimer"}, nil, "echo", "still here"); code != 0 || out != "still here\n" {
		t.Fatalf("the claimed sandbox: %d %q", code, out)
	}

	// A warm Pod that is still warm goes.
	w := warm()
	if err := b.Remove(ctx, w); err != nil {
		t.Fatalf("Remove of a warm pod: %v", err)
	}
	p, err = cs.CoreV1().Pods(ns).Get(ctx, w.ID, metav1.GetOptions{})
	if err == nil && p.DeletionTimestamp == nil {
		t.Fatalf("the removed warm pod %s is not being deleted", w.ID)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}
