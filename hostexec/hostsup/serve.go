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
	err = srv.Serve(ctx)
	srv.Shutdown(2 * time.Second)
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
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
