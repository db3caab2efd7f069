package workdir

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// Access is how a sandbox sees the agent workspace.
type Access string

// The workspace access modes.
const (
	// AccessNone: /workspace is a sandbox-owned directory; the agent
	// workspace is not mounted.
	AccessNone Access = "none"
	// AccessRO: /workspace is a sandbox-owned directory and the agent
	// workspace is mounted read-only at /agent.
	AccessRO Access = "ro"
	// AccessRW: the agent workspace is mounted read-write at /workspace.
	AccessRW Access = "rw"
)

// Container mount points.
const (
	ContainerWorkspace = "/workspace"
	ContainerAgent     = "/agent"
)

// ErrInvalidAccess is matched by the error of ParseAccess and of ToSandbox
// for an unknown access mode.
var ErrInvalidAccess = errors.New("invalid workspace access")

// ParseAccess parses "none", "ro" or "rw" (case and surrounding white space
// ignored). Anything else, including "", is an error matching
// ErrInvalidAccess.
func ParseAccess(s string) (Access, error) {
	switch a := Access(strings.ToLower(strings.TrimSpace(s))); a {
	case AccessNone, AccessRO, AccessRW:
		return a, nil
	}
	return "", fmt.Errorf("workdir: workspace access %q: want none, ro or rw: %w", s, ErrInvalidAccess)
}

// ErrEscape is matched (errors.Is) by every *EscapeError.
var ErrEscape = errors.New("path escapes the workspace")

// EscapeError reports a requested working directory that would leave the
// workspace.
type EscapeError struct {
	// Path is the path as requested.
	Path string
	// Workspace is the workspace it had to stay in (the host workspace for
	// host paths, /workspace or /agent for container paths).
	Workspace string
	// Reason says how it leaves, e.g. "`..` leaves the workspace".
	Reason string
}

func (e *EscapeError) Error() string {
	return fmt.Sprintf("workdir %q escapes the workspace %s: %s", e.Path, e.Workspace, e.Reason)
}

// Is makes errors.Is(err, ErrEscape) true for every *EscapeError.
func (e *EscapeError) Is(target error) bool { return target == ErrEscape }

// ToSandbox maps a requested working directory to a path inside the sandbox
// container. hostWorkspace is the agent workspace on the host (absolute; may
// be "" when there is none).
//
//   - "" (or white space) maps to /workspace.
//   - A relative path is relative to /workspace, whatever the access.
//   - An absolute host path at or under hostWorkspace maps to the same
//     relative path under /workspace (rw, and none, where /workspace is the
//     sandbox's own copy of the workspace, so the same relative path is the
//     best match) or under /agent (ro). Each existing component is checked
//     with Lstat: a symlink that resolves (a dangling one: that points)
//     outside the workspace is refused, and the mapping uses the resolved
//     path, since an absolute host symlink would not resolve inside the
//     container. This check is first, so when the host workspace itself
//     lives under /workspace the path is taken as a host path.
//   - Otherwise an absolute path at or under /workspace (any access) or
//     /agent (ro only) is a container path and is accepted after cleaning;
//     the filesystem is not consulted.
//   - Otherwise an absolute host path that resolves (following the symlinks
//     of its existing components) to a place in the workspace maps by that
//     resolved place, e.g. a path through a symlink to the workspace.
//   - Anything else is refused.
//
// ".." is resolved lexically before anything else; a path whose ".." climbs
// out of the root it names (/workspace/../etc, ../x, <ws>/../..) is refused
// with the reason "`..` leaves the workspace". Percent-encoded or
// look-alike dots ("%2e%2e", "..." , "\u2024\u2024") are ordinary names and
// stay inside. Every refusal is an *EscapeError except NUL bytes
// (ErrInvalidPath) and an unknown access (ErrInvalidAccess).
func ToSandbox(hostWorkspace string, access Access, requested string) (containerPath string, err error) {
	switch access {
	case AccessNone, AccessRO, AccessRW:
	default:
		return "", fmt.Errorf("workdir: workspace access %q: want none, ro or rw: %w", access, ErrInvalidAccess)
	}
	req := strings.TrimSpace(requested)
	if req == "" {
		return ContainerWorkspace, nil
	}
	if strings.IndexByte(req, 0) >= 0 || strings.IndexByte(hostWorkspace, 0) >= 0 {
		return "", fmt.Errorf("workdir: %q contains a NUL byte: %w", requested, ErrInvalidPath)
	}
	if hostWorkspace != "" && !filepath.IsAbs(hostWorkspace) {
		return "", fmt.Errorf("workdir: host workspace %q is not absolute: %w", hostWorkspace, ErrInvalidPath)
	}

	if !path.IsAbs(req) {
		p := path.Join(ContainerWorkspace, req)
		if !ContainsPath(ContainerWorkspace, p) {
			return "", &EscapeError{Path: requested, Workspace: ContainerWorkspace, Reason: "`..` leaves the workspace"}
		}
		return p, nil
	}

	hostRoot := ContainerWorkspace
	if access == AccessRO {
		hostRoot = ContainerAgent
	}
	var hostRoots []string
	var ws, wsReal string
	if hostWorkspace != "" {
		ws = filepath.Clean(hostWorkspace)
		r, rerr := resolveExisting(ws)
		if rerr != nil {
			return "", fmt.Errorf("workdir: resolve host workspace %s: %w", ws, rerr)
		}
		wsReal = r
		hostRoots = uniq(ws, wsReal)
	}
	containerRoots := []string{ContainerWorkspace}
	if access == AccessRO {
		containerRoots = append(containerRoots, ContainerAgent)
	}

	hp := filepath.Clean(req)
	for _, root := range hostRoots {
		if ContainsPath(root, hp) {
			return hostToContainer(requested, ws, wsReal, root, hp, hostRoot)
		}
	}
	cp := path.Clean(req)
	for _, root := range containerRoots {
		if ContainsPath(root, cp) {
			return cp, nil
		}
	}
	// A host path that reaches the workspace through a symlink outside it
	// (/home/u/ws-link/src with ws-link -> ws) maps by where it resolves.
	if hostWorkspace != "" {
		resolved, rerr := resolveExisting(hp)
		if rerr != nil {
			return "", fmt.Errorf("workdir: resolve %s: %w", hp, rerr)
		}
		if ContainsPath(wsReal, resolved) {
			return hostToContainer(requested, ws, wsReal, wsReal, resolved, hostRoot)
		}
	}
	// Not inside any root: say "..", when the path named a root before its
	// ".." took it out.
	for _, root := range hostRoots {
		if namesRoot(req, root) {
			return "", &EscapeError{Path: requested, Workspace: ws, Reason: "`..` leaves the workspace"}
		}
	}
	for _, root := range containerRoots {
		if namesRoot(req, root) {
			return "", &EscapeError{Path: requested, Workspace: root, Reason: "`..` leaves the workspace"}
		}
	}

	where := ContainerWorkspace
	if access == AccessRO {
		where += " or " + ContainerAgent
	}
	if ws == "" {
		ws = ContainerWorkspace
	}
	return "", &EscapeError{
		Path:      requested,
		Workspace: ws,
		Reason:    fmt.Sprintf("not inside the agent workspace nor under %s", where),
	}
}

// hostToContainer checks the components of p (a cleaned host path at or
// under root, which is ws or its resolved form) for symlinks leaving the
// workspace and maps the resolved path under containerRoot.
func hostToContainer(requested, ws, wsReal, root, p, containerRoot string) (string, error) {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return "", fmt.Errorf("workdir: %s relative to %s: %w", p, root, err)
	}
	cur := root
	if rel != "." {
		for _, comp := range strings.Split(rel, string(filepath.Separator)) {
			cur = filepath.Join(cur, comp)
			resolved, err := resolveExisting(cur)
			if err != nil {
				return "", fmt.Errorf("workdir: resolve %s: %w", cur, err)
			}
			if !ContainsPath(wsReal, resolved) {
				return "", &EscapeError{
					Path:      requested,
					Workspace: ws,
					Reason:    fmt.Sprintf("symlink component %s points outside the workspace (to %s)", cur, resolved),
				}
			}
		}
	}
	resolved, err := resolveExisting(p)
	if err != nil {
		return "", fmt.Errorf("workdir: resolve %s: %w", p, err)
	}
	relReal, err := filepath.Rel(wsReal, resolved)
	if err != nil || !ContainsPath(wsReal, resolved) {
		return "", &EscapeError{Path: requested, Workspace: ws, Reason: "it resolves outside the workspace"}
	}
	return path.Join(containerRoot, filepath.ToSlash(relReal)), nil
}

// namesRoot reports whether the raw path p starts with the segments of root,
// before any ".." is applied: "/workspace/../etc" names /workspace (and then
// leaves it), "/etc" does not.
func namesRoot(p, root string) bool {
	rootSegs := segments(root)
	pSegs := segments(p)
	if len(pSegs) < len(rootSegs) {
		return false
	}
	for i, s := range rootSegs {
		if pSegs[i] != s {
			return false
		}
	}
	return true
}

// segments splits an absolute path into its names, dropping empty and "."
// segments but keeping "..".
func segments(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

func uniq(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// ResolveSandbox is ToSandbox with the fallback the exec tool uses: on any
// error it returns /workspace and a warning naming the requested path and
// the reason.
func ResolveSandbox(hostWorkspace string, access Access, requested string) (containerPath string, warning string) {
	p, err := ToSandbox(hostWorkspace, access, requested)
	if err != nil {
		return ContainerWorkspace, fmt.Sprintf("%v; using %s", err, ContainerWorkspace)
	}
	return p, ""
}
