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
func (m *Manager) dialLocal(ctx context.Context, id string) (supervisor.Conn, error) {
	insp, err := m.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, m.classify("inspect sandbox "+short(id), err)
	}
	st := insp.Container.State
	if st == nil || !st.Running || st.Pid <= 0 {
		return nil, fmt.Errorf("sandbox %s is not running", short(id))
	}
	initPID := st.Pid
	root := filepath.Join("/proc", strconv.Itoa(initPID), "root")
	deadline := time.Now()
	if started, err := time.Parse(time.RFC3339Nano, st.StartedAt); err == nil && time.Since(started) < justStartedFresh {
		deadline = deadline.Add(localSocketWait)
	}
	for {
		conn, err := dialSocketUnder(ctx, root)
		if err == nil {
			if verr := verifySupervisorPeer(conn, initPID); verr != nil {
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
func dialSocketUnder(ctx context.Context, root string) (net.Conn, error) {
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
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
			continue // not this directory (or a symlink where the socket should be)
		}
		if err != nil {
			return nil, fmt.Errorf("resolve %s in the sandbox: %w", rel, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			_ = unix.Close(fd)
			continue
		}
		conn, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
		_ = unix.Close(fd)
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			continue // a stale socket file
		}
		return nil, fmt.Errorf("connect to %s in the sandbox: %w", rel, err)
	}
	return nil, errNoLocalSocket
}

// verifySupervisorPeer checks that the process holding the socket is the
// container's main process (initPID) or its child.
func verifySupervisorPeer(conn net.Conn, initPID int) error {
	cred, err := supervisor.PeerCred(conn)
	if err != nil {
		return err
	}
	pid := int(cred.Pid)
	if pid == initPID {
		return nil
	}
	ppid, err := parentPID(pid)
	if err != nil {
		return fmt.Errorf("supervisor socket held by pid %d: %w", pid, err)
	}
	if ppid != initPID {
		return fmt.Errorf("supervisor socket held by pid %d, which is not the sandbox's supervisor (parent %d, want %d)", pid, ppid, initPID)
	}
	return nil
}

// parentPID reads the parent pid of pid from /proc/<pid>/stat.
func parentPID(pid int) (int, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return strconv.Atoi(fields[1])
}
