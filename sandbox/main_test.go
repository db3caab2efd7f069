package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
)

// testLabel marks every container the tests of this package create, so
// TestMain can sweep what a crashed run left behind.
const testLabel = "sandboxctl.test"

// testRunLabel tells this run's containers from those of a run going on
// at the same time (another engineer's): the sweep takes only its own.
const testRunLabel = testLabel + ".run"

// testRunEnv carries this run's value of testRunLabel to the test binary's
// own helper processes (they create containers of the same run).
const testRunEnv = "SANDBOXCTL_TEST_RUN"

// testRun is this run's value of testRunLabel.
func testRun() string { return os.Getenv(testRunEnv) }

// testLabels are the labels of a container of this run, plus extra pairs.
func testLabels(extra ...string) map[string]string {
	l := map[string]string{testLabel: "sandbox-pkg", testRunLabel: testRun()}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// testImage is the busybox image built by `make images` (images/build.sh).
var testImage = envOr("SANDBOXCTL_TEST_IMAGE", "sandboxctl/testbb:1")

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	if testRun() == "" {
		_ = os.Setenv(testRunEnv, strconv.Itoa(os.Getpid()))
	}
	cleanup := setupSupervisor() // supervised_test.go: builds the binary, sets SANDBOXCTL_SUPERVISOR
	code := m.Run()
	sweep()
	cleanup()
	os.Exit(code)
}

// sweep removes every container labelled by this package's tests.
func sweep() {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", testRunLabel+"="+testRun())})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
	// Egress networks (and their fences) and the upstreams' networks.
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", testRunLabel+"="+testRun())})
	if err != nil {
		return
	}
	for _, n := range nets.Items {
		_, _ = cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		if b := n.Options[bridgeOption]; b != "" && n.Labels[LabelEgress] != "" {
			_ = unfenceEgress(b)
		}
	}
}

// requireDocker fails the test when no Engine answers or the test image
// is missing (internal/dockertest).
func requireDocker(t *testing.T) {
	t.Helper()
	dockertest.Require(t, testImage)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newTestManager returns a Manager on the test image with its own prefix,
// state dir and workspace root; every container it makes is removed at the
// end of the test.
func newTestManager(t *testing.T, mutate func(*Config)) *Manager {
	t.Helper()
	return newManagerOpts(t, func(o *Options) {
		if mutate != nil {
			mutate(&o.Config)
			o.Labels[testLabel+".prefix"] = o.Config.Docker.ContainerPrefix
		}
	})
}

func listAllWithPrefix(prefix string) client.ContainerListOptions {
	return client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("name", prefix)}
}
