// Package testbuild builds this module's commands for tests and
// benchmarks that run them as processes, the way `make build` does: static
// (CGO_ENABLED=0), -trimpath, stripped. Building them side by side in one
// directory matters: sandboxctl finds sandboxctld, and the daemon the
// supervisor, next to its own executable.
package testbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Build builds ./cmd/<name> into dir/<name> for each name and returns the
// binaries' paths in the same order.
func Build(dir string, names ...string) ([]string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, fmt.Errorf("testbuild: cannot locate the module")
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(file))) // internal/testbuild → module root
	paths := make([]string, 0, len(names))
	for _, name := range names {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/"+name)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("testbuild: go build ./cmd/%s: %w\n%s", name, err, b)
		}
		paths = append(paths, out)
	}
	return paths, nil
}
