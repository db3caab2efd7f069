package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/workdir"
)

// btrfs subvolumes (docs/snapshots.md, "On btrfs"): a workspace the
// daemon makes on btrfs is a subvolume, a snapshot keeps it as a
// read-only snapshot of that subvolume, and a fork or rollback gets a
// writable snapshot of the snapshot, each made at once whatever the
// number of files.

// The btrfs ioctls (linux/btrfs.h): _IOW(0x94, nr, size).
const (
	btrfsIocSubvolCreate   = 0x5000940e // nr 14, struct btrfs_ioctl_vol_args
	btrfsIocSnapDestroy    = 0x5000940f // nr 15, struct btrfs_ioctl_vol_args
	btrfsIocSnapCreateV2   = 0x50009417 // nr 23, struct btrfs_ioctl_vol_args_v2
	btrfsIocSubvolSetflags = 0x4008941a // nr 26, __u64
	btrfsSubvolRdonly      = 1 << 1
	// btrfsSubvolRootIno is the inode number of every subvolume's root
	// directory (BTRFS_FIRST_FREE_OBJECTID).
	btrfsSubvolRootIno = 256
	// btrfsEmptySubvolDirIno is the inode number of the empty directory a
	// snapshot shows where its source had a nested subvolume
	// (BTRFS_EMPTY_SUBVOL_DIR_OBJECTID): that subvolume's files are not in
	// the snapshot.
	btrfsEmptySubvolDirIno = 2
)

// btrfsVolArgs is struct btrfs_ioctl_vol_args.
type btrfsVolArgs struct {
	fd   int64
	name [4088]byte
}

// btrfsVolArgsV2 is struct btrfs_ioctl_vol_args_v2.
type btrfsVolArgsV2 struct {
	fd      int64
	transid uint64
	flags   uint64
	unused  [4]uint64
	name    [4040]byte
}

func btrfsIoctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// onBtrfs reports whether p is on a btrfs.
func onBtrfs(p string) bool {
	var st unix.Statfs_t
	return unix.Statfs(p, &st) == nil && st.Type == unix.BTRFS_SUPER_MAGIC
}

// isSubvolume reports whether p is the root directory of a btrfs
// subvolume (not following a symlink).
func isSubvolume(p string) bool {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Ino != btrfsSubvolRootIno {
		return false
	}
	return onBtrfs(p)
}

// openParent opens p's parent directory and returns it with p's last
// element, checked to fit a btrfs name.
func openParent(p string) (int, string, error) {
	name := filepath.Base(p)
	if name == "." || name == "/" || len(name) > 255 {
		return -1, "", fmt.Errorf("subvolume %s: not a name", p)
	}
	fd, err := unix.Open(filepath.Dir(p), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("subvolume %s: open its parent: %w", p, err)
	}
	return fd, name, nil
}

// createSubvolume makes p, which must not exist, an empty subvolume
// (root's, mode 0755, as btrfs makes it).
func createSubvolume(p string) error {
	return subvolumeByName(p, btrfsIocSubvolCreate, "create")
}

// snapshotSubvolume makes dst, which must not exist, a snapshot of the
// subvolume src (read-only when readOnly). Both must be on the same
// btrfs.
func snapshotSubvolume(src, dst string, readOnly bool) error {
	s, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("snapshot subvolume %s: %w", src, err)
	}
	defer unix.Close(s)
	dir, name, err := openParent(dst)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	a := btrfsVolArgsV2{fd: int64(s)}
	if readOnly {
		a.flags = btrfsSubvolRdonly
	}
	copy(a.name[:], name)
	if err := btrfsIoctl(dir, btrfsIocSnapCreateV2, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("snapshot subvolume %s to %s: %w", src, dst, err)
	}
	return nil
}

// setSubvolumeReadOnly makes the subvolume p read-only.
func setSubvolumeReadOnly(p string) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("subvolume %s: %w", p, err)
	}
	defer unix.Close(fd)
	flags := uint64(btrfsSubvolRdonly)
	if err := btrfsIoctl(fd, btrfsIocSubvolSetflags, unsafe.Pointer(&flags)); err != nil {
		return fmt.Errorf("subvolume %s: make it read-only: %w", p, err)
	}
	return nil
}

// destroySubvolume removes the subvolume p with what it holds (btrfs
// frees its blocks in the background), read-only or not.
func destroySubvolume(p string) error {
	return subvolumeByName(p, btrfsIocSnapDestroy, "remove")
}

// subvolumeByName runs the btrfs ioctl req (one that names a subvolume in
// its parent directory) on p; verb names it in the error.
func subvolumeByName(p string, req uintptr, verb string) error {
	dir, name, err := openParent(p)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	var a btrfsVolArgs
	copy(a.name[:], name)
	if err := btrfsIoctl(dir, req, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("%s subvolume %s: %w", verb, p, err)
	}
	return nil
}

// removeTree removes p and what it holds, as os.RemoveAll, and also the
// btrfs subvolumes in it, read-only ones included (a snapshot's
// workspace; one a sandbox's user made in its workspace and set
// read-only, which os.RemoveAll could not empty): they are destroyed
// first, deepest first, each at once.
func removeTree(p string) error {
	if isSubvolume(p) && destroySubvolume(p) == nil {
		return nil
	}
	if onBtrfs(p) {
		if err := destroySubvolumesIn(p); err != nil {
			return err
		}
		if isSubvolume(p) {
			if err := destroySubvolume(p); err != nil {
				return err
			}
			return nil
		}
	}
	return os.RemoveAll(p)
}

// destroySubvolumesIn destroys every subvolume below the directory dir
// (not dir itself), not following symlinks: each at once when it holds
// no other, else after those it holds.
func destroySubvolumesIn(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		sub := isSubvolume(p)
		if sub && destroySubvolume(p) == nil {
			continue
		}
		if err := destroySubvolumesIn(p); err != nil {
			return err
		}
		if sub {
			if err := destroySubvolume(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// makeWorkspaceDir makes the directory a sandbox's workspace is (0700):
// a subvolume when its parent is on btrfs (so that a snapshot of it is
// made at once), else a directory. An existing one is left as it is.
func makeWorkspaceDir(p string) error {
	if _, err := os.Lstat(p); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	if !onBtrfs(filepath.Dir(p)) || createSubvolume(p) != nil {
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		return nil
	}
	return os.Chmod(p, 0o700)
}

// snapshotWorkspace keeps the workspace ws in dst (a new name) for a
// snapshot, at most c's budget, and returns the method: on btrfs a
// read-only subvolume (a snapshot of ws when ws is a subvolume holding
// no other, else ws's files cloned into a new one), else files cloned or
// copied one by one.
func snapshotWorkspace(c *treeCopier, ws, dst string) (string, error) {
	oneByOne := func() (string, error) {
		if err := c.copyDir(ws, dst, nil); err != nil {
			return "", err
		}
		if c.cloned > 0 && c.reflink {
			return SnapshotReflink, nil
		}
		return SnapshotCopy, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", err
	}
	if !onBtrfs(filepath.Dir(dst)) {
		return oneByOne()
	}
	if isSubvolume(ws) && snapshotSubvolume(ws, dst, true) == nil {
		budget := c.budget
		whole, err := c.count(dst)
		if err == nil && whole {
			return SnapshotSubvolume, nil
		}
		if derr := destroySubvolume(dst); derr != nil {
			return "", errors.Join(err, derr)
		}
		if err != nil {
			return "", err
		}
		// A subvolume nested in the workspace (a sandbox can make one)
		// is not in a snapshot of it: its files are cloned one by one.
		c.budget, c.bytes, c.files = budget, 0, 0
	}
	if err := createSubvolume(dst); err != nil {
		// Not the same btrfs as the workspace's, or no right to make
		// subvolumes.
		return oneByOne()
	}
	if err := c.copyDir(ws, dst, nil); err != nil {
		return "", err
	}
	if err := setSubvolumeReadOnly(dst); err != nil {
		return "", err
	}
	return SnapshotSubvolume, nil
}

// count adds the regular files of the tree at dir (a subvolume snapshot)
// to c's counters, spending its budget, and reports whether the tree is
// whole: false when it holds the empty stand-in of a nested subvolume.
func (c *treeCopier) count(dir string) (whole bool, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return false, err
	}
	defer root.Close()
	whole = true
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := root.Lstat(rel)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Ino == btrfsEmptySubvolDirIno {
				whole = false
				return fs.SkipAll
			}
		case fi.Mode().IsRegular():
			if err := c.spend(rel, fi.Size()); err != nil {
				return err
			}
			c.bytes += fi.Size()
			c.files++
		}
		return nil
	})
	return whole, err
}

// forkSubvolume gives sandbox in (fresh, its scope locked, no command run
// in it yet) the snapshot's workspace when the snapshot keeps it as a
// subvolume on the workspace root's btrfs: a writable snapshot of it,
// made beside ws, handed to owner (a walk that changes owners only),
// renamed into ws's place (where its container's bind mount finds it on
// a restart) and mounted in place of the running container's workspace.
// done is false, with nothing changed, when the snapshot is no subvolume
// or ws is on another filesystem: the caller copies file by file.
func (m *DockerEngine) forkSubvolume(ctx context.Context, in Info, snapDir, ws string, owner *fileOwner) (done bool, err error) {
	src := filepath.Join(snapDir, "workspace")
	if !isSubvolume(src) {
		return false, nil
	}
	staged := filepath.Join(filepath.Dir(ws), "."+filepath.Base(ws)+".fork-"+randomHex(6))
	start := time.Now()
	if err := snapshotSubvolume(src, staged, false); err != nil {
		return false, nil
	}
	made := time.Now()
	placed := false
	defer func() {
		if !placed {
			_ = removeTree(staged)
		}
	}()
	if owner != nil {
		if err := handOver(staged, owner.uid, owner.gid); err != nil {
			return true, err
		}
	}
	handed := time.Now()
	pid, err := m.localPid(ctx, in)
	if err != nil {
		return true, err
	}
	// In place of the empty workspace on the host first, where the
	// container's bind mount finds it on a restart (a daemon that dies
	// before the mount below leaves a sandbox whose restart is whole),
	// then into the running container, whose mount of the empty one is
	// detached. rename(2) does not replace a subvolume, even an empty
	// one: the empty one goes first.
	if err := os.Remove(ws); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("workspace %s: %w", ws, err)
	}
	if err := os.Rename(staged, ws); err != nil {
		return true, fmt.Errorf("workspace %s: %w", ws, err)
	}
	placed = true // ws now: the caller removes it if what follows fails
	if err := replaceMountInContainer(pid, ws, workdir.ContainerWorkspace); err != nil {
		return true, err
	}
	m.logf("sandbox %s: workspace from the snapshot's subvolume in %s (snapshot %s, owners %s, mount %s)", in.Name,
		time.Since(start).Round(time.Millisecond), made.Sub(start).Round(time.Millisecond), handed.Sub(made).Round(time.Millisecond), time.Since(handed).Round(time.Millisecond))
	return true, nil
}

// localPid is the pid on this host of sandbox in's pid 1, checked to be
// in its container's cgroup (a daemon in another pid namespace, or a pid
// reused, would see another process's).
func (m *DockerEngine) localPid(ctx context.Context, in Info) (int, error) {
	insp, err := m.cli.ContainerInspect(ctx, in.ID, client.ContainerInspectOptions{})
	if err != nil {
		return 0, m.classify("inspect sandbox "+in.Name, err)
	}
	c := insp.Container
	if c.State == nil || c.State.Pid <= 0 {
		return 0, fmt.Errorf("%w: sandbox %s is not running", cerrdefs.ErrConflict, in.Name)
	}
	if c.HostConfig != nil && !localRuntime(c.HostConfig.Runtime) {
		return 0, fmt.Errorf("%w: sandbox %s runs under %s: its mounts are not this host's", errBadInput, in.Name, c.HostConfig.Runtime)
	}
	pid := c.State.Pid
	if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err != nil || !strings.Contains(string(cg), in.ID) {
		return 0, fmt.Errorf("%w: sandbox %s: pid %d on this host is not its container's (the daemon must share the Engine's pid namespace)", errBadInput, in.Name, pid)
	}
	return pid, nil
}
