package apiclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// StartOptions say how to start a daemon in the background.
type StartOptions struct {
	// StateDir is the daemon's state directory.
	StateDir string
	// Command is the argv of a foreground daemon for StateDir, e.g.
	// [/usr/bin/sandboxctld --state DIR serve].
	Command []string
	// CommandErr says why Command is empty (e.g. the daemon binary was not
	// found); it is reported only if a daemon must be started.
	CommandErr error
	// FindCommand, when set and Command is empty, gives Command and
	// CommandErr, only when a daemon must be started: finding the daemon
	// binary costs a command nothing while one runs.
	FindCommand func() ([]string, error)
	// Timeout bounds the wait for /healthz to answer (default 10 s).
	Timeout time.Duration
	// Progress, when set, is told that the daemon is being started; the
	// func it returns is called once it answers or failed (the CLI shows
	// steps that last long on a terminal).
	Progress func(step string) (end func())
}

// EnsureRunning returns a client for the daemon of opts.StateDir, starting one
// first when none answers (as tmux does). The new daemon runs detached: its
// own session (setsid), stdin /dev/null, output appended to
// <StateDir>/daemon.log. Two callers racing here both end up with the same
// daemon: the loser's daemon finds the state directory locked and exits.
func EnsureRunning(ctx context.Context, opts StartOptions) (*Client, error) {
	c := NewUnixClient(api.SocketPath(opts.StateDir))
	if healthy(ctx, c, 2*time.Second) {
		return c, nil
	}
	if err := StartDetached(ctx, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// StartDetached starts a daemon in the background and waits until it answers
// on its socket.
func StartDetached(ctx context.Context, opts StartOptions) error {
	if len(opts.Command) == 0 && opts.CommandErr == nil && opts.FindCommand != nil {
		opts.Command, opts.CommandErr = opts.FindCommand()
	}
	if len(opts.Command) == 0 {
		if opts.CommandErr != nil {
			return fmt.Errorf("daemon: none is running for %s and none can be started: %w", opts.StateDir, opts.CommandErr)
		}
		return errors.New("daemon: no command to start a daemon with")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return fmt.Errorf("daemon: create state directory: %w", err)
	}
	logPath := filepath.Join(opts.StateDir, api.LogFileName)
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("daemon: open log: %w", err)
	}
	defer logFile.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("daemon: open %s: %w", os.DevNull, err)
	}
	defer devNull.Close()

	// Not CommandContext: the daemon must outlive ctx and this process.
	cmd := exec.Command(opts.Command[0], opts.Command[1:]...)
	cmd.Stdin = devNull
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Not the caller's directory, which may be removed while the daemon
	// lives on; the home directory is what a gateway command without a
	// workdir (and no exec.cwd) should see.
	if home, err := os.UserHomeDir(); err == nil {
		cmd.Dir = home
	} else {
		cmd.Dir = "/"
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("daemon: start %s: %w", opts.Command[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if opts.Progress != nil {
		defer opts.Progress("starting the daemon")()
	}

	c := NewUnixClient(api.SocketPath(opts.StateDir))
	deadline := time.NewTimer(opts.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if healthy(ctx, c, time.Second) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("daemon: waiting for the daemon to start: %w", ctx.Err())
		case werr := <-exited:
			// It may have lost a start race to a daemon that is healthy,
			// or that holds the lock and is still starting (it takes the
			// lock before it recovers sessions): wait for that one.
			if healthy(ctx, c, 2*time.Second) {
				return nil
			}
			if locked(opts.StateDir) {
				exited = nil
				continue
			}
			return fmt.Errorf("daemon: the daemon exited during start-up (%v); last lines of %s:\n%s", werr, logPath, logTail(logPath, 2048))
		case <-deadline.C:
			return fmt.Errorf("daemon: no answer on %s within %s; see %s:\n%s", api.SocketPath(opts.StateDir), opts.Timeout, logPath, logTail(logPath, 2048))
		case <-tick.C:
		}
	}
}

// Stop asks the daemon of stateDir to shut down and waits until it has
// released the state directory. It returns nil when no daemon was running.
func Stop(ctx context.Context, stateDir string) error {
	c := NewUnixClient(api.SocketPath(stateDir))
	if !healthy(ctx, c, 2*time.Second) {
		if !locked(stateDir) {
			return nil
		}
		// A daemon that holds the lock but does not answer (its socket
		// was deleted, say): SIGTERM, which shuts it down gracefully, once
		// the kernel confirms that the pid in daemon.pid holds the lock.
		pid, err := api.ReadPIDFile(stateDir)
		if err != nil {
			return fmt.Errorf("daemon: a process holds the state directory but does not answer on %s, and %w", api.SocketPath(stateDir), err)
		}
		if err := holdsLock(pid, filepath.Join(stateDir, api.LockFileName)); err != nil {
			return fmt.Errorf("daemon: pid %d (daemon.pid) does not answer on %s and is not signalled: %w", pid, api.SocketPath(stateDir), err)
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			return fmt.Errorf("daemon: signal pid %d: %w", pid, err)
		}
	} else if err := c.Shutdown(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for locked(stateDir) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("daemon: waiting for the daemon to stop: %w", ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// holdsLock checks in /proc/locks that pid holds a flock on path.
func holdsLock(pid int, path string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return err
	}
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return err
	}
	ino := ":" + strconv.FormatUint(st.Ino, 10)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		// "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"
		if len(f) >= 6 && f[1] == "FLOCK" && f[4] == strconv.Itoa(pid) && strings.HasSuffix(f[5], ino) {
			return nil
		}
	}
	return fmt.Errorf("the kernel lists no lock of pid %d on %s", pid, path)
}

// locked reports whether a daemon holds the state directory's lock. The
// probe takes a shared lock and drops it at once.
func locked(stateDir string) bool {
	f, err := os.Open(filepath.Join(stateDir, api.LockFileName))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

func healthy(ctx context.Context, c *Client, timeout time.Duration) bool {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := c.Health(hctx)
	return err == nil
}

func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	data, _ := io.ReadAll(f)
	return strings.TrimSpace(string(data))
}
