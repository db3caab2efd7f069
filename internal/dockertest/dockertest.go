// Package dockertest is the one gate of every test that needs the Docker
// Engine. `make test` starts an Engine and builds the images first, so a
// Docker test that finds none fails: a skip would hide that it never ran.
package dockertest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/sandboxctl/sandboxctl/envknob"
)

// Require returns a client of the Engine the environment names
// (DOCKER_HOST, else the default socket), closed when the test ends, after
// checking that the Engine answers and that each of images exists.
func Require(tb testing.TB, images ...string) *client.Client {
	tb.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		tb.Fatalf("docker client: %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		if os.Getenv(string(envknob.SkipDocker)) == "1" && os.Getenv("CI") == "" {
			tb.Skipf("no Docker Engine answers (%v) and %s=1", err, envknob.SkipDocker)
		}
		tb.Fatalf("no Docker Engine answers: %v (run `make docker-up`, or `make test`, which starts one; %s=1 skips Docker tests outside CI)", err, envknob.SkipDocker)
	}
	for _, img := range images {
		if _, err := cli.ImageInspect(ctx, img); err != nil {
			tb.Fatalf("image %s missing (run `make images`): %v", img, err)
		}
	}
	return cli
}
