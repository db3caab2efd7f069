package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WorkspacesDirName is the directory of the agents' workspaces under a
// state directory, where they live unless sandbox.workspaceRoot names
// another: each state directory is a world of its own, so one agent name
// under two state directories has two workspaces.
const WorkspacesDirName = "workspaces"

// WorkspaceRoot is the host directory of the agents' workspaces for cfg
// and the state directory stateDir: the configured sandbox.workspaceRoot
// (~ is home), else <stateDir>/workspaces; absolute, not resolved. A
// Manager's own root (Manager.WorkspaceRoot) is this one with symlinks
// resolved, which is how a state directory made before workspaces moved
// under it keeps its old ones (see prepareWorkspaceRoot).
func WorkspaceRoot(cfg Config, stateDir, home string) (string, error) {
	root := filepath.Join(stateDir, WorkspacesDirName)
	if cfg.WorkspaceRoot != "" {
		root = expandHome(cfg.WorkspaceRoot, home)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("sandbox: workspaceRoot: %w", err)
	}
	return abs, nil
}

// legacyWorkspaceRoot is where every state directory kept its workspaces
// before they moved under the state directory.
func legacyWorkspaceRoot(home string) string {
	return filepath.Join(home, ".sandboxctl", WorkspacesDirName)
}

// prepareWorkspaceRoot makes the default workspace root of a state
// directory (no sandbox.workspaceRoot configured) and returns root with
// symlinks resolved. On the first start of a state directory whose
// sandboxes (sandboxes.json) have workspaces in the legacy location, shared
// by every state directory, root is made a symlink to that location: the
// agents keep their files and their containers their mounts. It is logged
// at every start, with how to separate them. Later starts find root as it
// was left, so the choice is made once.
func (m *DockerEngine) prepareWorkspaceRoot(root, home string, configured bool) (string, error) {
	if !configured {
		if _, err := os.Lstat(root); errors.Is(err, os.ErrNotExist) {
			legacy := legacyWorkspaceRoot(home)
			if root != legacy && m.hasLegacyWorkspaces(legacy) {
				if err := os.Symlink(legacy, root); err != nil {
					return "", fmt.Errorf("sandbox: keep the workspaces of %s in %s: %w", m.stateDir, legacy, err)
				}
			} else {
				if err := os.MkdirAll(root, 0o700); err != nil {
					return "", fmt.Errorf("sandbox: workspace root: %w", err)
				}
				if _, err := os.Stat(filepath.Join(m.stateDir, "sandboxes.json")); err == nil && root != legacy {
					if _, err := os.Stat(legacy); err == nil {
						m.logf("note: the agents' workspaces of state directory %s are now in %s; none of its sandboxes has one in %s, where sandboxctl kept them for every state directory before, so nothing there is used (or touched) from now on",
							m.stateDir, root, legacy)
					}
				}
			}
		} else if err != nil {
			return "", fmt.Errorf("sandbox: workspace root: %w", err)
		}
		if fi, err := os.Lstat(root); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(root)
			if target == legacyWorkspaceRoot(home) {
				m.logf("warning: the workspaces of state directory %s are in %s (%s is a link to it), where sandboxctl kept them for every state directory before they moved under each state directory; agents of other state directories with the same name share them. To separate them: stop the daemon, remove the link, create the directory and move the agents' directories into it",
					m.stateDir, target, root)
			}
		}
	}
	real, err := filepath.EvalSymlinks(root)
	if errors.Is(err, os.ErrNotExist) {
		return root, nil // a configured root is made with its first workspace
	}
	if err != nil {
		return "", fmt.Errorf("sandbox: workspace root: %w", err)
	}
	return real, nil
}

// hasLegacyWorkspaces reports whether a sandbox of this state directory
// (sandboxes.json, written by every sandboxctl since before workspaces
// moved) has its workspace in legacy.
func (m *DockerEngine) hasLegacyWorkspaces(legacy string) bool {
	data, err := os.ReadFile(filepath.Join(m.stateDir, "sandboxes.json"))
	if err != nil {
		return false
	}
	var entries map[string]registryEntry
	if json.Unmarshal(data, &entries) != nil {
		return false
	}
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(legacy, ContainerName("", e.ScopeKey))); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// WorkspaceRoot is the host directory of this Manager's agent workspaces
// (symlinks resolved).
func (m *DockerEngine) WorkspaceRoot() string { return m.wsRoot }
