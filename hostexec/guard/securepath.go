package guard

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// securePath checks that nobody but root or this process's user can change
// what path p runs: p and every directory above it must be owned by root or
// the effective uid, and not writable by group or others — except a
// directory with the sticky bit (/tmp), where others cannot replace an entry
// they do not own. A symlink on the way counts by its owner only (its mode
// means nothing; who may replace it is its directory's business, checked
// next). A workspace that a sandbox user writes fails here even when it is
// not configured as untrusted. Policy checks both the PATH hit (which is
// what the rebuilt line executes) and its symlink-free target, so a symlink
// in a writable directory cannot be swapped between check and exec.
func securePath(p string) error {
	euid := uint32(os.Geteuid())
	for cur := filepath.Clean(p); ; cur = filepath.Dir(cur) {
		fi, err := os.Lstat(cur)
		if err != nil {
			return fmt.Errorf("cannot check %s: %w", cur, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("cannot check the owner of %s", cur)
		}
		if st.Uid != 0 && st.Uid != euid {
			return fmt.Errorf("%s is owned by uid %d (not root or the daemon's user)", cur, st.Uid)
		}
		sticky := fi.IsDir() && fi.Mode()&os.ModeSticky != 0
		link := fi.Mode()&os.ModeSymlink != 0
		if fi.Mode().Perm()&0o022 != 0 && !sticky && !link {
			return fmt.Errorf("%s is writable by group or others (mode %v)", cur, fi.Mode().Perm())
		}
		if cur == "/" || cur == "." {
			return nil
		}
	}
}
