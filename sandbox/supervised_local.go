package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/internal/procfs"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// localSocketWait is how long a connection to a container that has just
// started waits for its supervisor to create the socket.
const (
	localSocketWait  = time.Second
	justStartedFresh = 3 * time.Second
)

// errNoLocalSocket: the supervisor has no socket this process can reach.
var errNoLocalSocket = errors.New("no supervisor socket reachable from this host")

// errInitGone: the container's init process ended (its /proc entry is
// gone).
var errInitGone = errors.New("the container's init process is gone")

// errNoLocalPath: the container's runtime (gVisor) keeps its files out of
// this host's reach; the attach stream is the way, and no failure.
var errNoLocalPath = errors.New("the supervisor socket is not reachable under this runtime")

// localConn is a supervisor connection over its unix socket.
type localConn struct{ net.Conn }

// Local marks the connection as a direct one (supervisor.LocalConn).
func (localConn) Local() bool { return true }

// dialLocal reaches the supervisor of container id through its unix
// socket, as this host sees it: /proc/<container init pid>/root/run/
// sandboxctl/supervisor.sock. Output then flows supervisor → socket →
// sandboxctl with no copy by the Engine, several times the throughput of
// the attach stream. It works only when this process shares the Engine's
// host and pid namespace and may look into the container's root (root, or
// the containers' owner); anything else is an error and the caller uses the
// attach stream.
//
// The socket is trusted only after the kernel confirms who holds it: the
// peer (SO_PEERCRED) must be the container's main process or its direct
// child (the supervisor under docker-init), never a process of the
// sandbox that replaced the socket file. The supervisor in turn accepts
// only peers outside the container's pid namespace.
func (m *DockerEngine) dialLocal(ctx context.Context, id string) (supervisor.Conn, error) {
	insp, err := m.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if isNotFound(err) {
		return nil, fmt.Errorf("sandbox %s: %w: %w", short(id), supervisor.ErrGone, err)
	}
	if err != nil {
		err = m.classify("inspect sandbox "+short(id), err)
		if errors.Is(err, ErrDockerUnreachable) && m.clients.initGone(id) {
			// The Engine is down, and so is the container (its init
			// process is gone, as a dockerd without live-restore takes its
			// containers with it): nothing to reconnect to.
			return nil, fmt.Errorf("%w: %w: sandbox container %s stopped while the Docker Engine does not answer (its init process is gone)",
				supervisor.ErrGone, ErrContainerGone, short(id))
		}
		return nil, err
	}
	if hc := insp.Container.HostConfig; hc != nil && !localRuntime(hc.Runtime) {
		return nil, fmt.Errorf("%w: runtime %s", errNoLocalPath, hc.Runtime)
	}
	st := insp.Container.State
	if st == nil || !st.Running || st.Pid <= 0 {
		return nil, fmt.Errorf("sandbox %s is not running", short(id))
	}
	initPID := st.Pid
	m.clients.sawInit(id, initPID)
	root := filepath.Join("/proc", strconv.Itoa(initPID), "root")
	deadline := time.Now()
	if started, err := time.Parse(time.RFC3339Nano, st.StartedAt); err == nil && time.Since(started) < justStartedFresh {
		deadline = deadline.Add(localSocketWait)
	}
	for {
		conn, err := dialSocketUnder(ctx, root)
		if err == nil {
			if verr := verifySupervisorPeer(conn, initPID, insp.Container.ID); verr != nil {
				_ = conn.Close()
				return nil, verr
			}
			return localConn{conn}, nil
		}
		if !errors.Is(err, errNoLocalSocket) || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// dialSocketUnder connects to the first supervisor socket found in the
// state directories under root (/proc/<pid>/root).
//
// The path is resolved with openat2(RESOLVE_IN_ROOT), as if root were "/":
// a sandbox process that turns the directory or the socket into a symlink
// (say to /var/run/docker.sock) leads the lookup to that path inside the
// sandbox, never on the host. The resolved file must be a socket; the
// connection then goes through /proc/self/fd/N of the O_PATH descriptor,
// so what is connected to is exactly what was checked.
func dialSocketUnder(ctx context.Context, root string) (*net.UnixConn, error) {
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("open %s: %w: %w", root, errInitGone, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(rootFD)
	var d net.Dialer
	for _, dir := range supervisor.StateDirs() {
		rel := strings.TrimPrefix(filepath.Join(dir, supervisor.SocketName), "/")
		fd, err := unix.Openat2(rootFD, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		})
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			continue // not this directory
		}
		if err != nil {
			return nil, fmt.Errorf("resolve %s in the sandbox: %w", rel, err)
		}
		// O_NOFOLLOW: a symlink in the socket's place is opened as the
		// link itself, and refused here.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			_ = unix.Close(fd)
			continue
		}
		conn, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
		_ = unix.Close(fd)
		if err == nil {
			return conn.(*net.UnixConn), nil // a "unix" dial always gives one
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			continue // a stale socket file
		}
		return nil, fmt.Errorf("connect to %s in the sandbox: %w", rel, err)
	}
	return nil, errNoLocalSocket
}

// verifySupervisorPeer checks that the process holding the socket is the
// sandbox's supervisor, as the kernel reports it (SO_PEERCRED):
//   - in the container's cgroup (its id in /proc/PID/cgroup): the pid is
//     this container's, not a reused one nor one of an Engine whose pids
//     are not this host's;
//   - a child of the container's init (initPID) started no later than any
//     other child of it: docker-init's own child, started with the
//     container. A process of the sandbox can become init's child only as
//     an orphan of a plain Engine exec, always started later (orphans of
//     supervised commands go to the supervisor, a subreaper). For a
//     container without --init, initPID itself, pid 1 in the sandbox.
func verifySupervisorPeer(conn syscall.Conn, initPID int, containerID string) error {
	cred, err := supervisor.PeerCred(conn)
	if err != nil {
		return err
	}
	pid := int(cred.Pid)
	st, err := procfs.ReadStat("/proc", pid)
	if err != nil {
		return fmt.Errorf("supervisor socket held by pid %d: %w", pid, err)
	}
	if pid != initPID {
		if st.PPID != initPID {
			return fmt.Errorf("supervisor socket held by pid %d, not a child of the sandbox's init (pid %d)", pid, initPID)
		}
		if err := firstChild(initPID, pid, st.StartTime); err != nil {
			return fmt.Errorf("supervisor socket held by pid %d: %w", pid, err)
		}
	}
	cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return fmt.Errorf("supervisor socket held by pid %d: %w", pid, err)
	}
	if containerID == "" || !strings.Contains(string(cg), containerID) {
		return fmt.Errorf("supervisor socket held by pid %d, which is not in the cgroup of container %s", pid, short(containerID))
	}
	return nil
}

// firstChild checks that no child of parent started before pid (started
// at start, in clock ticks since boot).
func firstChild(parent, pid int, start uint64) error {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", parent, parent))
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(string(data)) {
		other, err := strconv.Atoi(f)
		if err != nil || other == pid {
			continue
		}
		ost, err := procfs.ReadStat("/proc", other)
		if err != nil {
			continue // gone meanwhile
		}
		if ost.StartTime < start {
			return fmt.Errorf("pid %d, another child of the sandbox's init, started earlier: not the supervisor", other)
		}
	}
	return nil
}
