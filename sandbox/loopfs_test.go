package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// loopFS mounts a new filesystem of kind ("btrfs", or "xfs" with
// reflink=1) made on a sparse 4 GiB file, and returns its mount point.
// Its clean-up, registered first so that it runs after the clean-ups of
// what is made on it (containers, Managers), unmounts it and removes the
// file and the directories. It skips, saying why, only where this host
// cannot mount one: not root, no loop device, a kernel without the
// filesystem, or no mkfs.<kind> (btrfs-progs, xfsprogs: scripts/toolchain.sh
// installs them where the tests run).
func loopFS(tb testing.TB, kind string) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skipf("a %s loop filesystem needs root (mount)", kind)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		tb.Skipf("no loop devices here (%v): no %s loop filesystem", err, kind)
	}
	if fss, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(fss), "\t"+kind+"\n") {
		if out, err := exec.Command("modprobe", kind).CombinedOutput(); err != nil {
			tb.Skipf("the kernel has no %s (modprobe: %v %s)", kind, err, out)
		}
	}
	mkfs, err := exec.LookPath("mkfs." + kind)
	if err != nil {
		tb.Skipf("no mkfs.%s (apt-get install %s; scripts/toolchain.sh does): %v", kind, map[string]string{"btrfs": "btrfs-progs", "xfs": "xfsprogs"}[kind], err)
	}
	args := []string{"-q"}
	if kind == "xfs" {
		args = append(args, "-m", "reflink=1")
	}
	dir, err := os.MkdirTemp("", "sandboxctl-"+kind+"-")
	if err != nil {
		tb.Fatal(err)
	}
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	mounted := false
	tb.Cleanup(func() {
		if mounted {
			if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
				// Never left mounted: detached now, gone when released.
				tb.Errorf("umount %s: %v %s", mnt, err, out)
				_ = exec.Command("umount", "-l", mnt).Run()
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			tb.Errorf("remove %s: %v", dir, err)
		}
	})
	f, err := os.Create(img)
	if err == nil {
		err = errors.Join(f.Truncate(4<<30), f.Close())
	}
	if err == nil {
		err = os.Mkdir(mnt, 0o755)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command(mkfs, append(args, img)...).CombinedOutput(); err != nil {
		tb.Fatalf("%s: %v %s", mkfs, err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		tb.Fatalf("mount -o loop %s: %v %s", img, err, out)
	}
	mounted = true
	return mnt
}
