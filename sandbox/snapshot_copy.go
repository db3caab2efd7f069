package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/docker/go-units"
	"golang.org/x/sys/unix"
)

// copyWorkers is how many files a treeCopier copies at once: a clone
// (FICLONE) or a small file's copy is mostly waiting on the filesystem's
// metadata, which several requests in flight share.
const copyWorkers = 8

// treeCopier copies directory trees without following a symlink in the
// source, keeping modes, owners and modification times; regular files
// are copied by copyWorkers at once. The counters are read after copyDir
// returned.
type treeCopier struct {
	budget  int64 // bytes left; negative: no limit
	reflink bool  // try FICLONE (cleared at the first refusal)
	// owner, when set, owns every copy (a fork's workspace, copied for
	// its sandbox identity's command uid) instead of the source's owner.
	owner *fileOwner
	// into: dst is an existing directory, maybe with entries (a tmpfs
	// mount), whose own mode, owner and times are left as they are.
	into    bool
	cloned  int
	bytes   int64
	files   int
	skipped int

	mu sync.Mutex // the counters and reflink, while workers run
}

// fileOwner is a uid and gid.
type fileOwner struct{ uid, gid int }

type copyJob struct {
	rel, target string
	fi          fs.FileInfo
}

// copyDir copies the tree at src into dst, which must not exist, or be
// an empty directory (then it takes src's mode and times), or with into
// any directory; skip names top-level entries of src to leave out. An
// entry of src that dst has already is an error, never overwritten or
// followed.
func (c *treeCopier) copyDir(src, dst string, skip map[string]bool) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(src)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return os.MkdirAll(dst, 0o700)
		}
		return err
	}
	defer root.Close()
	type dirAttr struct {
		path string
		fi   fs.FileInfo
	}
	var dirs []dirAttr
	jobs := make(chan copyJob)
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	failed := make(chan struct{})
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; close(failed) })
	}
	for range copyWorkers {
		wg.Go(func() {
			for j := range jobs {
				if err := c.copyFile(root, j.rel, j.target, j.fi); err != nil {
					fail(err)
				}
			}
		})
	}
	walkErr := fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip[rel] {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := root.Lstat(rel)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		switch {
		case fi.IsDir() && rel == "." && c.into:
		case fi.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil && !(rel == "." && emptyDir(target)) {
				return err
			}
			dirs = append(dirs, dirAttr{target, fi})
		case fi.Mode().IsRegular():
			if err := c.spend(rel, fi.Size()); err != nil {
				return err
			}
			select {
			case jobs <- copyJob{rel, target, fi}:
			case <-failed:
				return firstErr
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := root.Readlink(rel)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
			if uid, gid, ok := c.ownerOf(fi); ok {
				_ = os.Lchown(target, uid, gid)
			}
		default:
			c.mu.Lock()
			c.skipped++
			c.mu.Unlock()
		}
		return nil
	})
	close(jobs)
	wg.Wait()
	if walkErr != nil {
		return walkErr
	}
	if firstErr != nil {
		return firstErr
	}
	// Deepest first, each through a descriptor opened without following a
	// symlink: a directory is this process's until it is handed over, so
	// nothing can replace one while those beneath it are finished.
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		f, err := os.OpenFile(d.path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		err = c.finish(f, d.fi, fs.ModePerm|fs.ModeSetgid|fs.ModeSticky)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// emptyDir reports whether p is a directory without entries.
func emptyDir(p string) bool {
	ents, err := os.ReadDir(p)
	return err == nil && len(ents) == 0
}

// spend takes size bytes of the budget for rel, or refuses.
func (c *treeCopier) spend(rel string, size int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.budget < 0 {
		return nil
	}
	if size > c.budget {
		return fmt.Errorf("%w: sandbox.snapshots.maxBytes would be exceeded (%s left, %s needs %s more): remove or prune snapshots first (sandboxctl sandbox snapshots)",
			ErrSnapshotsFull, units.BytesSize(float64(c.budget+c.bytes)), rel, units.BytesSize(float64(size)))
	}
	c.budget -= size
	return nil
}

func (c *treeCopier) copyFile(root *os.Root, rel, target string, fi fs.FileInfo) error {
	in, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	c.mu.Lock()
	tryClone := c.reflink
	c.mu.Unlock()
	cloned := false
	if tryClone {
		if err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd())); err == nil {
			cloned = true
		} else {
			c.mu.Lock()
			c.reflink = false
			c.mu.Unlock()
		}
	}
	if !cloned {
		if _, err := io.Copy(out, in); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if cloned {
		c.cloned++
	}
	c.bytes += fi.Size()
	c.files++
	c.mu.Unlock()
	if err := c.finish(out, fi, fs.ModePerm|fs.ModeSetgid|fs.ModeSetuid|fs.ModeSticky); err != nil {
		return err
	}
	return out.Close()
}

// finish gives the copy open as f its owner, then fi's mode bits of keep
// (after the owner: a chown clears set-id bits) and modification time,
// all through f: a name that was replaced meanwhile is never followed.
func (c *treeCopier) finish(f *os.File, fi fs.FileInfo, keep fs.FileMode) error {
	if uid, gid, ok := c.ownerOf(fi); ok {
		_ = f.Chown(uid, gid)
	}
	if err := f.Chmod(fi.Mode() & keep); err != nil {
		return err
	}
	tv := unix.NsecToTimeval(fi.ModTime().UnixNano())
	_ = unix.Futimes(int(f.Fd()), []unix.Timeval{tv, tv})
	return nil
}

// ownerOf is the owner of a copy of fi: c.owner, or else fi's owner;
// ok is false when this process may not give it (not root).
func (c *treeCopier) ownerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	if c.owner != nil {
		return c.owner.uid, c.owner.gid, true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
