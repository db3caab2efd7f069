package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestSupervisorBuilds builds the supervisor both ways a user can: as
// README's `go install` line and `make build` do (CGO_ENABLED=0), which the
// daemon must accept, and as a plain `go install` with cgo on. Since the
// supervisor's file tool uses archive/tar (which imports os/user, a cgo
// package), the plain build links the C library: the daemon must refuse it
// with a warning that names the fix, not run a binary that cannot start in
// an image without that library.
func TestSupervisorBuilds(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatalf("gcc is needed to build with cgo on (scripts/toolchain.sh installs it): %v", err)
	}
	build := func(cgo string) string {
		bin := filepath.Join(t.TempDir(), SupervisorBinaryName)
		cmd := exec.Command("go", "build", "-o", bin, "../cmd/sandboxctl-supervisor")
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build (CGO_ENABLED=%s): %v\n%s", cgo, err, out)
		}
		return bin
	}
	sup, warning := resolveSupervisor(build("0"))
	if warning != "" {
		t.Fatalf("the daemon refuses a supervisor built with CGO_ENABLED=0: %s", warning)
	}
	if sup.arch != runtime.GOARCH {
		t.Fatalf("arch %q, want %q", sup.arch, runtime.GOARCH)
	}
	if _, warning := resolveSupervisor(build("1")); !strings.Contains(warning, "CGO_ENABLED=0") {
		t.Fatalf("a dynamically linked supervisor: warning %q, want a refusal naming CGO_ENABLED=0", warning)
	}
}
