package main_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// serveFiles starts a daemon on TCP with the supervisor built for this
// test and extra serve flags; it returns the base URL.
func serveFiles(t *testing.T, e *env, args ...string) string {
	t.Helper()
	sup, err := testbuild.Package(t.TempDir(), "cmd/sandboxctl-supervisor")
	if err != nil {
		t.Fatal(err)
	}
	return serveTCPArgs(t, e, args, "SANDBOXCTL_TOKEN="+filesToolToken, "SANDBOXCTL_SUPERVISOR="+sup)
}

const (
	filesToolToken  = "files-tool-token-0123456789"
	filesAliceToken = "files-alice-token-0123456789"
)

func filesEnv(t *testing.T) (*env, string, string) {
	t.Helper()
	cli := dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	e := newEnv(t)
	prefix := fmt.Sprintf("sbxf-%d-", time.Now().UnixNano()%1e6)
	// Registered first, so it runs last: after the daemon stopped, every
	// sandbox the test made is gone, whatever the test removed itself.
	t.Cleanup(func() { removeContainersNamed(cli, prefix) })
	cfg := fmt.Sprintf("previews:\n  enabled: true\nsandbox:\n  workspaceRoot: %s\n  docker:\n    containerPrefix: %s\n", filepath.Join(e.state, "ws"), prefix)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	alice := fmt.Sprintf("alice%d", time.Now().UnixNano()%1e6)
	if err := os.WriteFile(filepath.Join(e.state, "agent-tokens.json"), []byte(`{"`+alice+`":"`+filesAliceToken+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return e, alice, "bob" + alice
}

// removeContainersNamed removes every sandboxctl container whose name
// starts with prefix.
func removeContainersNamed(cli *client.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "sandboxctl.managed=1").Add("name", "^/"+prefix)})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
}

func filesCall(t *testing.T, base, token, method, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestFilesCpAndHTTP moves files through a real daemon and sandbox: the
// cp command in docker cp syntax (directories, renames, tar on stdout,
// progress), the HTTP files API (tmpfs paths, stat, list, delete), the size
// limit, and an agent token that reaches only its own agent's sandbox.
func TestFilesCpAndHTTP(t *testing.T) {
	e, alice, bob := filesEnv(t)
	base := serveFiles(t, e, "--files-max-bytes", "100000")
	t.Cleanup(func() {
		e.run(t, "sandbox", "rm", "--agent", alice)
		e.run(t, "sandbox", "rm", "--agent", bob)
	})

	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(src, "a.txt"), []byte("alpha\n"), 0o644)
	_ = os.WriteFile(filepath.Join(src, "sub", "b.txt"), []byte("beta\n"), 0o600)
	// cp to a scope with no sandbox is an error naming it, and makes none.
	if r := e.run(t, "cp", src, alice+":/workspace/src"); r.code == 0 || !strings.Contains(r.stderr, "no sandbox for scope agent:"+alice) {
		t.Fatalf("cp to a scope with no sandbox: %+v", r)
	}
	if r := e.run(t, "sandbox", "ls"); strings.Contains(r.stdout, alice) {
		t.Fatalf("cp to a scope with no sandbox made one: %s", r.stdout)
	}
	if r := e.run(t, "exec", "--agent", alice, "--host", "sandbox", "--", "true"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	if r := e.run(t, "cp", "--progress", src, alice+":/workspace/src"); r.code != 0 || !strings.Contains(r.stderr, "MiB") {
		t.Fatalf("cp upload: %+v", r)
	}
	if r := e.run(t, "exec", "--agent", alice, "--host", "sandbox", "--", "cat /workspace/src/a.txt /workspace/src/sub/b.txt"); r.code != 0 || r.stdout != "alpha\nbeta\n" {
		t.Fatalf("uploaded files in the sandbox: %+v", r)
	}
	// Download a directory under a new name, and a file as a tar stream.
	dst := filepath.Join(t.TempDir(), "copy")
	if r := e.run(t, "cp", alice+":/workspace/src", dst); r.code != 0 || r.stderr != "" {
		t.Fatalf("cp download: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sub", "b.txt")); err != nil || string(b) != "beta\n" {
		t.Fatalf("downloaded tree: %q %v", b, err)
	}
	r := e.run(t, "cp", alice+":/workspace/src/a.txt", "-")
	tr := tar.NewReader(strings.NewReader(r.stdout))
	hdr, err := tr.Next()
	if r.code != 0 || err != nil || hdr.Name != "a.txt" {
		t.Fatalf("cp to -: %v %+v", err, r)
	}
	if b, _ := io.ReadAll(tr); string(b) != "alpha\n" {
		t.Fatalf("cp to -: content %q", b)
	}
	if r := e.run(t, "cp", alice+":/workspace/nope", dst); r.code == 0 || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("cp of a missing path: %+v", r)
	}
	// A tar stream on stdin goes into the directory.
	cp := exec.Command(binary, "--state", e.state, "--config", e.config, "cp", "-", alice+":/workspace")
	cp.Stdin = strings.NewReader(r.stdout) // the a.txt tar from above
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("cp - : %v %s", err, out)
	}
	if r := e.run(t, "exec", "--agent", alice, "--host", "sandbox", "--", "cat /workspace/a.txt"); r.stdout != "alpha\n" {
		t.Fatalf("cp - did not extract: %+v", r)
	}

	// HTTP with the tool token: a tmpfs path, stat, list, delete.
	q := "?agent=" + alice + "&path=/tmp/h.txt"
	if code, body := filesCall(t, base, filesToolToken, "PUT", "/v1/files"+q+"&mode=0600", "", []byte("over http")); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, body := filesCall(t, base, filesToolToken, "GET", "/v1/files"+q, "", nil); code != 200 || string(body) != "over http" {
		t.Fatalf("GET: %d %q", code, body)
	}
	if code, body := filesCall(t, base, filesToolToken, "GET", "/v1/files/stat"+q, "", nil); code != 200 || !strings.Contains(string(body), `"type":"file"`) || !strings.Contains(string(body), `"mode":384`) {
		t.Fatalf("stat: %d %s", code, body)
	}
	if code, body := filesCall(t, base, filesToolToken, "GET", "/v1/files/list?agent="+alice+"&path=/tmp", "", nil); code != 200 || !strings.Contains(string(body), `"name":"h.txt"`) {
		t.Fatalf("list: %d %s", code, body)
	}
	if code, body := filesCall(t, base, filesToolToken, "DELETE", "/v1/files"+q, "", nil); code != 200 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if code, body := filesCall(t, base, filesToolToken, "GET", "/v1/files"+q, "", nil); code != 404 {
		t.Fatalf("GET after DELETE: %d %s", code, body)
	}
	if code, body := filesCall(t, base, filesToolToken, "GET", "/v1/files?agent="+alice+"&path=tmp/x", "", nil); code != 400 || !strings.Contains(string(body), "not absolute") {
		t.Fatalf("relative path: %d %s", code, body)
	}

	// The size limit: refused with 413 both ways, nothing written.
	big := bytes.Repeat([]byte("x"), 150000)
	if code, body := filesCall(t, base, filesToolToken, "PUT", "/v1/files?agent="+alice+"&path=/workspace/big", "", big); code != 413 || !strings.Contains(string(body), "limit of 100000 bytes") {
		t.Fatalf("PUT over the limit: %d %s", code, body)
	}
	if r := e.run(t, "exec", "--agent", alice, "--host", "sandbox", "--", "test -e /workspace/big || echo absent; head -c 150000 /dev/zero > /workspace/big2"); r.stdout != "absent\n" {
		t.Fatalf("after a refused upload: %+v", r)
	}
	if code, body := filesCall(t, base, filesToolToken, "GET", "/v1/files?agent="+alice+"&path=/workspace/big2", "", nil); code != 413 {
		t.Fatalf("GET over the limit: %d %.200s", code, body)
	}

	// alice's agent token: her own sandbox only.
	if code, body := filesCall(t, base, filesAliceToken, "GET", "/v1/files?path=/workspace/src/a.txt", "", nil); code != 200 || string(body) != "alpha\n" {
		t.Fatalf("pinned GET of her own file: %d %s", code, body)
	}
	for _, method := range []string{"GET", "PUT", "DELETE"} {
		if code, body := filesCall(t, base, filesAliceToken, method, "/v1/files?agent="+bob+"&path=/workspace/x", "", []byte("x")); code != 403 {
			t.Fatalf("pinned %s of bob's sandbox: %d %s", method, code, body)
		}
	}
	if r := e.run(t, "sandbox", "ls"); strings.Contains(r.stdout, bob) {
		t.Fatalf("a refused request made bob's sandbox: %s", r.stdout)
	}

	// The metrics saw the sandbox: created, running under its supervisor.
	code, body := filesCall(t, base, filesToolToken, "GET", "/metrics", "", nil)
	for _, want := range []string{"sandboxctl_sandbox_create_seconds_count 1", `sandboxctl_sandboxes{path="supervisor",state="running"} 1`,
		`sandboxctl_supervisor_fallbacks_total{op="files"} 0`} {
		if code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
