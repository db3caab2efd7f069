package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// ErrPidsLimit is a command that could not start because the sandbox has
// no room for another process or thread (its pids limit).
var ErrPidsLimit = errors.New("pids limit reached")

// errLauncherDied is a launcher that died before its code ran
// (launcherDied says why).
var errLauncherDied = errors.New("the launcher died before it ran")

// launchStartWait bounds the wait for a launcher's start byte; a launcher
// that has neither run nor died by then is taken as started.
const launchStartWait = 10 * time.Second

// launcherStarted reads the start pipe: false when it ended without the
// launcher's byte (the launcher died before its code ran).
func launcherStarted(r *os.File) bool {
	_ = r.SetReadDeadline(time.Now().Add(launchStartWait))
	var b [1]byte
	n, err := r.Read(b[:])
	return n == 1 || errors.Is(err, os.ErrDeadlineExceeded)
}

// launcherDied says why a launcher died before its code ran, from what it
// wrote (the Go runtime's report when it could not make a thread).
func (sess *session) launcherDied() error {
	var out []byte
	if n := len(sess.readFds); n > 0 {
		f := sess.readFds[n-1] // stderr, or the terminal
		if f.SetReadDeadline(time.Now().Add(200*time.Millisecond)) == nil {
			buf := make([]byte, 16<<10)
			for len(out) < 64<<10 {
				k, err := f.Read(buf)
				out = append(out, buf[:k]...)
				if err != nil {
					break
				}
			}
		}
	}
	if bytes.Contains(out, []byte("failed to create new OS thread")) || bytes.Contains(out, []byte("newosproc")) ||
		bytes.Contains(out, []byte("pthread_create failed")) {
		return fmt.Errorf("%w: the command's launcher could not start a thread", pidsLimitErr())
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if line == "" {
		line = "no output"
	}
	return fmt.Errorf("the command's launcher died before it ran (%s)", line)
}

// pidsLimitErr is ErrPidsLimit with the sandbox's count and limit when its
// cgroup tells them (cgroup v2, then v1).
func pidsLimitErr() error {
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/pids"} {
		cur, err1 := os.ReadFile(dir + "/pids.current")
		lim, err2 := os.ReadFile(dir + "/pids.max")
		if err1 == nil && err2 == nil {
			return fmt.Errorf("%w: the sandbox runs %s of its %s processes and threads", ErrPidsLimit,
				strings.TrimSpace(string(cur)), strings.TrimSpace(string(lim)))
		}
	}
	return fmt.Errorf("%w: the sandbox has no room for another process", ErrPidsLimit)
}
