package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A workspace with sandbox.workspaceQuota is a size-limited volume of its
// own: a sparse image file under <state>/workspace-images, formatted ext4
// and loop-mounted (nodev, nosuid) on the workspace directory. A sandbox
// that fills it gets ENOSPC there and nowhere else; the workspaces of other
// agents and the host filesystem keep their space (issue 25 #14). The
// image keeps the workspace across sandbox recreation and daemon restarts
// (it is mounted again when the sandbox is next made).

// WorkspaceQuotaKind names the mechanism `sandbox explain` reports.
const WorkspaceQuotaKind = "loop-mounted ext4 image (sparse file, nodev,nosuid)"

// ErrWorkspaceNotEmpty: a quota was configured for a workspace that already
// holds files outside a quota volume; mounting would hide them.
var ErrWorkspaceNotEmpty = errors.New("workspace already holds files and has no quota volume")

// workspaceImage is the image file of sandbox name's workspace.
func (m *DockerEngine) workspaceImage(name string) string {
	return filepath.Join(m.stateDir, "workspace-images", name+".img")
}

// ensureWorkspaceVolume mounts the quota volume of size bytes of sandbox
// name on dir (the directory mounted writable at /workspace), making it on
// first use. A dir that is a mount point already is left as it is.
func (m *DockerEngine) ensureWorkspaceVolume(ctx context.Context, name, dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("workspace dir: %w", err)
	}
	mounted, err := isMountPoint(dir)
	if err != nil || mounted {
		return err
	}
	img := m.workspaceImage(name)
	if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("workspace quota: %w", err)
		}
		if len(entries) > 0 {
			return fmt.Errorf("workspace quota for %s: %w; move its files away or unset sandbox.workspaceQuota", dir, ErrWorkspaceNotEmpty)
		}
		if err := makeImage(ctx, img, size); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("workspace quota: %w", err)
	}
	if out, err := exec.CommandContext(ctx, "mount", "-t", "ext4", "-o", "loop,nodev,nosuid", img, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("workspace quota: mount %s on %s: %w: %s", img, dir, err, strings.TrimSpace(string(out)))
	}
	// mkfs's lost+found is not the agent's; an empty one is harmless to drop.
	_ = os.Remove(filepath.Join(dir, "lost+found"))
	return nil
}

// makeImage creates a sparse image file of size bytes with an ext4
// filesystem (no reserved blocks: the agent gets all of it).
func makeImage(ctx context.Context, img string, size int64) (err error) {
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return fmt.Errorf("workspace quota: %w", err)
	}
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("workspace quota: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(img)
		}
	}()
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("workspace quota: size %s: %w", img, err)
	}
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", "root_owner=0:0", img).CombinedOutput(); err != nil {
		return fmt.Errorf("workspace quota: mkfs.ext4 %s: %w: %s", img, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// isMountPoint reports whether dir is on another device than its parent.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, fmt.Errorf("workspace quota: %w", err)
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("workspace quota: %w", err)
	}
	return st.Dev != parent.Dev, nil
}

// ReleaseWorkspaceVolume unmounts the quota volume of scope s's workspace
// and deletes its image (and so the workspace's files). A workspace without
// one is left alone.
func (m *DockerEngine) ReleaseWorkspaceVolume(s Scope) error {
	scopeKey := ScopeKey(m.cfg.Scope, s)
	name := ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey)
	dir := m.layoutFor(scopeKey, name).WorkspaceHost
	if mounted, err := isMountPoint(dir); err == nil && mounted {
		if err := unix.Unmount(dir, 0); err != nil {
			return fmt.Errorf("workspace quota: unmount %s: %w", dir, err)
		}
	}
	if err := os.Remove(m.workspaceImage(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("workspace quota: %w", err)
	}
	return nil
}
