package sandbox

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"
)

// restoreFreshTmpfs puts the snapshot's tmpfs contents into sandbox in,
// a container no command has run in (made, or taken from the warm pool,
// for a rollback or fork under its scope's lock): from the host when it
// can (restoreTmpfsDirect), else through the supervisor's file tool.
func (m *DockerEngine) restoreFreshTmpfs(ctx context.Context, in Info, snapDir string, snap SnapshotInfo) error {
	done, err := m.restoreTmpfsDirect(ctx, in, snapDir, snap)
	if err != nil || done {
		return err
	}
	return m.restoreTmpfs(ctx, in, snapDir, snap)
}

// restoreTmpfsDirect copies the snapshot's tmpfs contents into in's tmpfs
// mounts from the host, through its pid 1's root (each mount resolved
// inside the container's root, no symlinks, and checked to be a tmpfs),
// every copy owned by its sandbox identity's command uid, as the file
// tool would leave them. No process of the sandbox runs that could race
// the copy: in is fresh, and a name the copy makes that exists already is
// an error, never followed. done is false, and nothing is written, when
// it cannot: no sandbox identity (the owner would be a name inside the
// container), a runtime other than runc, or a pid this host does not see
// as the container's.
func (m *DockerEngine) restoreTmpfsDirect(ctx context.Context, in Info, snapDir string, snap SnapshotInfo) (done bool, err error) {
	if len(snap.Tmpfs) == 0 {
		return true, nil
	}
	if m.ident == nil {
		return false, nil
	}
	insp, err := m.cli.ContainerInspect(ctx, in.ID, client.ContainerInspectOptions{})
	if err != nil {
		return false, m.classify("inspect sandbox "+in.Name, err)
	}
	c := insp.Container
	id, ok := identityOf(c.Config.Labels)
	if !ok || c.State == nil || c.State.Pid <= 0 || (c.HostConfig != nil && !localRuntime(c.HostConfig.Runtime)) {
		return false, nil
	}
	pid := c.State.Pid
	rootFD, err := unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, nil
	}
	defer unix.Close(rootFD)
	if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err != nil || !strings.Contains(string(cg), in.ID) {
		return false, nil
	}
	tc := &treeCopier{budget: -1, into: true, owner: &fileOwner{uid: int(id.Command), gid: int(id.Command)}}
	for _, p := range snap.Tmpfs {
		rel := strings.TrimPrefix(path.Clean(p), "/")
		fd, err := unix.Openat2(rootFD, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS,
		})
		if err != nil {
			return true, fmt.Errorf("restore tmpfs %s: %w", p, err)
		}
		var st unix.Statfs_t
		if err := unix.Fstatfs(fd, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
			_ = unix.Close(fd)
			return true, fmt.Errorf("restore tmpfs %s: not a tmpfs in sandbox %s (%v)", p, in.Name, err)
		}
		err = tc.copyDir(filepath.Join(snapDir, "tmpfs", rel), fmt.Sprintf("/proc/self/fd/%d", fd), nil)
		_ = unix.Close(fd)
		if err != nil {
			return true, fmt.Errorf("restore tmpfs %s: %w", p, err)
		}
	}
	return true, nil
}
