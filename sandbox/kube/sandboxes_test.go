package kube_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sandbox/kube"
	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// newKubeManager is a sandbox.Manager whose engine is the Kubernetes one
// (as the daemon builds it with sandbox.kubernetes.enabled).
func newKubeManager(t *testing.T, kc, ns string, mutate ...func(*config.File)) (*sandbox.Manager, *kube.Backend) {
	t.Helper()
	cfg := testConfig(kc, ns)
	for _, f := range mutate {
		f(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := kube.New(ctx, kube.Options{Config: cfg.Sandbox, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	b := kube.NewBackend(e, cfg.Sandbox)
	m, err := sandbox.NewManager(ctx, sandbox.Options{Config: cfg.Sandbox, StateDir: t.TempDir(), Backend: b, Logf: t.Logf})
	if err != nil {
		_ = e.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, b
}

// run starts argv through the Manager and returns its stdout and exit code.
func run(ctx context.Context, t *testing.T, m *sandbox.Manager, s sandbox.Scope, env []string, argv ...string) (string, int) {
	t.Helper()
	st, err := m.Start(ctx, s, sandbox.ExecOptions{Cmd: argv, Env: env})
	if err != nil {
		t.Fatalf("Start %v: %v", argv, err)
	}
	out, err := io.ReadAll(st.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	code, sig, err := st.Wait(ctx)
	if err != nil || sig != "" {
		t.Fatalf("Wait %v: code %d signal %q: %v", argv, code, sig, err)
	}
	if st.Ensure.Engine != kube.EngineName {
		t.Errorf("Started.Ensure.Engine = %q, want %q", st.Ensure.Engine, kube.EngineName)
	}
	return string(out), code
}

// TestKubeManagerLifecycle drives a sandbox on the Kubernetes engine
// through the sandbox.Manager, the seam every front door (HTTP sandboxes
// and files API, CLI, MCP) uses: create with labels and a TTL, list, get,
// files in and out, exec, extend, what the engine cannot do (501 class),
// TTL expiry and removal, each checked against the cluster's Pods.
func TestKubeManagerLifecycle(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	m, b := newKubeManager(t, kc, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	a := sandbox.Scope{AgentID: "alpha"}
	in, err := m.Create(ctx, a, sandbox.CreateOptions{Labels: map[string]string{"team": "infra"}, TTL: time.Hour})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if in.Engine != kube.EngineName || in.State != "running" || in.AgentID != "alpha" || in.Labels["team"] != "infra" || in.Path != sandbox.PathSupervisor {
		t.Fatalf("Create: %+v", in)
	}
	if d := time.Until(in.ExpiresAt); d < 50*time.Minute || d > 61*time.Minute {
		t.Fatalf("Create: expires in %s, want about 1h", d)
	}
	_, name, _, _ := m.Layout(a)
	if in.Name != name {
		t.Fatalf("Create: name %q, Layout says %q", in.Name, name)
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, in.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's Pod %s: %v", in.ID, err)
	}
	if pod.Annotations[kube.AnnotationAgent] != "alpha" {
		t.Fatalf("Pod annotations %v", pod.Annotations)
	}
	if _, err := m.Create(ctx, a, sandbox.CreateOptions{}); !cerrdefs.IsConflict(err) {
		t.Fatalf("second Create of a scope: %v, want a conflict", err)
	}
	if _, err := m.Create(ctx, sandbox.Scope{AgentID: "tmpl"}, sandbox.CreateOptions{Template: "big"}); err == nil {
		t.Fatal("Create with an unknown template succeeded")
	}

	list, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != in.ID || list[0].Name != in.Name {
		t.Fatalf("List: %+v", list)
	}
	if got, err := m.Get(ctx, in.Name); err != nil || got.ID != in.ID {
		t.Fatalf("Get(%s): %+v, %v", in.Name, got, err)
	}

	// Files: through the supervisor's file tool over the Pod's attach
	// stream; the command sees what the files API wrote.
	const body = "written through the files API\n"
	if err := m.WriteFile(ctx, a, "/workspace/note.txt", 0o640, 1<<20, strings.NewReader(body)); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	fi, err := m.StatFile(ctx, a, "/workspace/note.txt")
	if err != nil || fi.Size != int64(len(body)) || fi.Mode&0o777 != 0o640 {
		t.Fatalf("StatFile: %+v, %v", fi, err)
	}
	fl, err := m.ListFiles(ctx, a, "/workspace")
	if err != nil {
		t.Fatalf("ListFiles: %v", err)
	}
	found := false
	for _, f := range fl.Entries {
		found = found || f.Name == "note.txt"
	}
	if !found {
		t.Fatalf("ListFiles /workspace: %+v", fl)
	}
	var tb bytes.Buffer
	if err := m.ReadFiles(ctx, a, "/workspace/note.txt", 1<<20, &tb); err != nil {
		t.Fatalf("ReadFiles: %v", err)
	}
	tr := tar.NewReader(&tb)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(tr)
	if hdr.Name != "note.txt" || string(got) != body {
		t.Fatalf("ReadFiles: %s %q", hdr.Name, got)
	}
	out, code := run(ctx, t, m, a, []string{"GREETING=hello"}, "sh", "-c", `cat /workspace/note.txt; echo "$GREETING from $(pwd)"; exit 3`)
	if code != 3 || out != body+"hello from /workspace\n" {
		t.Fatalf("exec: code %d output %q", code, out)
	}
	if err := m.RemoveFile(ctx, a, "/workspace/note.txt"); err != nil {
		t.Fatalf("RemoveFile: %v", err)
	}
	if _, err := m.StatFile(ctx, a, "/workspace/note.txt"); !cerrdefs.IsNotFound(err) {
		t.Fatalf("StatFile of a removed file: %v, want not found", err)
	}
	if err := m.WriteFile(ctx, a, "relative.txt", 0o644, 10, strings.NewReader("x")); !cerrdefs.IsInvalidArgument(err) {
		t.Fatalf("WriteFile to a relative path: %v, want invalid argument", err)
	}
	// A scope without a sandbox gets none from the files API.
	if _, err := m.StatFile(ctx, sandbox.Scope{AgentID: "typo"}, "/workspace"); !errors.Is(err, sandbox.ErrNoSandbox) {
		t.Fatalf("StatFile of a scope without a sandbox: %v", err)
	}
	if list, _ := m.List(ctx); len(list) != 1 {
		t.Fatalf("the files API made a sandbox: %+v", list)
	}

	// Extend: the TTL annotation moves.
	ext, err := m.Extend(ctx, in.Name, 2*time.Hour)
	if err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if d := time.Until(ext.ExpiresAt); d < 110*time.Minute || d > 121*time.Minute {
		t.Fatalf("Extend: expires in %s, want about 2h", d)
	}
	if _, err := m.Extend(ctx, in.Name, 0); !cerrdefs.IsInvalidArgument(err) {
		t.Fatalf("Extend by 0: %v", err)
	}

	// What the engine does not do answers ErrNotImplemented naming it.
	for what, err := range map[string]error{
		"Snapshot":  func() error { _, err := m.Snapshot(ctx, a, "s1"); return err }(),
		"Snapshots": func() error { _, err := m.Snapshots(a); return err }(),
		"Fork":      func() error { _, err := m.Fork(ctx, a, "s1", sandbox.Scope{AgentID: "beta"}); return err }(),
		"DialPort":  func() error { _, err := m.DialPort(ctx, a, 8080); return err }(),
	} {
		if !cerrdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), kube.EngineName) {
			t.Errorf("%s: %v, want not implemented, naming the engine", what, err)
		}
	}
	// Pause needs a workspace claim (TestKubeManagerPause).
	if b.Caps().Pause {
		t.Error("Caps: pause without a workspaceStorageClass")
	}
	if _, err := m.Pause(ctx, in.Name); !cerrdefs.IsNotImplemented(err) {
		t.Errorf("Pause: %v, want not implemented", err)
	}

	// A sandbox made by a command, with a TTL that passes: ExpireDue
	// removes its Pod.
	bScope := sandbox.Scope{AgentID: "beta"}
	if out, code := run(ctx, t, m, bScope, nil, "echo", "made by exec"); code != 0 || out != "made by exec\n" {
		t.Fatalf("exec in beta: %d %q", code, out)
	}
	// The files API finds a sandbox a command just made.
	if fi, err := m.StatFile(ctx, bScope, "/workspace"); err != nil || fi.Type != "dir" {
		t.Fatalf("StatFile right after the command that made the sandbox: %+v %v", fi, err)
	}
	_, bName, _, _ := m.Layout(bScope)
	bIn, err := m.Extend(ctx, bName, time.Second)
	if err != nil {
		t.Fatalf("Extend beta: %v", err)
	}
	var expired []sandbox.Info
	for deadline := time.Now().Add(time.Minute); len(expired) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("ExpireDue did not remove beta's sandbox")
		}
		time.Sleep(200 * time.Millisecond)
		if expired, err = m.ExpireDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(expired) != 1 || expired[0].ID != bIn.ID {
		t.Fatalf("ExpireDue: %+v", expired)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, bIn.ID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("beta's Pod after expiry: %v", err)
	}

	// Delete: the Pod goes, and the sandbox is no longer listed.
	del, err := m.Delete(ctx, in.Name, true)
	if err != nil || del.ID != in.ID {
		t.Fatalf("Delete: %+v %v", del, err)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, in.ID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("alpha's Pod after Delete: %v", err)
	}
	if list, err := m.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List after Delete: %+v %v", list, err)
	}
	if _, err := m.Delete(ctx, in.Name, false); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("second Delete: %v, want not found", err)
	}
	if st := m.Engines(); len(st) != 1 || st[0].Name != kube.EngineName || !st[0].Healthy {
		t.Fatalf("Engines: %+v", st)
	}
}

// TestKubeManagerPool: the warm Pods show in the Manager's list as warm
// (no scope), stay through a prune, take no TTL, and the first command of
// a scope claims one.
func TestKubeManagerPool(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	m, _ := newKubeManager(t, kc, ns, func(c *config.File) { c.Sandbox.Pool.Size = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := m.WaitPool(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := m.List(ctx)
	if err != nil || len(list) != 1 || list[0].Pool != sandbox.PoolReady || list[0].AgentID != "" {
		t.Fatalf("List with a warm Pod: %+v %v", list, err)
	}
	warm := list[0]
	if pruned, err := m.Prune(ctx, true); err != nil || len(pruned) != 0 {
		t.Fatalf("Prune would remove the warm Pod: %+v %v", pruned, err)
	}
	if _, err := m.Extend(ctx, warm.ID, time.Hour); !cerrdefs.IsInvalidArgument(err) {
		t.Fatalf("Extend of a warm Pod: %v", err)
	}
	res, err := m.Ensure(ctx, sandbox.Scope{AgentID: "claimer"})
	if err != nil || res.ID != warm.ID {
		t.Fatalf("Ensure did not claim the warm Pod %s: %+v %v", warm.ID, res, err)
	}
	got, err := m.Get(ctx, warm.ID)
	if err != nil || got.Pool != "" || got.AgentID != "claimer" {
		t.Fatalf("the claimed Pod: %+v %v", got, err)
	}
	// Create takes the next warm Pod (the pool refills).
	if err := m.WaitPool(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := m.Create(ctx, sandbox.Scope{AgentID: "creator"}, sandbox.CreateOptions{})
	if err != nil || in.Pool != "" || in.AgentID != "creator" || in.State != "running" {
		t.Fatalf("Create with a warm Pod: %+v %v", in, err)
	}
}

// TestKubeManagerPause pauses and resumes a sandbox through the Manager
// (the sandboxes API's pause and resume) on a workspace claim: the paused
// sandbox is listed with its labels and TTL and no Pod, the resumed one
// runs in a new Pod with its files, and removing a paused sandbox deletes
// its claim. Without a workspaceStorageClass pause is not implemented.
func TestKubeManagerPause(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	sc := hostPathStorage(t, cs, 1)
	m, b := newKubeManager(t, kc, ns, func(c *config.File) { c.Sandbox.Kubernetes.WorkspaceStorageClass = sc })
	if !b.Caps().Pause {
		t.Fatal("Caps: no pause with a workspaceStorageClass")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := sandbox.Scope{AgentID: "sleeper"}
	in, err := m.Create(ctx, s, sandbox.CreateOptions{Labels: map[string]string{"team": "night"}, TTL: time.Hour})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	const body = "kept across a pause\n"
	if err := m.WriteFile(ctx, s, "/workspace/keep.txt", 0o644, 1<<20, strings.NewReader(body)); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	paused, err := m.Pause(ctx, in.Name)
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if paused.State != "paused" || paused.Name != in.Name || paused.Labels["team"] != "night" || !paused.ExpiresAt.Equal(in.ExpiresAt) {
		t.Fatalf("Pause: %+v (created %+v)", paused, in)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, in.ID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Pod of a paused sandbox: %v", err)
	}
	if list, err := m.List(ctx); err != nil || len(list) != 1 || list[0].State != "paused" || list[0].ID != paused.ID {
		t.Fatalf("List with a paused sandbox: %+v %v", list, err)
	}
	resumed, err := m.Resume(ctx, in.Name)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if resumed.State != "running" || resumed.ID == in.ID || resumed.Labels["team"] != "night" || !resumed.ExpiresAt.Equal(in.ExpiresAt) {
		t.Fatalf("Resume: %+v", resumed)
	}
	if out, code := run(ctx, t, m, s, nil, "cat", "/workspace/keep.txt"); code != 0 || out != body {
		t.Fatalf("the file after a pause: %d %q", code, out)
	}
	ext, err := m.Extend(ctx, in.Name, 2*time.Hour)
	if err != nil || time.Until(ext.ExpiresAt) < 110*time.Minute {
		t.Fatalf("Extend: %+v %v", ext, err)
	}
	if _, err := m.Pause(ctx, in.Name); err != nil {
		t.Fatalf("second Pause: %v", err)
	}
	if _, err := m.Delete(ctx, in.Name, true); err != nil {
		t.Fatalf("Delete of a paused sandbox: %v", err)
	}
	if list, err := m.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List after removing the paused sandbox: %+v %v", list, err)
	}
	claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if c.DeletionTimestamp == nil {
			t.Fatalf("claim %s left after Delete", c.Name)
		}
	}
}
