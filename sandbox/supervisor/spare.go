package supervisor

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/api"
)

// SpareLaunchArg, as the first argument of the supervisor binary, makes it
// a spare launcher: a launcher (LaunchArg) started before its commands are
// known, so that a command does not wait for a Go runtime to start before
// it runs. The server keeps one ready once it has started a command
// through its Launcher, and hands it the commands that follow.
//
// The spare is forked as the launcher would be (the command uid, the
// server's process group), raises its OOM score to ChildOOMScoreAdj, makes
// itself non-dumpable (a process of the sandbox that runs as the same uid
// may signal it, but not read its descriptors, its memory or trace it
// while it waits), writes sparePhaseReady on its socket (spareFD) and
// reads orders (spareOrder): a 4-byte big-endian length, that many bytes
// of JSON, and the command's stdin, stdout and stderr (or its terminal,
// once) as SCM_RIGHTS on the first byte. For each it changes into the
// working directory (one it cannot enter is sparePhaseFailed and a
// spareFailure, nothing runs, and it ends), looks the command up as the
// command uid when the path has no slash, writes sparePhaseTaken, and
// forks the command as a child of the server (CLONE_PARENT: the server
// reaps it as any command), with its own process group, or a new session
// with the terminal as its controlling tty, and the descriptors on 0, 1
// and 2; the child inherits the raised score, and its exec makes it
// dumpable. It then writes sparePhaseForked and the child's pid (4 bytes,
// big-endian), and waits for the next order. When it cannot fork (no pid
// is left under the sandbox's pids limit), the command was not found, or
// the kernel is gVisor's (cloneParentReaped), it runs the command in its
// own process instead, as a launcher does: the same steps in itself,
// sparePhaseStarted, the descriptors on 0, 1 and 2, and the exec (or the
// error, as the command's output, and exit 127). It writes nothing on a
// command's descriptors before it reported the start, so a spare that
// dies before (the Go runtime's report of a SIGQUIT, or of a thread it
// could not make) leaves nothing in the output of the command that then
// starts the usual way. EOF on its socket (the server is gone) ends it.
const SpareLaunchArg = "--launch-spare"

// spareFD is the spare launcher's end of its socket.
const spareFD = 3

// The spare's one-byte reports on its socket.
const (
	sparePhaseReady = 'R'
	// sparePhaseTaken: it took the order and starts the command; from
	// here the command may run, so a spare that goes silent is not
	// replaced by another start (errSpareUnconfirmed).
	sparePhaseTaken   = 'T'
	sparePhaseForked  = 'C' // and the child's pid; it stays ready
	sparePhaseStarted = 'S' // it runs the command in its own process
	sparePhaseFailed  = 'F'
)

// spareReplyWait bounds the wait for a spare's answer to an order (it
// takes well under a millisecond); one that does not answer is killed and
// the command starts the usual way.
const spareReplyWait = 3 * time.Second

// spareRefillDelay is how long after a command starts the server starts
// a new spare when the last one was used up: a short command has ended
// and been reported by then, so the spare's fork and runtime start do not
// take its CPU.
const spareRefillDelay = 30 * time.Millisecond

// maxSpareOrder bounds an order's JSON (argv and environment together
// cannot pass execve beyond a few MiB).
const maxSpareOrder = 16 << 20

// spareOrder is the command a spare launcher runs.
type spareOrder struct {
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir,omitempty"`
	// Terminal: one descriptor (the terminal's slave) for 0, 1 and 2, a
	// new session with it as the controlling tty; otherwise three
	// descriptors and a new process group.
	Terminal bool `json:"terminal,omitempty"`
}

// spareFailure follows sparePhaseFailed: the step that failed and its
// errno, so the server reports it as a failed fork would.
type spareFailure struct {
	Step  string `json:"step"`
	Errno int    `json:"errno"`
}

// spareLauncher is a spare the server started: its pid and the server's
// end of its socket.
type spareLauncher struct {
	pid  int
	conn *os.File // non-blocking: reads and writes take deadlines
}

// errSpareGone is a spare that died or broke its socket before it took
// the order: nothing ran, and the command starts the usual way.
var errSpareGone = errors.New("the spare launcher is gone")

// errSpareUnconfirmed is a spare that took the order and then died or
// stalled before it said how the command started: the command may run,
// so it is neither started again nor reported as started.
var errSpareUnconfirmed = errors.New("the spare launcher took the command and stopped answering")

// spareStart is how a spare started a command: the pid that leads it,
// and whether the spare forked it and stays ready for the next one, or
// runs it in its own process.
type spareStart struct {
	pid  int
	kept bool
}

// refillSpare starts a spare launcher unless one is ready or starting.
// Errors are not reported: a sandbox at its pids limit has no room for
// one, and commands start through the Launcher as before.
func (s *Server) refillSpare() {
	s.mu.Lock()
	if s.launcher == "" || s.spare != nil || s.spareStarting || s.spareClosed {
		s.mu.Unlock()
		return
	}
	s.spareStarting = true
	sp, err := s.forkSpare()
	s.mu.Unlock()
	if err == nil {
		err = sp.awaitReady()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spareStarting = false
	if err != nil || s.spareClosed {
		if sp != nil {
			s.dropSpareLocked(sp)
		}
		return
	}
	s.spare = sp
}

// forkSpare forks a spare launcher; s.mu is held, so its pid is the
// server's before endOrphans can see it.
func (s *Server) forkSpare() (*spareLauncher, error) {
	// No package net: it would link cgo's resolver into the supervisor,
	// which must stay static (TestSupervisorBuilds).
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	theirs := os.NewFile(uintptr(fds[1]), "spare-child")
	defer theirs.Close()
	if err := unix.SetNonblock(fds[0], true); err != nil {
		_ = unix.Close(fds[0])
		return nil, err
	}
	ours := os.NewFile(uintptr(fds[0]), "spare")
	null, err := os.Open(os.DevNull)
	if err != nil {
		_ = ours.Close()
		return nil, err
	}
	defer null.Close()
	n := null.Fd()
	pid, err := syscall.ForkExec(s.launcher, []string{os.Args[0], SpareLaunchArg}, &syscall.ProcAttr{
		Env:   []string{"GOMAXPROCS=1"},
		Files: []uintptr{n, n, n, theirs.Fd()},
		Sys:   &syscall.SysProcAttr{Credential: s.cred},
	})
	if err != nil {
		_ = ours.Close()
		return nil, err
	}
	s.sparePID = pid
	return &spareLauncher{pid: pid, conn: ours}, nil
}

// awaitReady reads the spare's ready byte.
func (sp *spareLauncher) awaitReady() error {
	_ = sp.conn.SetReadDeadline(time.Now().Add(launchStartWait))
	var b [1]byte
	if _, err := io.ReadFull(sp.conn, b[:]); err != nil || b[0] != sparePhaseReady {
		return errSpareGone
	}
	return nil
}

// dropSpareLocked ends a spare that will not be used; s.mu is held.
func (s *Server) dropSpareLocked(sp *spareLauncher) {
	_ = sp.conn.Close() // EOF ends it
	if s.sparePID == sp.pid {
		// Not reaped yet (the reaper clears sparePID), so the pid is
		// still the spare's.
		_ = unix.Kill(sp.pid, unix.SIGKILL)
		s.sparePID = 0
	}
	if s.spare == sp {
		s.spare = nil
	}
}

// closeSpare ends the spare for good (Shutdown).
func (s *Server) closeSpare() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spareClosed = true
	if s.spare != nil {
		s.dropSpareLocked(s.spare)
	}
	s.closeSpareLogLocked()
}

// takeSpareLocked hands out the ready spare, if any; s.mu is held. The
// pid stays exempt from endOrphans (sparePID) until the caller registers
// it as a session's leader or drops it (or puts the spare back: it forked
// the command and stays).
func (s *Server) takeSpareLocked() *spareLauncher {
	sp := s.spare
	s.spare = nil
	return sp
}

// run hands the spare a command. It returns errSpareGone when nothing
// ran (the command may start another way), a *spareError when the spare
// refused the command (nothing ran either), errSpareUnconfirmed when the
// command may run but its start is unknown, and otherwise how it started.
// The caller closes sp.conn unless the spare stays (spareStart.kept).
func (sp *spareLauncher) run(o spareOrder, files []uintptr) (spareStart, error) {
	body, err := json.Marshal(o)
	if err != nil {
		return spareStart{}, err
	}
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	msg = append(msg, body...)
	ints := make([]int, len(files))
	for i, f := range files {
		ints[i] = int(f)
	}
	// A process of the sandbox may have stopped it while it waited
	// (SIGSTOP): continued, it takes the order at once instead of being
	// killed after spareReplyWait with s.mu held. (Had it died and its
	// pid been reused meanwhile, SIGCONT would harm nothing.)
	_ = unix.Kill(sp.pid, unix.SIGCONT)
	_ = sp.conn.SetDeadline(time.Now().Add(spareReplyWait))
	rc, err := sp.conn.SyscallConn()
	if err != nil {
		return spareStart{}, errSpareGone
	}
	var n int
	var sendErr error
	err = rc.Write(func(fd uintptr) bool {
		n, sendErr = unix.SendmsgN(int(fd), msg, unix.UnixRights(ints...), nil, 0)
		return sendErr != unix.EAGAIN && sendErr != unix.EINTR
	})
	if err == nil {
		err = sendErr
	}
	if err == nil && n < len(msg) {
		_, err = sp.conn.Write(msg[n:])
	}
	if err != nil {
		return spareStart{}, errSpareGone
	}
	var b [5]byte
	if err := sp.reply(b[:1]); err != nil {
		return spareStart{}, errSpareGone
	}
	switch b[0] {
	case sparePhaseFailed:
		return spareStart{}, sp.failure()
	case sparePhaseTaken:
	default:
		return spareStart{}, errSpareGone
	}
	if err := sp.reply(b[:1]); err != nil {
		return spareStart{}, errSpareUnconfirmed
	}
	switch b[0] {
	case sparePhaseForked:
		if err := sp.reply(b[1:5]); err != nil {
			return spareStart{}, errSpareUnconfirmed
		}
		return spareStart{pid: int(binary.BigEndian.Uint32(b[1:5])), kept: true}, nil
	case sparePhaseStarted:
		return spareStart{pid: sp.pid}, nil
	case sparePhaseFailed:
		return spareStart{}, sp.failure()
	}
	return spareStart{}, errSpareUnconfirmed
}

// reply reads b from the spare: within spareReplyWait, after which a
// stalled spare (a process of the sandbox may stop it) is killed and what
// it wrote before is still read.
func (sp *spareLauncher) reply(b []byte) error {
	_ = sp.conn.SetReadDeadline(time.Now().Add(spareReplyWait))
	n, err := io.ReadFull(sp.conn, b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		_ = unix.Kill(sp.pid, unix.SIGKILL)
		_ = sp.conn.SetReadDeadline(time.Now().Add(launchStartWait))
		_, err = io.ReadFull(sp.conn, b[n:])
	}
	return err
}

// failure reads the spareFailure that follows sparePhaseFailed.
func (sp *spareLauncher) failure() error {
	var f spareFailure
	if err := json.NewDecoder(io.LimitReader(sp.conn, 4<<10)).Decode(&f); err != nil {
		return errSpareGone
	}
	return &spareError{Step: f.Step, Errno: syscall.Errno(f.Errno)}
}

// spareError is a command the spare refused before it ran.
type spareError struct {
	Step  string
	Errno syscall.Errno
}

func (e *spareError) Error() string { return e.Step + ": " + e.Errno.Error() }
func (e *spareError) Unwrap() error { return e.Errno }

// RunSpare is the spare launcher mode (SpareLaunchArg). It returns only if
// it did not exec a command: the server went away (nil), or a failure.
func RunSpare() error {
	if err := setOOMScoreAdj(0, ChildOOMScoreAdj); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_DUMPABLE: %w", err)
	}
	// The commands it forks must not inherit its socket; orders without a
	// working directory run where it started.
	unix.CloseOnExec(spareFD)
	home, err := unix.Open(".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("spare: its working directory: %w", err)
	}
	forks := cloneParentReaped()
	// Idle threads for the runtime to take between an order and the
	// fork: in a sandbox at its pids limit it could not make one.
	ReserveThreads(2)
	warmSpare()
	if err := writeAll(spareFD, []byte{sparePhaseReady}); err != nil {
		return err
	}
	for {
		o, fds, err := readSpareOrder(spareFD)
		if err != nil || o == nil {
			return err // nil: EOF, the server is gone
		}
		if o.Dir == "" {
			err = unix.Fchdir(home)
		} else {
			err = unix.Chdir(o.Dir)
		}
		if err != nil {
			reportFailure("chdir", errnoOf(err))
			return nil
		}
		path := o.Path
		var lookErr error
		if !strings.Contains(path, "/") {
			// As the command uid: the supervisor may not search every PATH
			// directory the command uid may.
			if path, lookErr = lookPath(path, o.Env); lookErr != nil {
				lookErr = fmt.Errorf("%s: %s", o.Path, api.CommandNotFound)
			}
		}
		if err := writeAll(spareFD, []byte{sparePhaseTaken}); err != nil {
			return err // the server is gone: nothing runs
		}
		if lookErr == nil && forks {
			pid, err := o.fork(path, fds)
			if err == nil {
				for _, fd := range fds {
					_ = unix.Close(fd)
				}
				if err := writeAll(spareFD, binary.BigEndian.AppendUint32([]byte{sparePhaseForked}, uint32(pid))); err != nil {
					return err // the server is gone
				}
				continue
			}
			// No fork (no pid left under the sandbox's pids limit, or a
			// step of the child failed): the command runs in this
			// process, which needs no new pid and reports a failure as
			// the launcher does.
		}
		return o.runInPlace(path, fds, lookErr)
	}
}

// cloneParentReaped reports whether the kernel lets the server reap the
// children the spare forks with CLONE_PARENT as they end. gVisor's does
// not: it reports them to the server's wait only once the spare has
// exited (runsc release-2024 and later, TestRuntimeGVisorConcurrent), so
// there the spare runs its one command in place. gVisor names itself in
// /proc/cmdline ("BOOT_IMAGE=/vmlinuz-<release>-gvisor quiet").
func cloneParentReaped() bool {
	b, err := os.ReadFile("/proc/cmdline")
	return err != nil || !strings.Contains(string(b), "-gvisor ")
}

// fork starts the command as a child of the server (CLONE_PARENT), in
// the spare's working directory, with fds on 0, 1 and 2.
func (o *spareOrder) fork(path string, fds []int) (int, error) {
	var files []uintptr
	for _, fd := range o.stdio(fds) {
		files = append(files, uintptr(fd))
	}
	sys := &syscall.SysProcAttr{Cloneflags: unix.CLONE_PARENT}
	if o.Terminal {
		sys.Setsid, sys.Setctty, sys.Ctty = true, true, 0
	} else {
		sys.Setpgid = true
	}
	return syscall.ForkExec(path, o.Argv, &syscall.ProcAttr{Env: o.Env, Files: files, Sys: sys})
}

// runInPlace runs the command in the spare's own process, as a launcher:
// the fork's steps, sparePhaseStarted, the descriptors, the exec. It
// returns only if the command did not run: nil when it was refused
// (reported), otherwise the error, which the caller prints on the
// command's stderr before it exits 127.
func (o *spareOrder) runInPlace(path string, fds []int, lookErr error) error {
	if step, errno := o.prepare(fds); errno != 0 {
		reportFailure(step, errno)
		return nil
	}
	if err := writeAll(spareFD, []byte{sparePhaseStarted}); err != nil {
		return err // the server is gone: nothing runs
	}
	_ = unix.Close(spareFD)
	if err := o.install(fds); err != nil {
		return err
	}
	if lookErr != nil {
		return lookErr
	}
	if err := unix.Exec(path, o.Argv, o.Env); err != nil {
		return fmt.Errorf("exec %s: %w", o.Path, err)
	}
	return nil
}

// warmSpare runs, while the spare waits, the code an order takes (the
// JSON decoder's caches for spareOrder, a PATH search), so that its pages
// are mapped and its caches built before a command waits for them.
func warmSpare() {
	var o spareOrder
	_ = json.Unmarshal([]byte(`{"path":"sh","argv":["sh","-c","true"],"env":["PATH=/usr/bin:/bin"],"dir":"/","terminal":false}`), &o)
	_, _ = lookPath(o.Path, o.Env)
}

// readSpareOrder reads the order and its descriptors (nil, nil, nil at
// EOF before any byte).
func readSpareOrder(fd int) (*spareOrder, []int, error) {
	var head [4]byte
	oob := make([]byte, unix.CmsgSpace(3*4))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(fd, head[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("spare: read the order: %w", err)
	}
	if n == 0 {
		return nil, nil, nil
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, nil, fmt.Errorf("spare: the order's descriptors: %w", err)
		}
		for _, m := range msgs {
			r, err := unix.ParseUnixRights(&m)
			if err != nil {
				return nil, nil, fmt.Errorf("spare: the order's descriptors: %w", err)
			}
			fds = append(fds, r...)
		}
	}
	if err := readFull(fd, head[n:]); err != nil {
		return nil, nil, err
	}
	size := binary.BigEndian.Uint32(head[:])
	if size > maxSpareOrder {
		return nil, nil, fmt.Errorf("spare: an order of %d bytes", size)
	}
	body := make([]byte, size)
	if err := readFull(fd, body); err != nil {
		return nil, nil, err
	}
	var o spareOrder
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, nil, fmt.Errorf("spare: the order: %w", err)
	}
	if len(o.Argv) == 0 || (o.Terminal && len(fds) != 1) || (!o.Terminal && len(fds) != 3) {
		return nil, nil, fmt.Errorf("spare: an order with %d arguments and %d descriptors", len(o.Argv), len(fds))
	}
	return &o, fds, nil
}

// prepare does in this process what a fork for the command does in the
// child, in the order of syscall.ForkExec: the session or process group
// and the controlling tty (the terminal, still on its received
// descriptor). RunSpare changed into the working directory already; the
// descriptors go on 0, 1 and 2 later (install), once the start is
// reported.
func (o *spareOrder) prepare(fds []int) (step string, errno syscall.Errno) {
	if o.Terminal {
		if _, err := unix.Setsid(); err != nil {
			return "setsid", errnoOf(err)
		}
		if err := unix.IoctlSetInt(fds[0], unix.TIOCSCTTY, 0); err != nil {
			return "ioctl(TIOCSCTTY)", errnoOf(err)
		}
	} else if err := unix.Setpgid(0, 0); err != nil {
		return "setpgid", errnoOf(err)
	}
	return "", 0
}

// errnoOf is err's errno (EINVAL for an error that carries none).
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if !errors.As(err, &e) {
		e = unix.EINVAL
	}
	return e
}

// reportFailure tells the server that the step of its command failed:
// sparePhaseFailed and the spareFailure.
func reportFailure(step string, errno syscall.Errno) {
	b, _ := json.Marshal(spareFailure{Step: step, Errno: int(errno)})
	_ = writeAll(spareFD, append([]byte{sparePhaseFailed}, b...))
}

// install puts the command's descriptors on 0, 1 and 2 (the received ones
// are close-on-exec).
func (o *spareOrder) install(fds []int) error {
	for i, src := range o.stdio(fds) {
		if err := unix.Dup3(src, i, 0); err != nil {
			return fmt.Errorf("spare: dup3: %w", err)
		}
	}
	return nil
}

// stdio is the command's descriptors for 0, 1 and 2: the three received,
// or the terminal for all three.
func (o *spareOrder) stdio(fds []int) [3]int {
	if o.Terminal {
		return [3]int{fds[0], fds[0], fds[0]}
	}
	return [3]int{fds[0], fds[1], fds[2]}
}

// writeAll writes b to a blocking descriptor.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// readFull fills b from a blocking descriptor.
func readFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Read(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("spare: read the order: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("spare: read the order: %w", io.ErrUnexpectedEOF)
		}
		b = b[n:]
	}
	return nil
}
