package sandboxctl_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl/inprocess"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl/internal/lifecycle"
)

const testImage = "sandboxctl/testbb:1"

// daemonImage is built from this tree for this run of the tests (a tag of
// its own, removed at the end), so the container mode tests this code.
var daemonImage string

func TestMain(m *testing.M) {
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	code := m.Run()
	if daemonImage != "" {
		_ = exec.Command("docker", "image", "rm", daemonImage).Run()
	}
	os.Exit(code)
}

// requireDaemonImage builds the daemon image once per package run with
// images/build.sh.
func requireDaemonImage(t *testing.T) string {
	t.Helper()
	img, err := buildDaemonImage()
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// buildDaemonImage builds the daemon image of this tree under a tag of
// this package run, once.
func buildDaemonImage() (string, error) {
	if daemonImage != "" {
		return daemonImage, nil
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "images", "build.sh")
	tag := fmt.Sprintf("sandboxctl/sandboxctld:test-%d", time.Now().UnixNano())
	cmd := exec.Command(script, "daemon")
	cmd.Env = append(os.Environ(), "DAEMON_IMAGE="+tag)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("images/build.sh daemon: %w\n%s", err, out)
	}
	daemonImage = tag
	return tag, nil
}

// inContainer is sandboxctl.Run of img with the module's options only, the
// shape of inprocess.Run, for tests that run both modes.
func inContainer(img string) func(context.Context, ...sandboxctl.Option) (*sandboxctl.Sandbox, error) {
	return func(ctx context.Context, opts ...sandboxctl.Option) (*sandboxctl.Sandbox, error) {
		all := make([]testcontainers.ContainerCustomizer, len(opts))
		for i, o := range opts {
			all[i] = o
		}
		return sandboxctl.Run(ctx, img, all...)
	}
}

// TestContainerModeSandboxLifecycle: the daemon in a container, reached
// over TLS with a token; see lifecycle.Check (the daemon container is the
// run's second container).
func TestContainerModeSandboxLifecycle(t *testing.T) {
	cli := dockertest.Require(t, testImage)
	img := requireDaemonImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := inContainer(img)(ctx, lifecycle.Options(testImage)...)
	if err != nil {
		t.Fatal(err)
	}
	lifecycle.Check(ctx, t, cli, sb, 1)
}

// TestContainerModeRefusesBadInput: the daemon's 400 comes back as an
// *APIError of class invalid argument, and a missing daemon image is
// named.
func TestContainerModeRefusesBadInput(t *testing.T) {
	dockertest.Require(t, testImage)
	img := requireDaemonImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := sandboxctl.Run(ctx, img, sandboxctl.WithImage(testImage), sandboxctl.WithTB(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sb.Exec(ctx, sandboxctl.ExecParams{Command: "true", Host: "moon"})
	var apiErr *sandboxctl.APIError
	if !errors.As(err, &apiErr) || !errors.Is(err, cerrdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "host") {
		t.Fatalf("exec on host moon: %v, want a 400 naming host", err)
	}

	// A daemon image that is not built is named, with how to build it,
	// and never pulled from a registry (no pull is attempted: none is
	// reachable here, and the error is the Engine's not-found).
	_, err = sandboxctl.Run(ctx, "sandboxctl/no-such-daemon:0")
	if err == nil || !strings.Contains(err.Error(), "sandboxctl/no-such-daemon:0") || !strings.Contains(err.Error(), "images/build.sh daemon") || !cerrdefs.IsNotFound(err) {
		t.Fatalf("missing daemon image: %v", err)
	}
}

// TestContainerModeGateway: on the gateway host the commands run in the
// daemon container, and files are copied there. The command reads and
// writes root's files in /tmp, so it runs as the daemon's user, without
// the gateway envelope (exec.envelope.enabled false).
func TestContainerModeGateway(t *testing.T) {
	dockertest.Require(t, testImage)
	img := requireDaemonImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := sandboxctl.Run(ctx, img, sandboxctl.WithHost("gateway"), sandboxctl.WithTB(t),
		sandboxctl.WithConfigYAML([]byte("exec:\n  security: full\n  ask: \"off\"\n  envelope:\n    enabled: false\n")))
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.CopyToContainer(ctx, []byte("6 7\n"), "/tmp/in.txt", 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: "read a b < /tmp/in.txt; echo $((a*b)) > /tmp/out.txt; cat /proc/1/cmdline | tr '\\0' ' '"})
	if err != nil || !lifecycle.ExitedZero(res) || !strings.Contains(fmt.Sprint(*res.Details.Aggregated), "serve --listen 127.0.0.1:") {
		t.Fatalf("gateway exec: %v %v", err, res)
	}
	rc, err := sb.CopyFileFromContainer(ctx, "/tmp/out.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "42\n" {
		t.Fatalf("copied out %q", b)
	}
}

// TestSupervisorOff: WithSupervisor(false) keeps sandboxes on the plain
// Engine exec path in both modes (no supervisor label on the container),
// and the command results carry no warning about it.
func TestSupervisorOff(t *testing.T) {
	cli := dockertest.Require(t, testImage)
	img := requireDaemonImage(t)
	for name, run := range map[string]func(context.Context, ...sandboxctl.Option) (*sandboxctl.Sandbox, error){
		"inprocess": inprocess.Run, "container": inContainer(img),
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			sb, err := run(ctx, sandboxctl.WithImage(testImage), sandboxctl.WithSupervisor(false), sandboxctl.WithTB(t))
			if err != nil {
				t.Fatal(err)
			}
			res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: "echo plain"})
			if err != nil || !lifecycle.ExitedZero(res) || res.Details.Warnings != nil {
				t.Fatalf("exec: %v %v", err, res)
			}
			ex, err := sb.Explain(ctx)
			if err != nil {
				t.Fatal(err)
			}
			insp, err := cli.ContainerInspect(ctx, ex.Name, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := insp.Container.Config.Labels["sandboxctl.supervisor"]; ok {
				t.Fatalf("supervisor off, but the sandbox has sandboxctl.supervisor=%s", v)
			}
		})
	}
}

// TestContainerModeEndpoint: a test points its own clients at the daemon
// of container mode (its URL, token and certificate): sandboxctl's HTTP
// API and the MCP endpoint answer them; without the token they refuse.
// testcontainers-go's own options given to Run reach the daemon
// container.
func TestContainerModeEndpoint(t *testing.T) {
	cli := dockertest.Require(t, testImage)
	img := requireDaemonImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := sandboxctl.Run(ctx, img, sandboxctl.WithImage(testImage), sandboxctl.WithTB(t),
		testcontainers.WithLabels(map[string]string{"sandboxctl.test.generic": "daemon-only"}))
	if err != nil {
		t.Fatal(err)
	}
	ep, err := sb.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	hc := ep.HTTPClient()
	post := func(c *http.Client, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(hc, "/v1/tools/exec", `{"command":"echo own-client","agentId":"test"}`); code != 200 || !strings.Contains(body, "own-client") {
		t.Fatalf("exec through the endpoint: %d %s", code, body)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if code, body := post(hc, "/mcp", initialize); code != 200 || !strings.Contains(body, `"serverInfo"`) || !strings.Contains(body, "sandboxctl") {
		t.Fatalf("MCP initialize through the endpoint: %d %s", code, body)
	}
	noToken := &http.Client{Transport: &http.Transport{TLSClientConfig: ep.TLSConfig()}}
	if code, _ := post(noToken, "/v1/tools/exec", `{"command":"true"}`); code != http.StatusUnauthorized {
		t.Fatalf("exec without the token: %d", code)
	}

	// The generic option labelled the daemon container, and only it.
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "sandboxctl.test.generic=daemon-only", sandboxctl.LabelRun+"="+sb.Settings().RunID())})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || !strings.Contains(list.Items[0].Image, "sandboxctld") {
		t.Fatalf("containers with the generic label: %+v", list.Items)
	}
}
