package workdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrInvalidPath is matched by errors for paths that cannot name a file at
// all (NUL bytes) and for a workspace that is not absolute.
var ErrInvalidPath = errors.New("invalid path")

// maxSymlinkHops bounds symlink resolution, as the kernel does (ELOOP).
const maxSymlinkHops = 40

// ResolveHost resolves the working directory of a command on the gateway or
// a node. requested is absolute or relative to configuredCwd; surrounding
// white space is trimmed and the result is cleaned (symlinks are kept, so the
// shell's pwd shows the path the caller asked for). It must exist and be a
// directory (symlinks to directories count). Otherwise configuredCwd is
// returned with a warning naming the requested path and why it was not used.
// An empty requested returns configuredCwd and no warning.
func ResolveHost(configuredCwd, requested string) (dir string, warning string) {
	req := strings.TrimSpace(requested)
	if req == "" {
		return configuredCwd, ""
	}
	if strings.IndexByte(req, 0) >= 0 {
		return configuredCwd, fmt.Sprintf("workdir %q is not a valid path (NUL byte); using %s", requested, configuredCwd)
	}
	p := req
	if !filepath.IsAbs(p) {
		p = filepath.Join(configuredCwd, p)
	}
	p = filepath.Clean(p)
	fi, err := os.Stat(p)
	switch {
	case err == nil && fi.IsDir():
		return p, ""
	case err == nil:
		return configuredCwd, fmt.Sprintf("workdir %s is not a directory; using %s", p, configuredCwd)
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return configuredCwd, fmt.Sprintf("workdir %s does not exist; using %s", p, configuredCwd)
	default:
		return configuredCwd, fmt.Sprintf("workdir %s cannot be used (%v); using %s", p, unwrapPathError(err), configuredCwd)
	}
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ContainsPath reports whether path is at or under root, lexically: both are
// cleaned, no filesystem access, no symlink resolution. "/a/bc" is not under
// "/a/b"; every absolute path is under "/"; an absolute path is never under
// a relative root nor the reverse; an empty root contains nothing.
func ContainsPath(root, path string) bool {
	if root == "" || path == "" {
		return false
	}
	r := filepath.Clean(root)
	p := filepath.Clean(path)
	if filepath.IsAbs(r) != filepath.IsAbs(p) {
		return false
	}
	if r == p {
		return true
	}
	if r == "." {
		return p != ".." && !strings.HasPrefix(p, "../")
	}
	if r == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(p, r+string(filepath.Separator))
}

// IsOutside reports whether path is not at or under workspace once both are
// resolved: path is absolute or relative to workspace, and it is walked as
// the kernel walks it, following the symlinks of its existing components
// ("out-link/../x" is the parent of out-link's target, not the workspace);
// a missing tail is joined lexically, so "ws/link-to-etc/new" counts as
// outside. workspace must be absolute.
// On error the answer is true: callers use it to decide whether to ask for
// approval, and an unresolvable path must not count as inside.
func IsOutside(workspace, path string) (bool, error) {
	if !filepath.IsAbs(workspace) {
		return true, fmt.Errorf("workdir: workspace %q is not absolute: %w", workspace, ErrInvalidPath)
	}
	if strings.IndexByte(path, 0) >= 0 || strings.IndexByte(workspace, 0) >= 0 {
		return true, fmt.Errorf("workdir: path %q contains a NUL byte: %w", path, ErrInvalidPath)
	}
	p := path
	if !filepath.IsAbs(p) {
		// Not filepath.Join: it would clean "link/.." away lexically, while
		// the kernel resolves it physically.
		p = workspace + string(filepath.Separator) + p
	}
	wsReal, err := resolveExisting(workspace)
	if err != nil {
		return true, fmt.Errorf("workdir: resolve workspace %s: %w", workspace, err)
	}
	pReal, err := resolveExisting(p)
	if err != nil {
		return true, fmt.Errorf("workdir: resolve %s: %w", p, err)
	}
	return !ContainsPath(wsReal, pReal), nil
}

// resolveExisting returns the absolute path p with every symlink among its
// existing components followed, the way the kernel walks it: ".." after a
// symlink goes to the parent of the symlink's target. From the first missing
// component on, the rest is joined lexically. Unlike filepath.EvalSymlinks it does not fail on a
// path that does not exist (yet), and a dangling symlink resolves to where it
// points. A component that is not a directory ends the resolution the same
// way a missing one does.
func resolveExisting(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("resolve %q: not absolute: %w", p, ErrInvalidPath)
	}
	cur := string(filepath.Separator)
	rest := p // not cleaned: ".." after a symlink is the symlink target's parent
	hops := 0
	for {
		rest = strings.TrimLeft(rest, string(filepath.Separator))
		if rest == "" {
			return cur, nil
		}
		comp, tail, _ := strings.Cut(rest, string(filepath.Separator))
		rest = tail
		switch comp {
		case "", ".":
			continue
		case "..":
			// cur has no symlinks left in it, so its parent is the real parent.
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, comp)
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return filepath.Join(next, rest), nil
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		hops++
		if hops > maxSymlinkHops {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = string(filepath.Separator)
		}
		rest = target + string(filepath.Separator) + rest
	}
}
