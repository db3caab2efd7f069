package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStaticWithCgo: a plain `go build` of the supervisor with cgo
// enabled still makes a static binary (no program interpreter, no shared
// libraries), which runs in any image and which the daemon accepts. What
// pulled libc in before was os/user, linked through archive/tar by the
// file tool (see sandbox/supervisor/tarstream).
func TestStaticWithCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the supervisor")
	}
	out := filepath.Join(t.TempDir(), "sandboxctl-supervisor")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build (CGO_ENABLED=1): %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the supervisor built with CGO_ENABLED=1 has a program interpreter (PT_INTERP): it is dynamically linked")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("the supervisor built with CGO_ENABLED=1 needs shared libraries (DT_NEEDED): %v; see `CGO_ENABLED=1 go list -deps ./cmd/sandboxctl-supervisor` for os/user, net or runtime/cgo", libs)
	}
}
