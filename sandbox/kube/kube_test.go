package kube_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sandbox/kube"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/hosttest"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// cluster is the test cluster's kubeconfig (scripts/k8s/test.sh sets it);
// the tests skip without one (`make test` runs them beside the others,
// through test-k8s).
func cluster(t *testing.T) string {
	t.Helper()
	kc := os.Getenv("SANDBOXCTL_TEST_KUBECONFIG")
	if kc == "" {
		t.Skip("no Kubernetes cluster: run `make test-k8s` (SANDBOXCTL_TEST_KUBECONFIG unset)")
	}
	return kc
}

func clientset(t testing.TB, kc string) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// namespace creates a namespace for one test and deletes it (with its
// Pods) at the end.
func namespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	ns := "sbxt-" + randomHex(4)
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		grace := int64(0)
		_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	return ns
}

// testConfig is the daemon config of the tests: sandbox host, no
// approvals, the busybox test image, Pods small enough for a 2-core node.
func testConfig(kc, ns string) config.File {
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "sandbox", "full", "off"
	cfg.Sandbox.Docker.Image = "sandboxctl/testbb:1"
	cfg.Sandbox.Docker.Memory, cfg.Sandbox.Docker.MemorySwap, cfg.Sandbox.Docker.CPUs = "256m", "256m", 0.2
	k := &cfg.Sandbox.Kubernetes
	k.Enabled, k.Kubeconfig, k.Namespace = true, kc, ns
	// The test cluster's bridge CNI enforces no NetworkPolicy
	// (TestNetworkPolicyRequireRefuses shows the refusal).
	k.NetworkPolicy = "unenforced"
	return cfg
}

// daemon is one daemon as `serve` builds it with
// sandbox.kubernetes.enabled: the Kubernetes engine behind a
// sandbox.Manager (kube.Backend), and the sessions Manager whose sandbox
// host is the sandbox.Manager's.
type daemon struct {
	e   *kube.Engine
	m   *sandbox.Manager
	mgr *sessions.Manager
}

// newDaemon starts a daemon whose state directory is cursors' (a
// restarted daemon shares it).
func newDaemon(t testing.TB, cfg config.File, cursors string) daemon {
	t.Helper()
	return newDaemonLogf(t, cfg, cursors, t.Logf)
}

// newDaemonLogf is newDaemon with the Engine's log going to logf.
func newDaemonLogf(t testing.TB, cfg config.File, cursors string, logf func(string, ...any)) daemon {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := kube.New(ctx, kube.Options{Config: cfg.Sandbox, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sandbox.NewManager(ctx, sandbox.Options{Config: cfg.Sandbox, StateDir: filepath.Dir(cursors), Backend: kube.NewBackend(e, cfg.Sandbox), Logf: t.Logf})
	if err != nil {
		_ = e.Close()
		t.Fatal(err)
	}
	mgr, err := sessions.New(sessions.Options{Config: cfg, Hosts: map[vocab.Host]sessions.Host{"sandbox": sessions.NewSandboxHost(m)}, CursorFile: cursors})
	if err != nil {
		_ = m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = mgr.Close(c)
		_ = m.Close()
	})
	return daemon{e: e, m: m, mgr: mgr}
}

// inspect runs a command in the scope's Pod through the exec API, outside
// the supervisor.
func inspect(e *kube.Engine, s kube.Scope) func(ctx context.Context, command string) (string, error) {
	return func(ctx context.Context, command string) (string, error) {
		pod := e.PodOf(s)
		if pod == "" {
			return "", fmt.Errorf("scope %v has no running pod", s)
		}
		out, code, err := e.Exec(ctx, pod, []string{"sh", "-c", command})
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d", code)
		}
		return out, err
	}
}

// TestKubeConformance runs the Host conformance suite on the Kubernetes
// engine, through the sandbox.Manager as the daemon runs commands: the
// supervisor over the Pod's attach stream, one Pod for every case, and a
// daemon that dies (its tools dropped unclosed, as SIGKILL leaves them)
// and a new one that re-adopts the running command (Manager.Sessions,
// Reattach).
func TestKubeConformance(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	cfg := testConfig(kc, ns)
	cursors := filepath.Join(t.TempDir(), "cursors.json")
	d := newDaemon(t, cfg, cursors)
	const agent = "conformance"
	scope := kube.Scope{AgentID: agent}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.e.Ensure(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sandbox pod %s", sb.Pod)
	restart := func(t *testing.T) hosttest.Tools {
		d2 := newDaemon(t, cfg, cursors)
		if _, err := d2.mgr.Recover(context.Background()); err != nil {
			t.Fatalf("Recover: %v", err)
		}
		return d2.mgr
	}
	hosttest.Run(t, func(t *testing.T) hosttest.Target {
		return hosttest.Target{
			Tools: d.mgr, Restart: restart, Host: "sandbox",
			AgentID: agent, SessionKey: "s-" + strings.ReplaceAll(t.Name(), "/", "-"),
			Scratch: kube.Workspace, Inspect: inspect(d.e, scope),
		}
	})
}
