package integration

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"
)

// TestImagesProvideTheirTools starts each locally built image with
// testcontainers-go (no registry, no reaper) under the sandbox hardening and
// checks the tools the spec promises are there and work.
func TestImagesProvideTheirTools(t *testing.T) {
	requireDocker(t, testImage, sandboxImage)
	tests := []struct {
		image  string
		checks map[string]string // command -> substring of its output
	}{
		{testImage, map[string]string{
			"busybox --help":           "BusyBox",
			"sh -c 'echo $((6*7))'":    "42",
			"stty --help 2>&1; true":   "stty",
			"sh -c 'ls /workspace -d'": "/workspace",
		}},
		{sandboxImage, map[string]string{
			"bash --version":           "GNU bash",
			"jq --version":             "jq-",
			"rg --version":             "ripgrep",
			"python3 -V":               "Python 3",
			"node -p 6*7":              "42",
			"git --version":            "git version",
			"curl --version":           "curl",
			"ps --version":             "procps",
			"sh -c 'echo $PATH'":       "/usr/local/bin",
			"sh -c 'ls -d /workspace'": "/workspace",
			"sh -c 'ls /etc/debian_version && cat /etc/debian_version'": "12",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ctr, err := testcontainers.Run(ctx, tt.image,
				testcontainers.WithCmd("sh", "-c", "echo ready; exec sleep 300"),
				testcontainers.WithLabels(map[string]string{testLabel: "integration"}),
				testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
					hc.NetworkMode = "none"
					hc.ReadonlyRootfs = true
					hc.CapDrop = []string{"ALL"}
					hc.SecurityOpt = []string{"no-new-privileges"}
					hc.Tmpfs = map[string]string{"/tmp": "rw"}
				}),
				testcontainers.WithWaitStrategy(wait.ForLog("ready").WithStartupTimeout(30*time.Second)),
			)
			testcontainers.CleanupContainer(t, ctr, testcontainers.StopTimeout(0))
			if err != nil {
				t.Fatalf("start %s: %v", tt.image, err)
			}
			for cmd, want := range tt.checks {
				code, r, err := ctr.Exec(ctx, []string{"sh", "-c", cmd}, tcexec.Multiplexed())
				if err != nil {
					t.Fatalf("%s: %v", cmd, err)
				}
				b, _ := io.ReadAll(r)
				if code != 0 || !strings.Contains(string(b), want) {
					t.Errorf("%s: exit %d, output %q, want %q", cmd, code, b, want)
				}
			}
		})
	}
}
