package hostsup

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/internal/procfs"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// Serve runs the host supervisor of dir in this process until ctx ends
// (SIGTERM), then ends what still runs. It is what Options.Command runs.
func Serve(ctx context.Context, dir string, logf func(format string, args ...any)) error {
	if dir == "" {
		return fmt.Errorf("hostsup: serve: no state directory")
	}
	// Orphans of the commands reparent here: reaped, and findable by tag.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("hostsup: PR_SET_CHILD_SUBREAPER: %w", err)
	}
	// Commands run as the same user: they must not read this process's
	// memory or open its descriptors.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("hostsup: PR_SET_DUMPABLE: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("hostsup: %w", err)
	}
	lock, err := holdLock(dir)
	if err != nil {
		return fmt.Errorf("hostsup: %w", err)
	}
	defer lock.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("hostsup: %w", err)
	}
	defer devnull.Close()
	srv := supervisor.NewServer(supervisor.ServerOptions{
		In: devnull, Out: discard{}, Logf: logf,
		Dirs:   []string{dir},
		Socket: supervisor.SocketName, AcceptPeer: notMine,
		// Commands get exactly the environment the daemon built.
		BaseEnv: nil,
	})
	if srv.SocketPath() == "" {
		return fmt.Errorf("hostsup: no socket in %s (see the log above)", dir)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchOrphaned(ctx, cancel, dir, srv, logf)
	err = srv.Serve(ctx)
	srv.Shutdown(2 * time.Second)
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// orphanCheckEvery is how often the supervisor looks whether its state
// directory is still there.
const orphanCheckEvery = 2 * time.Second

// watchOrphaned ends an idle supervisor whose state directory was removed
// or replaced (its node agent or daemon went away for good, e.g. a node
// agent restarted with another state directory, issue 32 item 9): nobody
// can reach it any more. A supervisor that still runs a command stays
// until the command ends: the command is not cut.
func watchOrphaned(ctx context.Context, stop context.CancelFunc, dir string, srv *supervisor.Server, logf func(string, ...any)) {
	var orig unix.Stat_t
	if err := unix.Stat(dir, &orig); err != nil {
		return
	}
	t := time.NewTicker(orphanCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var st unix.Stat_t
		err := unix.Stat(dir, &st)
		if err == nil && st.Dev == orig.Dev && st.Ino == orig.Ino {
			continue
		}
		if n := srv.Running(); n > 0 {
			continue
		}
		logf("hostsup: state directory %s is gone and no command runs: stopping", dir)
		stop()
		return
	}
}

// notMine accepts a socket peer of this process's uid that is none of its
// descendants: the daemon, never a command the supervisor runs (nor a
// process such a command started, which is a descendant too, reparented
// here if it was orphaned).
func notMine(cred *unix.Ucred) error {
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("peer uid %d is not %d", cred.Uid, os.Getuid())
	}
	self := os.Getpid()
	for pid, hops := int(cred.Pid), 0; pid > 1 && hops < 4096; hops++ {
		if pid == self {
			return fmt.Errorf("peer pid %d is a process this supervisor runs", cred.Pid)
		}
		st, err := procfs.ReadStat("/proc", pid)
		if err != nil {
			return fmt.Errorf("peer pid %d: %w", cred.Pid, err)
		}
		pid = st.PPID
	}
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
