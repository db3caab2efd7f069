package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// The test a platform team would write in its own module: a sandbox for
// the test (in-process and as a daemon container), a command, a file copied
// out, the containers it made seen while it runs.
const externalModuleTest = `package platformtest

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl/inprocess"
)

func check(t *testing.T, run func(context.Context, ...sandboxctl.Option) (*sandboxctl.Sandbox, error), opts ...sandboxctl.Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	label := os.Getenv("CHECK_LABEL")
	sb, err := run(ctx, append(opts, sandboxctl.WithTB(t), sandboxctl.WithImage(os.Getenv("CHECK_IMAGE")),
		sandboxctl.WithLabels(map[string]string{"sandboxctl.test.check": label}))...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: "echo made in the sandbox > /workspace/report.txt"})
	if err != nil || res.Details.Status != "completed" {
		t.Fatalf("exec: %v %v", err, res)
	}
	rc, err := sb.CopyFileFromContainer(ctx, "/workspace/report.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "made in the sandbox\n" {
		t.Fatalf("copied out %q", b)
	}
	dc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	list, err := dc.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "sandboxctl.test.check="+label).Add("label", "org.testcontainers=true")})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("no container with the check label and org.testcontainers=true while the sandbox runs: %v", err)
	}
	t.Logf("MARK containers while running: %d", len(list.Items))
}

func TestInProcess(t *testing.T) { check(t, inprocess.Run) }

func TestContainerMode(t *testing.T) {
	img := os.Getenv("CHECK_DAEMON_IMAGE")
	check(t, func(ctx context.Context, opts ...sandboxctl.Option) (*sandboxctl.Sandbox, error) {
		var all []testcontainers.ContainerCustomizer
		for _, o := range opts {
			all = append(all, o)
		}
		return sandboxctl.Run(ctx, img, all...)
	})
}
`

// TestTestcontainersModuleFromAnotherModule is the done-when of issue 21:
// a module of its own in a temporary directory, with replace directives to
// this tree, runs a test that starts a sandbox through
// testcontainers/sandboxctl (both modes), runs a command and copies a file
// out; afterwards no container with its label exists. It then runs the
// testcontainers module's own tests, which `go test ./...` of this module
// does not reach (a nested module).
func TestTestcontainersModuleFromAnotherModule(t *testing.T) {
	cli := requireDocker(t, testImage)
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	daemonImage := fmt.Sprintf("sandboxctl/sandboxctld:check-%s", randSuffix())
	build := exec.Command(filepath.Join(root, "images", "build.sh"), "daemon")
	build.Env = append(os.Environ(), "DAEMON_IMAGE="+daemonImage)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("images/build.sh daemon: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", daemonImage).Run() })

	dir := t.TempDir()
	gomod := fmt.Sprintf(`module example.com/platformtest

go 1.26.0

require (
	github.com/sandboxctl/sandboxctl v0.0.0
	github.com/sandboxctl/sandboxctl/testcontainers v0.0.0
)

replace github.com/sandboxctl/sandboxctl => %s

replace github.com/sandboxctl/sandboxctl/testcontainers => %s
`, root, filepath.Join(root, "testcontainers"))
	sum, err := os.ReadFile(filepath.Join(root, "testcontainers", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "platform_test.go": []byte(externalModuleTest)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	label := "check-" + randSuffix()
	env := goEnv(t, "GOPROXY", "GOCACHE", "GOMODCACHE", "GOSUMDB", "GONOSUMDB", "GOPRIVATE")
	env = append(env, "GOFLAGS=-mod=mod", "GOWORK=off", "TESTCONTAINERS_RYUK_DISABLED=true",
		"CHECK_LABEL="+label, "CHECK_IMAGE="+testImage, "CHECK_DAEMON_IMAGE="+daemonImage)
	out := goTest(t, dir, env, "-count=1", "-v", "./...")
	if strings.Count(out, "MARK containers while running:") != 2 {
		t.Fatalf("the external test did not reach its check in both modes:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "sandboxctl.test.check="+label)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range left.Items {
		t.Errorf("left behind: %v (%s)", c.Names, c.State)
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}

	// The nested module's own tests (with -race, as make test runs ours).
	goTest(t, filepath.Join(root, "testcontainers"), append(goEnv(t, "GOPROXY", "GOCACHE"), "TESTCONTAINERS_RYUK_DISABLED=true"),
		"-race", "-count=1", "./...")
}

// goEnv returns KEY=VALUE of each go env setting this test runs with.
func goEnv(t *testing.T, keys ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"env"}, keys...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	vals := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	env := make([]string, 0, len(keys))
	for i, k := range keys {
		if i < len(vals) {
			env = append(env, k+"="+vals[i])
		}
	}
	return env
}

// goTest runs go test in dir and returns its output; failing is fatal.
func goTest(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"test"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}
