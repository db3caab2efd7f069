package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestSupervisorBuilds builds the supervisor the ways a user can: as
// README's `go install` line and `make build` do (CGO_ENABLED=0) and as a
// plain `go install` with cgo on, both of which are static (it links
// nothing that needs cgo: TestStaticWithCgo, cmd/sandboxctl-supervisor)
// and which the daemon must accept; and linked externally with cgo on,
// which links the C library: the daemon must refuse that one with a
// warning that names the fix, not run a binary that cannot start in an
// image without that library.
func TestSupervisorBuilds(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatalf("gcc is needed to build with cgo on (scripts/toolchain.sh installs it): %v", err)
	}
	build := func(cgo string, flags ...string) string {
		bin := filepath.Join(t.TempDir(), SupervisorBinaryName)
		cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), "../cmd/sandboxctl-supervisor")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build (CGO_ENABLED=%s %v): %v\n%s", cgo, flags, err, out)
		}
		return bin
	}
	for _, cgo := range []string{"0", "1"} {
		sup, warning := resolveSupervisor(build(cgo))
		if warning != "" {
			t.Fatalf("the daemon refuses a supervisor built with CGO_ENABLED=%s: %s", cgo, warning)
		}
		if sup.arch != runtime.GOARCH {
			t.Fatalf("arch %q, want %q", sup.arch, runtime.GOARCH)
		}
	}
	if _, warning := resolveSupervisor(build("1", "-ldflags=-linkmode=external")); !strings.Contains(warning, "CGO_ENABLED=0") {
		t.Fatalf("a dynamically linked supervisor: warning %q, want a refusal naming CGO_ENABLED=0", warning)
	}
}
