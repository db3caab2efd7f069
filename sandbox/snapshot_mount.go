package sandbox

import (
	"fmt"
	"path"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// replaceMountInContainer puts the host directory host in place of the
// mount at target (an absolute path inside the container, resolved in
// its root without symlinks) in the mount namespace of the container
// whose pid 1 is pid on this host: the mount there is detached and host
// mounted on its mount point, with the new mount API (open_tree,
// move_mount), as `machinectl bind` does. A running container so sees a
// directory other than the one it was made with (a fork's workspace in a
// warm pool's sandbox). The caller makes sure no process of the
// container uses target meanwhile, and that pid is the container's.
func replaceMountInContainer(pid int, host, target string) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, host, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("mount %s into the sandbox: open_tree: %w", host, err)
	}
	defer unix.Close(tree)
	// The clone keeps the source's propagation: were the host's mount
	// shared, the sandbox's /workspace would join its peer group (a host
	// mount under the workspace showing in the sandbox, and back). Private,
	// as Docker's own binds are.
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Propagation: unix.MS_PRIVATE}); err != nil {
		return fmt.Errorf("mount %s into the sandbox: make it private: %w", host, err)
	}
	ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("mount %s into the sandbox: its mount namespace: %w", host, err)
	}
	defer unix.Close(ns)
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("mount %s into the sandbox: its root: %w", host, err)
	}
	defer unix.Close(root)
	rel := strings.TrimPrefix(path.Clean(target), "/")
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS,
	}
	// move_mount attaches only into the caller's mount namespace, and
	// umount2 takes a path: a thread of its own enters the container's
	// namespace and root, and is never given back to the Go scheduler
	// (the goroutine ends locked to it, so the thread ends with it).
	enter := func() error {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare CLONE_FS: %w", err)
		}
		if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("enter its mount namespace: %w", err)
		}
		if err := unix.Fchdir(root); err != nil {
			return fmt.Errorf("enter its root: %w", err)
		}
		if err := unix.Chroot("."); err != nil {
			return fmt.Errorf("enter its root: %w", err)
		}
		// Its mount first: a mount over it would sit on the
		// directory it mounts, which may be gone from the host
		// (move_mount refuses a deleted mount point), and would go
		// with it.
		if err := unix.Unmount("/"+rel, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			return fmt.Errorf("detach the mount at %s: %w", target, err)
		}
		at, err := unix.Openat2(unix.AT_FDCWD, rel, how)
		if err != nil {
			return fmt.Errorf("open %s: %w", target, err)
		}
		defer unix.Close(at)
		if err := unix.MoveMount(tree, "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
			return fmt.Errorf("move_mount: %w", err)
		}
		return nil
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			done <- enter()
			return
		}
		// The process's main thread: Go does not end it when a goroutine
		// locked to it exits, but parks it for good, and the process
		// (its /proc/self/ns/mnt, its root) would stay in the
		// container's. Another goroutine does the work, on a thread
		// other than this one (locked here, it runs no other goroutine),
		// and this one is handed back untouched.
		inner := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			inner <- enter()
		}()
		err := <-inner
		runtime.UnlockOSThread()
		done <- err
	}()
	if err := <-done; err != nil {
		return fmt.Errorf("mount %s into the sandbox at %s: %w", host, target, err)
	}
	return nil
}
