package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"
)

// TestSecuritySandboxCannotResolveApproval replays issue 12 #1 from a
// sandbox: even when the daemon's socket is reachable from inside a
// container (a bind mount no config should allow), a process there —
// root in its container, the daemon's uid 0 when the daemon runs as root —
// cannot decide a pending approval: the daemon sees a peer in another pid
// namespace and answers 403, and the request stays pending.
func TestSecuritySandboxCannotResolveApproval(t *testing.T) {
	requireDocker(t, sandboxImage)
	d := startDaemon(t, "exec:\n  host: gateway\n  security: allowlist\n  ask: on-miss\n")
	dir := t.TempDir()
	details, _, code := d.call(t, "exec", map[string]any{"command": "touch " + filepath.Join(dir, "M"), "workdir": dir})
	if code != http.StatusOK || details["status"] != "approval-pending" {
		t.Fatalf("want approval-pending: %d %v", code, details)
	}
	id := details["approvalId"].(string)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctr, err := testcontainers.Run(ctx, sandboxImage,
		testcontainers.WithCmd("sh", "-c", "echo ready; exec sleep 300"),
		testcontainers.WithLabels(map[string]string{testLabel: "integration"}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.NetworkMode = "none"
			hc.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: filepath.Join(d.state, "sandboxctl.sock"), Target: "/run/sandboxctl.sock"}}
		}),
		testcontainers.WithWaitStrategy(wait.ForLog("ready").WithStartupTimeout(30*time.Second)),
	)
	testcontainers.CleanupContainer(t, ctr, testcontainers.StopTimeout(0))
	if err != nil {
		t.Fatalf("start %s: %v", sandboxImage, err)
	}
	rc, r, err := ctr.Exec(ctx, []string{"curl", "-sS", "-w", "\nHTTP %{http_code}\n", "--unix-socket", "/run/sandboxctl.sock",
		"-X", "POST", "-d", `{"decision":"allow-always"}`, "http://sandboxctl/v1/approvals/" + id}, tcexec.Multiplexed())
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	if rc != 0 || !strings.Contains(string(out), "HTTP 403") || !strings.Contains(string(out), "another pid namespace") {
		t.Fatalf("curl from a container: exit %d, %s; want a 403 naming the pid namespace", rc, out)
	}

	resp, err := d.hc.Get("http://sandboxctl/v1/approvals")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []struct{ ID, Status string }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, a := range list {
		if a.ID == id && a.Status != "pending" {
			t.Fatalf("the container decided the approval: %s", a.Status)
		}
	}
}
