package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestSupervisorStaticUnderPlainGoBuild builds the supervisor the way `go
// install` does, with cgo on, and checks that the daemon accepts it: a
// supervisor that links the C library would be refused and every command
// would drop to the slow plain Engine exec path.
func TestSupervisorStaticUnderPlainGoBuild(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatalf("gcc is needed to build with cgo on (scripts/toolchain.sh installs it): %v", err)
	}
	bin := filepath.Join(t.TempDir(), SupervisorBinaryName)
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/sandboxctl-supervisor")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sup, warning := resolveSupervisor(bin)
	if warning != "" {
		t.Fatalf("the daemon refuses a supervisor built by plain go build: %s", warning)
	}
	if sup.arch != runtime.GOARCH {
		t.Fatalf("arch %q, want %q", sup.arch, runtime.GOARCH)
	}
}
