package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestKubeSandboxesHTTP drives the sandboxes and files API of a real
// daemon whose sandboxes are Pods (sandbox.kubernetes.enabled) on the test
// cluster: create, list, a file written through the files API and read by
// a command, extend, a snapshot (501: the Kubernetes engine has none) and
// removal, each checked against the cluster's Pods.
func TestKubeSandboxesHTTP(t *testing.T) {
	kc := os.Getenv("SANDBOXCTL_TEST_KUBECONFIG")
	if kc == "" {
		t.Skip("no Kubernetes cluster: run `make test-k8s` (SANDBOXCTL_TEST_KUBECONFIG unset)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	rnd := make([]byte, 4)
	_, _ = rand.Read(rnd)
	ns := "sbxh-" + hex.EncodeToString(rnd)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		grace := int64(0)
		_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})

	e := newEnv(t)
	cfg := fmt.Sprintf(`exec:
  host: sandbox
  security: full
  ask: "off"
sandbox:
  docker:
    image: sandboxctl/testbb:1
    memory: 256m
    memorySwap: 256m
    cpus: 0.2
  kubernetes:
    enabled: true
    kubeconfig: %s
    namespace: %s
    networkPolicy: unenforced
`, kc, ns)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveTCPArgs(t, e, nil, "SANDBOXCTL_TOKEN="+filesToolToken)
	call := func(method, path, contentType string, body []byte) (int, []byte) {
		t.Helper()
		return filesCall(t, base, filesToolToken, method, path, contentType, body)
	}

	code, body := call("POST", "/v1/sandboxes", "application/json", jsonBody(map[string]any{"agentId": "kalpha", "labels": map[string]string{"team": "k8s"}, "ttlSeconds": 3600}))
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/sandboxes: %d %s", code, body)
	}
	sb := decodeInto[sandboxObject](t, "POST", body)
	if sb.ID == "" || sb.State != "running" || sb.Labels["team"] != "k8s" || time.Until(sb.ExpiresAt) < 50*time.Minute {
		t.Fatalf("created: %+v", sb)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, sb.ID, metav1.GetOptions{}); err != nil {
		t.Fatalf("the created sandbox's Pod %s: %v", sb.ID, err)
	}
	code, body = call("GET", "/v1/sandboxes", "", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"id":"`+sb.ID+`"`) || !strings.Contains(string(body), `"engine":"kubernetes"`) {
		t.Fatalf("GET /v1/sandboxes: %d %s", code, body)
	}

	const content = "from the files API"
	q := url.Values{"agent": {"kalpha"}, "path": {"/workspace/k.txt"}}.Encode()
	if code, body := call("PUT", "/v1/files?"+q, "application/octet-stream", []byte(content)); code/100 != 2 {
		t.Fatalf("PUT /v1/files: %d %s", code, body)
	}
	if code, body := call("GET", "/v1/files?"+q, "", nil); code != http.StatusOK || string(body) != content {
		t.Fatalf("GET /v1/files: %d %q", code, body)
	}
	code, body = call("POST", "/v1/tools/exec", "application/json", jsonBody(map[string]any{"command": "cat /workspace/k.txt; hostname", "agentId": "kalpha"}))
	if code != http.StatusOK || !strings.Contains(string(body), content) || !strings.Contains(string(body), sb.ID) {
		t.Fatalf("exec in the sandbox: %d %s", code, body)
	}

	code, body = call("POST", "/v1/sandboxes/"+sb.Name+"/timeout", "application/json", jsonBody(map[string]any{"ttlSeconds": 7200}))
	if ext := decodeInto[sandboxObject](t, "timeout", body); code != http.StatusOK || time.Until(ext.ExpiresAt) < 110*time.Minute {
		t.Fatalf("POST timeout: %d %s", code, body)
	}
	if code, body := call("POST", "/v1/sandboxes/"+sb.Name+"/snapshots", "application/json", jsonBody(map[string]any{"name": "s1"})); code != http.StatusNotImplemented || !strings.Contains(string(body), "kubernetes") {
		t.Fatalf("POST snapshots: %d %s, want 501 naming the engine", code, body)
	}

	// The CLI reaches the same Pods (its own Manager over the engine).
	if r := e.run(t, "sandbox", "ls", "--format", "{{.FullID}} {{.Agent}}"); r.code != 0 || strings.TrimSpace(r.stdout) != sb.ID+" kalpha" {
		t.Fatalf("sandbox ls: %+v", r)
	}
	if r := e.run(t, "--json", "sandbox", "explain", "--agent", "kalpha"); r.code != 0 || !strings.Contains(r.stdout, `"engine": "kubernetes"`) || !strings.Contains(r.stdout, sb.ID) {
		t.Fatalf("sandbox explain: %+v", r)
	}
	r := e.run(t, "--json", "sandbox", "create", "--agent", "kbeta", "--label", "team=cli", "--ttl", "1h")
	if r.code != 0 {
		t.Fatalf("sandbox create: %+v", r)
	}
	beta := decodeInto[sandboxObject](t, "sandbox create", []byte(r.stdout))
	if beta.Labels["team"] != "cli" || time.Until(beta.ExpiresAt) < 50*time.Minute {
		t.Fatalf("sandbox create: %+v", beta)
	}
	if r := e.run(t, "sandbox", "snapshot", "kbeta", "--name", "s1"); r.code == 0 || !strings.Contains(r.stderr, "not supported by the kubernetes sandbox engine") {
		t.Fatalf("sandbox snapshot: %+v", r)
	}
	if r := e.run(t, "sandbox", "rm", "--agent", "kbeta"); r.code != 0 {
		t.Fatalf("sandbox rm: %+v", r)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, beta.ID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the CLI-made sandbox's Pod after sandbox rm: %v", err)
	}

	if code, body := call("DELETE", "/v1/sandboxes/"+sb.Name, "", nil); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, sb.ID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the sandbox's Pod after DELETE: %v", err)
	}
	if code, body := call("GET", "/v1/sandboxes/"+sb.Name, "", nil); code != http.StatusNotFound {
		t.Fatalf("GET a removed sandbox: %d %s", code, body)
	}
}
