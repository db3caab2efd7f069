package workdir

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// PrepareWorkspace creates dir (mode 0700, parents as needed) and makes it
// writable to the sandbox user: user is the container's "uid[:gid]". A
// daemon running as root hands the directory itself (not its contents, and
// never through a symlink) to that uid:gid when root still owns it; any
// other daemon runs sandboxes as its own uid (see
// sandboxconfig.EffectiveUser), so the directory is already theirs. A user
// given by name cannot be mapped to a host uid and is left alone.
func PrepareWorkspace(dir, user string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("workspace dir: %w", err)
	}
	uid, gid, ok := NumericUser(user)
	if !ok || uid == 0 || os.Geteuid() != 0 {
		// The daemon's own (or a named user's, left alone): no other
		// local user reads it.
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && ok {
			if err := os.Chmod(dir, 0o700); err != nil {
				return fmt.Errorf("workspace dir: %w", err)
			}
		}
		return nil
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("workspace dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() || st.Uid != 0 {
		return nil // a symlink, or already handed to someone: leave it
	}
	if gid < 0 {
		gid = int(st.Gid)
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return fmt.Errorf("workspace dir: give it to the sandbox user %s: %w", user, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("workspace dir: %w", err)
	}
	return nil
}

// NumericUser parses a container user given as "uid" or "uid:gid" (gid
// -1 when absent); ok is false for a user given by name.
func NumericUser(user string) (uid, gid int, ok bool) {
	u, g, hasG := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil || uid < 0 {
		return 0, 0, false
	}
	gid = -1
	if hasG {
		if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
			return 0, 0, false
		}
	}
	return uid, gid, true
}
