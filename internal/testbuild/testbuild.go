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
	"path"
	"path/filepath"
	"runtime"
)

// Build builds ./cmd/<name> into dir/<name> for each name and returns the
// binaries' paths in the same order.
func Build(dir string, names ...string) ([]string, error) {
	paths := make([]string, 0, len(names))
	for _, name := range names {
		out, err := Package(dir, "cmd/"+name)
		if err != nil {
			return nil, err
		}
		paths = append(paths, out)
	}
	return paths, nil
}

// Package builds the main package at pkg, a slash path relative to the
// module root (such as "nodeexec/internal/testnode"), into dir under the
// package's last element, and returns the binary's path.
func Package(dir, pkg string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("testbuild: cannot locate the module")
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(file))) // internal/testbuild → module root
	out := filepath.Join(dir, path.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./"+pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testbuild: go build ./%s: %w\n%s", pkg, err, b)
	}
	return out, nil
}
