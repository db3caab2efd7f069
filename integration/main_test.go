package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
)

// testLabel marks every container these tests create (directly, or through a
// sandboxctl the tests configure with it), so TestMain can sweep leftovers.
const testLabel = "sandboxctl.test"

const (
	testImage    = "sandboxctl/testbb:1"
	sandboxImage = "sandboxctl/sandbox:bookworm"
)

// binDir holds the sandboxctl binaries built once for the whole package.
var binDir string

func TestMain(m *testing.M) {
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	dir, err := os.MkdirTemp("", "sandboxctl-integration-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// The supervisor goes next to the sandboxctl binaries (where the daemon
	// looks for it) and into SANDBOXCTL_SUPERVISOR for in-process managers.
	bins, err := testbuild.Build(dir, "sandboxctl-supervisor")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("SANDBOXCTL_SUPERVISOR", bins[0])
	code := m.Run()
	sweep()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sweep removes every container labelled by these tests.
func sweep() {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", testLabel+"=integration")})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
	// Daemons under test create sandboxes named sbxi-… without the test
	// label (their config has no labels).
	removeByPrefix(cli, "sbxi-")
}

// requireDocker fails the test when no Engine answers or an image is
// missing (internal/dockertest), and returns a client of the Engine.
func requireDocker(t *testing.T, images ...string) *client.Client {
	t.Helper()
	return dockertest.Require(t, images...)
}

// buildBinary builds ./cmd/<name> once per package run; sandboxctl comes
// with the sandboxctld it hands the runtime commands to.
func buildBinary(t *testing.T, name string) string {
	t.Helper()
	if name == "sandboxctl" {
		buildBinary(t, "sandboxctld")
	}
	out := filepath.Join(binDir, name)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	if _, err := testbuild.Build(binDir, name); err != nil {
		t.Fatal(err)
	}
	return out
}

// randSuffix is a short unique-enough suffix for container name prefixes.
func randSuffix() string {
	return fmt.Sprintf("%06x", time.Now().UnixNano()&0xffffff)
}
